// zkr::lock_view — one side of a distributed lock: the whole of a zkr::mutex, or the read or
// write side of a zkr::shared_mutex. It is what std::lock_guard and std::unique_lock lock.
#pragma once

#include "zkr/client.hpp"
#include "zkr/detail/lock_ops.hpp"
#include "zkr/lock_types.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace zkr {

/// Meets the standard's Lockable and TimedLockable requirements.
///
/// Holds belong to (client, lock path, side, thread): the thread that locked must unlock, and
/// another lock object for the same path and side, used on the same thread through the same
/// client, re-enters the same hold. A hold ends with its last unlock, or with its session: then
/// state() says lost, on_lost handlers and async_wait_lost fire, and the holder must stop
/// touching what the lock protects. fencing_token() lets that resource turn a stale holder away.
///
/// Lifetime: the client must outlive the lock. Destroying a lock object does not release holds.
class lock_view {
public:
    /// Blocks until held. Throws zkr::system_error when it cannot be acquired (errc::lock_lost if
    /// the calling thread's hold was lost; errc::upgrade_refused for a read holder asking for the
    /// write side; client closed; session trouble beyond the retry policy).
    void lock() { detail::acquire(target_, write_, true, std::nullopt); }
    /// One round: true if held now. Leaves no node behind when not.
    bool try_lock() { return detail::acquire(target_, write_, false, std::nullopt); }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return detail::acquire(target_, write_, true,
                               std::chrono::steady_clock::now() +
                                   std::chrono::ceil<std::chrono::steady_clock::duration>(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return detail::acquire(target_, write_, true, detail::to_steady(deadline));
    }
    /// Never throws (the standard requires it); a call by a thread that holds nothing is logged
    /// and ignored. Returns at once: the node's delete is sent, guaranteed, and ordered before
    /// anything this client sends next.
    void unlock() noexcept;
    /// Like unlock(), but a thread that holds nothing gets zkr::system_error(errc::not_owner)
    /// and the lock stays as it was.
    void release();

    /// Acquires for the initiating thread. Handler: void(zkr::error_code). Per-operation
    /// cancellation (terminal) ends the wait with errc::cancelled and
    /// removes our node and watch.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_lock(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            [this](auto handler) { detail::start_acquire(target_, write_, std::move(handler)); }, token);
    }

    /// Completes with errc::lock_lost when the calling thread's hold is lost, or with
    /// errc::cancelled once it is released first; errc::not_owner if the
    /// thread holds nothing. Handler: void(zkr::error_code).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_lost(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            [this](auto handler) { detail::start_wait_lost(target_, write_, std::move(handler)); }, token);
    }
    /// Calls `handler(node path)` on the client's executor whenever a hold of this lock path
    /// through this client is lost.
    subscription on_lost(std::function<void(const std::string& node)> handler) {
        return detail::on_lost(target_, std::move(handler));
    }

    /// The calling thread's hold count on this side (0 when it holds nothing).
    int hold_count() const { return detail::hold_count(target_, write_); }
    bool is_held_by_current_thread() const { return hold_count() > 0; }
    /// Some thread of this process holds the lock (either side) through this client.
    bool is_acquired_in_this_process() const { return detail::acquired_in_process(target_); }
    /// The calling thread's standing: not_held, held, uncertain (connection down) or lost.
    lock_state state() const { return detail::state(target_, write_); }
    /// The czxid of the calling thread's lock node: ensemble-wide and increasing, so a resource
    /// can refuse a holder whose token is lower than one it has seen. Throws errc::not_owner.
    std::int64_t fencing_token() const { return detail::fencing_token(target_, write_); }
    /// The calling thread's lock node. Throws errc::not_owner.
    std::string node_path() const { return detail::node_path(target_, write_); }
    /// Everyone in the queue, holders first, with their owners (one listing, one read per node).
    std::vector<participant> participants() const { return detail::participants(target_); }
    const std::string& path() const noexcept { return target_.path; }
    /// Counters of the client's lock engine.
    lock_statistics statistics() const { return detail::statistics(target_); }

protected:
    lock_view(detail::lock_target target, bool write) : target_(std::move(target)), write_(write) {}
    friend class shared_mutex;

    detail::lock_target target_;
    bool write_;
};

}  // namespace zkr
