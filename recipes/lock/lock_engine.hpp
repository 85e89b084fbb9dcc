// The lock engine of one zkr::client: the mutex's and the read/write lock's side of the recipe
// toolkit. It runs acquisitions (a queue_fsm under fsm_runner), keeps the holds of this process
// for re-entry (per thread for blocking holds, per lock_hold for async ones) and downgrades, and
// releases them. Loss reporting is the hold registry's, deletes are the cleanup service's. It
// holds its client weakly: a lock used after its client is gone gets errc::client_closed.
#pragma once

#include "toolkit/cleanup.hpp"
#include "toolkit/fsm_runner.hpp"
#include "toolkit/hold.hpp"
#include "toolkit/queue_fsm.hpp"
#include "zkr/lock_types.hpp"

#include <chrono>
#include <map>
#include <memory>

namespace zkr::detail {

/// One owner's hold of one lock (of one kind) through one client. The owner is a thread (the
/// blocking API: re-entrant per thread) or one async acquisition (its lock_hold).
struct lock_claim : hold {
    lock_claim(std::string lock_path, std::string node_path, std::int64_t session, std::int64_t czxid, queue_kind kind,
               std::uint64_t owner, bool async_owned)
        : hold(std::move(lock_path), std::move(node_path), session, czxid),
          kind(kind), owner(owner), async_owned(async_owned) {}
    const queue_kind kind;
    const std::uint64_t owner;
    const bool async_owned;
    // Guarded by the engine's mutex:
    int count = 1;
    bool keep_node = false;                    // a downgraded write hold: its node stays while the read hold lasts
    std::shared_ptr<lock_claim> pinned_write;  // a downgrade's read hold: the write node it keeps in place
};

/// The owner id of the calling thread's blocking holds.
std::uint64_t current_thread_owner();
/// A fresh owner id for one async acquisition.
std::uint64_t new_async_owner();
/// How an acquisition given up with `ec` ended, for the observer.
acquire_outcome outcome_of(error_code ec);

class lock_engine : public std::enable_shared_from_this<lock_engine> {
public:
    using runner = fsm_runner<queue_fsm>;
    /// Called once: the hold on success, else null with the error (none for a try that found
    /// the lock taken).
    using done_fn = std::function<void(error_code, std::shared_ptr<lock_claim>)>;

    explicit lock_engine(session_port& port);
    void attach() {}
    /// The engine of a client, made on first use; throws errc::client_closed for a closed client.
    static std::shared_ptr<lock_engine> of(session_port& port) { return per_client<lock_engine>(port); }

    /// Starts acquiring for `owner`. `done` runs by the deadline at the latest: the cleanup of
    /// an acquisition given up (deadline, cancel) goes on in the background, its node's delete
    /// sent before `done` runs whenever the node is known. The returned runner cancels it.
    /// `observed`: the recipe the client's observer is told of (its acquisition, then its hold's
    /// release or loss); none for a lock a recipe uses inside (the semaphore's mutex).
    std::shared_ptr<runner> acquire(queue_options options, std::uint64_t owner, bool async_owned,
                                    std::optional<std::chrono::steady_clock::time_point> deadline, done_fn done,
                                    std::optional<recipe_kind> observed = std::nullopt);
    static void cancel(const std::shared_ptr<runner>& r);

    std::shared_ptr<lock_claim> find(const std::string& lock_path, queue_kind kind, std::uint64_t owner) const;
    bool any_hold(const std::string& lock_path) const;
    /// Counts a re-entry of an owner's hold: errc::lock_lost if that hold was lost.
    error_code reenter(lock_claim& h);
    int hold_count(const lock_claim& h) const;
    /// One release of `owner`'s hold: errc::not_owner if it has none. The last one deletes the node.
    error_code release(const std::string& lock_path, queue_kind kind, std::uint64_t owner);
    /// Releases `h` whatever its count (an async hold is released once). `done` (optional) runs
    /// once the node's delete is acknowledged: no error, lock_lost (its session went, and the
    /// node with it) or client_closed.
    void release_all(const std::shared_ptr<lock_claim>& h, std::optional<completion<>> done);
    lock_state state_of(const hold& h) const { return holds_->state_of(h); }
    std::chrono::steady_clock::time_point valid_until(const hold& h) const { return holds_->valid_until(h); }
    void wait_lost(const std::shared_ptr<hold>& h, completion<> done, boost::asio::cancellation_slot slot = {}) {
        holds_->wait_lost(h, std::move(done), slot);
    }
    subscription on_lost(const std::string& lock_path, std::function<void(const std::string&)> fn) {
        return holds_->on_lost(lock_path, std::move(fn));
    }

    /// The queue of a lock path, holders first, with each owner. Throws when it cannot list.
    std::vector<participant> participants(const std::string& lock_path, bool read_write);

    lock_statistics statistics() const;
    /// The client, or null once it is gone.
    std::shared_ptr<session_port> client() const { return port_.lock(); }
    /// Where user handlers run (kept: the client may be gone by the time they do).
    const boost::asio::any_io_executor& executor() const { return executor_; }
    void count_unowned_unlock() { ++counters_.unowned_unlocks; }

private:
    void register_hold(const std::shared_ptr<lock_claim>& h, bool pins_write_node);
    void mark_holding(const std::string& node_path, const std::string& owner_data);
    void count(const queue_fsm& m, bool acquired);

    std::weak_ptr<session_port> port_;
    boost::asio::any_io_executor executor_;
    std::shared_ptr<hold_registry> holds_;
    std::shared_ptr<cleanup_service> cleanup_;

    mutable std::mutex mutex_;
    std::multimap<std::string, std::shared_ptr<lock_claim>> claims_;  // by lock path

    struct counters {
        std::atomic<std::uint64_t> acquisitions{0}, reentries{0}, wakeups{0}, nodes_created{0}, nodes_adopted{0},
            stale_nodes_deleted{0}, unowned_unlocks{0}, handoffs_without_listing{0}, holding_marks{0};
    };
    counters counters_;
};

}  // namespace zkr::detail
