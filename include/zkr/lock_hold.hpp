/// \file
/// zkr::lock_hold — a hold of a distributed lock owned by an object, not by a thread: what the
/// async acquisitions complete with.
#pragma once
#include "zkr/export.hpp"

#include "zkr/detail/lock_ops.hpp"
#include "zkr/lock_types.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

namespace zkr {

/// Owns one hold of a lock (the mutex, or one side of a read/write lock), taken by
/// `async_lock` / `async_lock_shared`. Movable, not copyable; any thread may use it, move it or
/// release it. Holds taken asynchronously never re-enter each other or a thread's blocking
/// hold: two coroutines on one thread exclude each other.
///
/// The hold ends with unlock(), async_unlock(), destruction or move-assignment over it (RAII), or
/// with its session: then state() says lost and async_wait_lost completes. Releasing a hold whose
/// session was lost deletes nothing of anyone else (the node's name carries our own uuid).
///
/// Lifetime: a hold may outlive its client; it then reports lost and releases nothing.
class ZKR_EXPORT lock_hold {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// An empty hold (owns nothing).
    lock_hold() noexcept = default;
    /// Takes over `other`'s hold; `other` is left empty.
    lock_hold(lock_hold&& other) noexcept = default;
    /// Releases the hold this one owns (as unlock()), then takes over `other`'s.
    lock_hold& operator=(lock_hold&& other) noexcept {
        if (this != &other) {
            unlock();
            engine_ = std::move(other.engine_);
            hold_ = std::move(other.hold_);
        }
        return *this;
    }
    lock_hold(const lock_hold&) = delete;
    lock_hold& operator=(const lock_hold&) = delete;
    /// Releases the hold if it still owns one (like unlock()).
    ~lock_hold() { unlock(); }

    /// True until released (also while its session is being lost: see state()).
    bool owns_lock() const noexcept { return hold_ != nullptr; }
    /// owns_lock().
    explicit operator bool() const noexcept { return owns_lock(); }

    /// Releases the hold and returns at once: the node's delete is sent, retried while its
    /// session lives, and ordered before anything this client sends next. No-op when empty.
    void unlock() noexcept {
        if (hold_) detail::release_hold(engine_, std::exchange(hold_, nullptr));
    }

    /// Releases the hold; completes once the server acknowledged the node's delete.
    /// Handler: void(zkr::error_code): no error once the node is gone; errc::lock_lost if the
    /// hold had been lost (the node went with its session); errc::client_closed; errc::not_owner
    /// for an empty hold. Runs on the client's executor (or the handler's own). Not cancellable:
    /// the delete is guaranteed either way.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_unlock(CompletionToken&& token = {}) {
        auto engine = engine_;
        auto h = std::exchange(hold_, nullptr);
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(), [](auto handler, std::shared_ptr<detail::lock_engine> e,
                                                  std::shared_ptr<detail::hold> held) {
                                   detail::start_release_hold(e, held, std::move(handler));
                               }},
            token, std::move(engine), std::move(h));
    }

    /// held, uncertain (the connection is suspect: stop and wait), lost (another may hold the
    /// lock now), or not_held once released. Read live: the C client's view and the lease.
    lock_state state() const { return hold_ ? detail::hold_state(*engine_, *hold_) : lock_state::not_held; }
    /// Until when the hold is certainly still ours (the session's lease), while state() is held;
    /// the epoch otherwise. A resource that can check the time may refuse work past it.
    std::chrono::steady_clock::time_point valid_until() const {
        return hold_ ? detail::hold_valid_until(*engine_, *hold_) : std::chrono::steady_clock::time_point{};
    }
    /// The lock node's czxid: ensemble-wide and increasing, so a resource can refuse a holder
    /// whose token is lower than one it has seen. Throws zkr::system_error(errc::not_owner) when empty.
    std::int64_t fencing_token() const {
        check();
        return detail::hold_fencing_token(*hold_);
    }
    /// The lock node. Throws errc::not_owner when empty.
    const std::string& node_path() const {
        check();
        return detail::hold_node_path(*hold_);
    }
    /// The lock's path. Throws errc::not_owner when empty.
    const std::string& lock_path() const {
        check();
        return detail::hold_lock_path(*hold_);
    }
    /// A guard of this hold for client::multi: the transaction fails whole, with errc::lock_lost,
    /// once the hold's node is gone. Throws errc::not_owner when empty.
    op::guard guard() const {
        check();
        return detail::hold_guard(*hold_);
    }
    /// A read hold of a read/write lock. Throws errc::not_owner when empty.
    bool is_shared() const {
        check();
        return detail::hold_is_shared(*hold_);
    }

    /// Completes with errc::lock_lost when the hold is lost (its session ended, or someone deleted
    /// its node), or errc::cancelled once it is released first or the wait is cancelled
    /// (per-operation cancellation, any type); errc::not_owner for an empty hold.
    /// Handler: void(zkr::error_code).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_lost(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(), [](auto handler, std::shared_ptr<detail::lock_engine> e,
                                                  std::shared_ptr<detail::hold> held) {
                                   detail::start_hold_wait_lost(e, held, std::move(handler));
                               }},
            token, engine_, hold_);
    }

    /// The client's executor (where handlers run by default).
    executor_type get_executor() const {
        return engine_ ? detail::engine_executor(*engine_) : executor_type{};
    }

private:
    friend struct detail::hold_access;
    lock_hold(std::shared_ptr<detail::lock_engine> engine, std::shared_ptr<detail::hold> h) noexcept
        : engine_(std::move(engine)), hold_(std::move(h)) {}
    void check() const {
        if (!hold_) throw zkr::system_error(make_error_code(errc::not_owner), "zkr::lock_hold: empty");
    }

    std::shared_ptr<detail::lock_engine> engine_;
    std::shared_ptr<detail::hold> hold_;
};

}  // namespace zkr
