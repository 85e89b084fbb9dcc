/// \file
/// zkr::lock_view — one side of a distributed lock: the whole of a zkr::mutex, or the read or
/// write side of a zkr::shared_mutex. It is what std::lock_guard and std::unique_lock lock.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/lock_ops.hpp"
#include "zkr/lock_hold.hpp"
#include "zkr/lock_types.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <cassert>
#include <chrono>
#include <string>
#include <vector>

namespace zkr {

/// Meets the standard's Lockable and TimedLockable requirements.
///
/// Two kinds of holds:
/// - **Blocking** (lock, try_lock*, unlock): a hold belongs to (client, lock path, side,
///   thread), like a ReentrantLock: the thread that locked must unlock, and re-locking on that
///   thread (also through another lock object for the same path and side, through the same
///   client) re-enters the same hold.
/// - **Async** (async_lock): a hold belongs to the zkr::lock_hold the operation completes with.
///   It never re-enters anything: two coroutines on one thread exclude each other.
///
/// A hold ends with its last release, or with its session: then state() says lost, on_lost
/// handlers and async_wait_lost fire, and the holder must stop touching what the lock protects.
/// fencing_token() lets that resource turn a stale holder away.
///
/// Outage behaviour (details in docs/failure-semantics.md): every timed call returns by its
/// deadline (plus scheduling slack); try_lock and try_lock_for report connection trouble as "not
/// acquired" (their error_code& forms say why); lock() waits for the lock as long as it takes
/// but gives up on connection trouble once the client's retry policy does.
///
/// Lifetime: the lock may outlive its client; it then fails with errc::client_closed. Destroying
/// a lock object does not release blocking holds (they belong to threads).
class ZKR_EXPORT lock_view {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// Blocks until held. Throws zkr::system_error when it cannot be acquired: errc::lock_lost if
    /// the calling thread's hold was lost; errc::upgrade_refused for a read holder asking for the
    /// write side; errc::client_closed; connection trouble once the retry policy gives up.
    void lock() { detail::acquire(target_, write_, true, std::nullopt, nullptr); }
    /// One round: true if held now. Leaves no node behind when not. Connection trouble is "not
    /// acquired" (returns false); other errors throw. A client that has lost its connection
    /// answers at once; a new client's first connection is waited for, up to a session timeout.
    bool try_lock() { return detail::acquire(target_, write_, false, std::nullopt, nullptr); }
    /// As try_lock(); `ec` says why it was not acquired (none: the lock is taken), and gets the
    /// errors try_lock() would throw.
    bool try_lock(error_code& ec) { return detail::acquire(target_, write_, false, std::nullopt, &ec); }
    /// Waits up to `timeout`; returns by then. Connection trouble is "not acquired".
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return detail::acquire(target_, write_, true, deadline_after(timeout), nullptr);
    }
    /// As try_lock_for(timeout); `ec` says why it was not acquired, and gets the errors
    /// try_lock_for() would throw.
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout, error_code& ec) {
        return detail::acquire(target_, write_, true, deadline_after(timeout), &ec);
    }
    /// Waits until `deadline` (any clock; converted to the steady clock once, at the call);
    /// returns by then. Connection trouble is "not acquired".
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return detail::acquire(target_, write_, true, detail::to_steady(deadline), nullptr);
    }
    /// As try_lock_until(deadline); `ec` says why it was not acquired, and gets the errors
    /// try_lock_until() would throw.
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline, error_code& ec) {
        return detail::acquire(target_, write_, true, detail::to_steady(deadline), &ec);
    }
    /// Releases one level of the calling thread's hold. Never throws (the standard requires it)
    /// and returns at once: the node's delete is sent, guaranteed, and ordered before anything
    /// this client sends next. Called by a thread that holds nothing here, it is a bug of the
    /// caller's: the lock is left as it was, an error is logged and counted
    /// (statistics().unowned_unlocks), and a debug build (NDEBUG unset) asserts. Use release()
    /// to get an exception instead, or async holds (lock_hold) where threads hop.
    void unlock() noexcept {
        [[maybe_unused]] bool owned = detail::unlock(target_, write_);
        assert(owned && "zkr: unlock() by a thread that holds nothing here (see zkr::lock_view::unlock)");
    }
    /// Like unlock(), but a thread that holds nothing gets zkr::system_error(errc::not_owner)
    /// and the lock stays as it was.
    void release();

    /// Acquires a hold of its own: it completes with the zkr::lock_hold that owns it (empty on
    /// error). Handler: void(zkr::error_code, zkr::lock_hold); runs on the handler's associated
    /// executor, by default the client's. Errors: errc::cancelled (per-operation cancellation,
    /// any type: our node and watch are removed), errc::client_closed, connection trouble once the
    /// retry policy gives up, errc::attempts_exhausted. If the handler is destroyed without being
    /// called, the hold it carried is released.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_lock(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, lock_hold)>(
            detail::initiation{get_executor(),
                               [target = target_, write = write_](auto handler) {
                                   detail::start_acquire(target, write, std::move(handler));
                               }},
            token);
    }

    /// Completes with errc::lock_lost when the calling thread's hold is lost (its session ended,
    /// or someone deleted its node), or errc::cancelled once it is released first or the wait is
    /// cancelled (per-operation cancellation, any type); errc::not_owner if the thread holds
    /// nothing. Handler: void(zkr::error_code).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_lost(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(), [target = target_, write = write_](auto handler) {
                                   detail::start_wait_lost(target, write, std::move(handler));
                               }},
            token);
    }
    /// Calls `handler(node path)` on the client's executor whenever a hold of this lock path
    /// through this client (blocking or async) is lost.
    [[nodiscard]] subscription on_lost(std::function<void(const std::string& node)> handler) {
        return detail::on_lost(target_, std::move(handler));
    }

    /// The calling thread's hold count on this side (0 when it holds nothing).
    int hold_count() const { return detail::hold_count(target_, write_); }
    /// hold_count() > 0.
    bool is_held_by_current_thread() const { return hold_count() > 0; }
    /// Some owner in this process holds the lock (either side) through this client.
    bool is_acquired_in_this_process() const { return detail::acquired_in_process(target_); }
    /// The calling thread's standing: not_held, held, uncertain (connection suspect) or lost.
    lock_state state() const { return detail::state(target_, write_); }
    /// Until when the calling thread's hold is certainly still its own (the session's lease),
    /// while state() is held; the epoch otherwise.
    std::chrono::steady_clock::time_point valid_until() const { return detail::valid_until(target_, write_); }
    /// The czxid of the calling thread's lock node: ensemble-wide and increasing, so a resource
    /// can refuse a holder whose token is lower than one it has seen. Throws errc::not_owner.
    std::int64_t fencing_token() const { return detail::fencing_token(target_, write_); }
    /// The calling thread's lock node. Throws errc::not_owner.
    std::string node_path() const { return detail::node_path(target_, write_); }
    /// A guard of the calling thread's hold for client::multi: the transaction fails whole, with
    /// errc::lock_lost naming the lock, once the hold's node is gone — whatever this process
    /// believes (docs/lock-loss-and-fencing.md). Throws errc::not_owner.
    op::guard guard() const { return detail::guard(target_, write_); }
    /// Everyone in the queue, holders first, with their owners (one listing, one read per node;
    /// a node whose data may not be read is listed with owner_error set). Read from this
    /// client's server: ZooKeeper orders reads per client, so a contender that queued through
    /// another server a moment ago may show only after this client's next write.
    std::vector<participant> participants() const { return detail::participants(target_); }
    /// The lock path.
    const std::string& path() const noexcept { return target_.path; }
    /// Counters of the client's lock engine.
    lock_statistics statistics() const { return detail::statistics(target_); }
    /// The client's executor (where handlers run by default).
    executor_type get_executor() const { return detail::executor(target_); }

protected:
    /// Made by zkr::mutex and zkr::shared_mutex: `write` selects the side (the whole of a mutex).
    lock_view(detail::lock_target target, bool write) : target_(std::move(target)), write_(write) {}
    friend class shared_mutex;

    /// The steady-clock time `timeout` from now, rounded up; a timeout too long for the steady
    /// clock waits for ever (time_point::max()) instead of overflowing into the past.
    template <class Rep, class Period>
    static std::chrono::steady_clock::time_point deadline_after(const std::chrono::duration<Rep, Period>& timeout) {
        return detail::deadline_after(timeout);
    }

    detail::lock_target target_;  ///< the client's lock engine and the lock path
    bool write_;                  ///< the write side (or the mutex), else the read side
};

}  // namespace zkr
