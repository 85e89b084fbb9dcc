// The lock engine of one zkr::client: runs acquisitions (acquire_fsm) against the client, keeps
// the holds of this process (re-entry, loss reporting) and deletes released nodes, guaranteed.
// Shared by zkr::mutex and zkr::shared_mutex.
#pragma once

#include "acquire_fsm.hpp"
#include "client_impl.hpp"
#include "zkr/lock_types.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <thread>

namespace zkr::detail {

/// One thread's hold of one lock (of one kind) through one client.
struct hold {
    std::string lock_path;
    std::string node_path;
    lock_kind kind = lock_kind::exclusive;
    std::thread::id thread;
    std::int64_t session = 0;
    std::int64_t czxid = 0;
    int count = 1;               // guarded by the engine's mutex
    bool lost = false;           // guarded by the engine's mutex
    bool keep_node = false;      // a downgraded write hold: its node stays while the read hold lasts
    std::shared_ptr<hold> pinned_write;  // a downgrade's read hold: the write node it keeps in place
    std::vector<completion<>> lost_waiters;  // guarded by the engine's mutex
};


class lock_engine : public std::enable_shared_from_this<lock_engine> {
public:
    class acquisition;
    /// Called once: the hold on success, else null with the error (none for a failed try).
    using done_fn = std::function<void(zkr::error_code, std::shared_ptr<hold>)>;

    explicit lock_engine(client_impl& c);
    ~lock_engine();
    static std::shared_ptr<lock_engine> of(client_impl& c);

    /// Starts acquiring for `thread`. The returned handle cancels it.
    std::shared_ptr<acquisition> acquire(acquire_options options, std::thread::id thread,
                                         std::optional<std::chrono::steady_clock::time_point> deadline, done_fn done);
    static void cancel(const std::shared_ptr<acquisition>& a);

    std::shared_ptr<hold> find(const std::string& lock_path, lock_kind kind, std::thread::id thread) const;
    bool any_hold(const std::string& lock_path) const;
    /// Counts a re-entry of the calling thread's hold: errc::lock_lost if that hold was lost.
    zkr::error_code reenter(hold& h);
    int hold_count(const hold& h) const;
    /// One release of `thread`'s hold: errc::not_owner if it has none. The last one deletes the node.
    zkr::error_code release(const std::string& lock_path, lock_kind kind, std::thread::id thread);
    lock_state state_of(const hold& h) const;

    /// Completes with errc::lock_lost when `h` is lost, or errc::cancelled when it is released first.
    void wait_lost(const std::shared_ptr<hold>& h, completion<> done);
    /// Calls `fn(node path)` on the client's executor when a hold on `lock_path` is lost.
    subscription on_lost(const std::string& lock_path, std::function<void(const std::string&)> fn);

    /// Deletes `path`, resending it while the session that made it lives (CURATOR-678).
    void guaranteed_delete(std::string path);

    /// Deletes every child of `lock_path` carrying one of `prefixes` (ours, from creates whose
    /// outcome was never settled).
    void sweep(const std::string& lock_path, std::vector<std::string> prefixes);

    /// The queue of a lock path, holders first, with each owner.
    std::vector<participant> participants(const std::string& lock_path, bool read_write);

    lock_statistics statistics() const;
    client_impl& client() const { return client_; }
    void count_wakeup();

private:
    struct lost_listener {
        std::string lock_path;
        std::function<void(const std::string&)> fn;
        std::atomic<bool> active{true};
    };

    void on_state(connection_state s);
    void register_hold(const std::shared_ptr<hold>& h, bool pins_write_node);
    void delete_attempt(std::string path, std::int64_t session, int attempt);

    client_impl& client_;
    subscription state_subscription_;

    mutable std::mutex mutex_;
    std::multimap<std::string, std::shared_ptr<hold>> holds_;
    std::multimap<std::string, std::shared_ptr<lost_listener>> listeners_;
    std::vector<std::weak_ptr<boost::asio::steady_timer>> retry_timers_;

    struct counters {
        std::atomic<std::uint64_t> acquisitions{0}, reentries{0}, wakeups{0}, nodes_created{0}, nodes_adopted{0},
            stale_nodes_deleted{0}, delete_retries{0}, holds_lost{0};
    };
    counters counters_;
    friend class acquisition;
};

/// A fresh random uuid ("8-4-4-4-12" hex), as Curator's protected names carry.
std::string random_uuid();

}  // namespace zkr::detail
