// The lock engine of one zkr::client: runs acquisitions (acquisition.hpp), keeps the holds of
// this process (re-entry, loss reporting), and deletes released nodes, guaranteed
// (guaranteed.cpp). Shared by zkr::mutex and zkr::shared_mutex. It holds its client weakly: a
// lock used after its client is gone gets errc::client_closed.
#pragma once

#include "acquire_fsm.hpp"
#include "client_impl.hpp"
#include "zkr/lock_types.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <map>
#include <memory>

namespace zkr::detail {

/// One owner's hold of one lock (of one kind) through one client. The owner is a thread (the
/// blocking API: re-entrant per thread) or one async acquisition (its lock_hold).
struct hold {
    std::string lock_path;
    std::string node_path;
    lock_kind kind = lock_kind::exclusive;
    std::uint64_t owner = 0;
    bool async_owned = false;
    std::int64_t session = 0;
    std::int64_t czxid = 0;
    // Guarded by the engine's mutex:
    int count = 1;
    bool lost = false;
    bool released = false;       // its last release happened
    bool keep_node = false;      // a downgraded write hold: its node stays while the read hold lasts
    std::shared_ptr<hold> pinned_write;  // a downgrade's read hold: the write node it keeps in place
    std::vector<completion<>> lost_waiters;
    live_counter<&live_objects::holds> counted;
};

/// The owner id of the calling thread's blocking holds.
std::uint64_t current_thread_owner();
/// A fresh owner id for one async acquisition.
std::uint64_t new_async_owner();

class acquisition;

class lock_engine : public std::enable_shared_from_this<lock_engine> {
public:
    /// Called once: the hold on success, else null with the error (none for a try that found
    /// the lock taken).
    using done_fn = std::function<void(error_code, std::shared_ptr<hold>)>;

    explicit lock_engine(client_impl& c);
    ~lock_engine();
    /// The engine of a client, made on first use; throws errc::client_closed for a closed client.
    static std::shared_ptr<lock_engine> of(client_impl& c);

    /// Starts acquiring for `owner`. `done` runs by the deadline at the latest: the cleanup of
    /// an acquisition given up (deadline, cancel) goes on in the background. The returned handle
    /// cancels it.
    std::shared_ptr<acquisition> acquire(acquire_options options, std::uint64_t owner, bool async_owned,
                                         std::optional<std::chrono::steady_clock::time_point> deadline, done_fn done);
    static void cancel(const std::shared_ptr<acquisition>& a);

    std::shared_ptr<hold> find(const std::string& lock_path, lock_kind kind, std::uint64_t owner) const;
    bool any_hold(const std::string& lock_path) const;
    /// Counts a re-entry of an owner's hold: errc::lock_lost if that hold was lost.
    error_code reenter(hold& h);
    int hold_count(const hold& h) const;
    /// One release of `owner`'s hold: errc::not_owner if it has none. The last one deletes the node.
    error_code release(const std::string& lock_path, lock_kind kind, std::uint64_t owner);
    /// Releases `h` whatever its count (an async hold is released once). `done` (optional) runs
    /// once the node's delete is acknowledged: no error, lock_lost (its session went, and the
    /// node with it) or client_closed.
    void release_all(const std::shared_ptr<hold>& h, std::optional<completion<>> done);
    lock_state state_of(const hold& h) const;
    /// Until when the hold is the server's truth at least: its session's lease.
    std::chrono::steady_clock::time_point valid_until(const hold& h) const;

    /// Completes with errc::lock_lost when `h` is lost, or errc::cancelled when it is released first.
    void wait_lost(const std::shared_ptr<hold>& h, completion<> done);
    /// Calls `fn(node path)` on the client's executor when a hold on `lock_path` is lost.
    subscription on_lost(const std::string& lock_path, std::function<void(const std::string&)> fn);

    /// Deletes `path`, resending it while the session current now lives (CURATOR-678).
    void guaranteed_delete(std::string path, std::optional<completion<>> done = std::nullopt);
    /// Deletes every child of `lock_path` carrying one of the prefixes, listing again while
    /// the prefix's session lives (creates whose outcome was never settled).
    void sweep(const std::string& lock_path, std::vector<unsettled_create> creates);

    /// The queue of a lock path, holders first, with each owner. Throws when it cannot list.
    std::vector<participant> participants(const std::string& lock_path, bool read_write);

    lock_statistics statistics() const;
    /// The client, or null once it is gone.
    std::shared_ptr<client_impl> client() const { return client_.lock(); }
    /// Where user handlers run (kept: the client may be gone by the time they do).
    const boost::asio::any_io_executor& executor() const { return executor_; }
    boost::asio::io_context& session_context() const { return threads_->session; }

    void count_wakeup() { ++counters_.wakeups; }
    void count_acquisition_stats(int stale_deleted, bool adopted, int handoffs_without_listing);
    void count_unowned_unlock() { ++counters_.unowned_unlocks; }

private:
    friend class acquisition;
    struct lost_listener {
        std::string lock_path;
        std::function<void(const std::string&)> fn;
        std::atomic<bool> active{true};
    };

    void on_session(const session_event& ev);
    void register_hold(const std::shared_ptr<hold>& h, bool pins_write_node);
    std::vector<std::string> unregister(const std::shared_ptr<hold>& h, std::vector<completion<>>& waiters);
    void delete_attempt(std::string path, std::int64_t session, int attempt, std::shared_ptr<completion<>> done);
    void sweep_attempt(std::string lock_path, std::vector<unsettled_create> creates, int attempt);
    void retry_later(int attempt, std::function<void()> again);

    std::weak_ptr<client_impl> client_;
    std::shared_ptr<runtime> threads_;  // keeps the io_context of our timers alive
    boost::asio::any_io_executor executor_;
    subscription session_subscription_;

    mutable std::mutex mutex_;
    std::multimap<std::string, std::shared_ptr<hold>> holds_;
    std::multimap<std::string, std::shared_ptr<lost_listener>> listeners_;
    std::vector<std::weak_ptr<boost::asio::steady_timer>> retry_timers_;
    bool closed_ = false;

    struct counters {
        std::atomic<std::uint64_t> acquisitions{0}, reentries{0}, wakeups{0}, nodes_created{0}, nodes_adopted{0},
            stale_nodes_deleted{0}, delete_retries{0}, holds_lost{0}, unowned_unlocks{0}, handoffs_without_listing{0},
            holding_marks{0};
    };
    counters counters_;
};

/// A fresh random uuid ("8-4-4-4-12" hex), as Curator's protected names carry.
std::string random_uuid();

}  // namespace zkr::detail
