/// \file
/// zkr::multi_lock — several locks taken as one: in one canonical order whatever order the
/// caller gives, under one deadline, rolled back without blocking when they cannot all be had.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/lock_hold.hpp"
#include "zkr/lock_types.hpp"
#include "zkr/lock_view.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"
#include "zkr/types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkr {

/// Which lock of a path a multi_lock takes.
enum class lock_mode {
    exclusive,  ///< the zkr::mutex of the path
    read,       ///< the read side of the zkr::shared_mutex of the path
    write,      ///< the write side of the zkr::shared_mutex of the path
};

/// One lock of a multi_lock.
struct lock_part {
    std::string path;                           ///< the lock path
    lock_mode mode = lock_mode::exclusive;      ///< which lock of it
};

class multi_hold;

namespace detail {
struct multi_access;
using multi_handler = boost::asio::any_completion_handler<void(error_code, multi_hold)>;
ZKR_EXPORT void start_multi_lock(std::vector<lock_view> parts, multi_handler handler);
}  // namespace detail

/// The async form's hold of every part: lock_holds of their own (see zkr::lock_hold), released
/// together. Movable, not copyable.
class ZKR_EXPORT multi_hold {
public:
    /// Holds nothing.
    multi_hold() noexcept = default;
    /// Takes over `other`'s holds.
    multi_hold(multi_hold&&) noexcept = default;
    /// Releases what this one holds, then takes over `other`'s.
    multi_hold& operator=(multi_hold&& other) noexcept {
        if (this != &other) {
            unlock();
            holds_ = std::move(other.holds_);
        }
        return *this;
    }
    multi_hold(const multi_hold&) = delete;
    multi_hold& operator=(const multi_hold&) = delete;
    ~multi_hold() { unlock(); }

    /// Releases every part (in reverse order); returns at once.
    void unlock() noexcept;
    /// True until released.
    bool owns_lock() const noexcept { return !holds_.empty(); }
    /// owns_lock().
    explicit operator bool() const noexcept { return owns_lock(); }
    /// The worst of the parts: lost if any is lost, else uncertain if any is, else held.
    lock_state state() const;
    /// One guard covering every part (op::guard::also).
    op::guard guard() const;
    /// The parts' holds, in canonical order.
    const std::vector<lock_hold>& holds() const noexcept { return holds_; }

private:
    friend struct detail::multi_access;
    std::vector<lock_hold> holds_;
};

/// Several locks as one, Lockable and TimedLockable (std::lock_guard, std::unique_lock work):
/// - the parts are taken in one canonical order (by path), whatever order the caller gives, so
///   two callers naming the same paths in opposite orders cannot deadlock (Curator's
///   InterProcessMultiLock takes them in the caller's order);
/// - try_lock_for / try_lock_until give all the parts one deadline (Curator gives each the whole
///   timeout);
/// - when a part cannot be had (deadline, error), the parts taken are released at once — their
///   deletes sent, nothing waited for — and the call returns (Curator goes on trying the rest).
/// Blocking holds belong to the calling thread, part by part, as each lock_view's: re-entrant,
/// released by the thread that took them. Each part is an ordinary zkr::mutex or zkr::shared_mutex
/// side, so a part excludes any other lock of the same path and kind (Curator's too).
class ZKR_EXPORT multi_lock {
public:
    /// Mutexes on `paths`. Throws std::invalid_argument for an empty list, a bad or repeated path.
    multi_lock(client& c, std::vector<std::string> paths);
    /// Mixed parts (a mutex here, a read lock there). The same checks; one path may appear once.
    multi_lock(client& c, std::vector<lock_part> parts);
    ~multi_lock();
    multi_lock(const multi_lock&) = delete;
    multi_lock& operator=(const multi_lock&) = delete;

    /// Takes every part, waiting as long as it takes; on failure releases what it took and
    /// throws zkr::system_error.
    void lock();
    /// One round for each part: true if all are held now (else none is).
    bool try_lock();
    /// Waits up to `timeout` for all the parts; returns by then, holding all or none.
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_until(std::chrono::steady_clock::now() + std::chrono::ceil<std::chrono::milliseconds>(timeout));
    }
    /// Waits until `deadline` for all the parts; returns by then, holding all or none.
    bool try_lock_until(std::chrono::steady_clock::time_point deadline);
    /// Releases every part the calling thread holds through this multi-lock (in reverse order).
    void unlock() noexcept;

    /// Takes every part for a hold of its own (lock_holds, not the thread's). Handler:
    /// void(zkr::error_code, zkr::multi_hold): errc::cancelled on per-operation cancellation (any
    /// type: what was taken is released), errc::client_closed, connection trouble.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_lock(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, multi_hold)>(
            detail::initiation{get_executor(),
                               [parts = copies()](auto handler) {
                                   detail::start_multi_lock(parts, std::move(handler));
                               }},
            token);
    }

    /// The calling thread's standing: not_held unless it holds every part; else the worst of
    /// them (lost, uncertain, held).
    lock_state state() const;
    /// One guard of the calling thread's parts for client::multi (op::guard::also): the
    /// transaction fails whole, with errc::lock_lost, once any part's node is gone. Throws
    /// errc::not_owner unless the thread holds every part.
    op::guard guard() const;
    /// Calls `fn()` on the client's executor once per hold when any part of a hold of this
    /// multi-lock's paths (through this client) is lost.
    [[nodiscard]] subscription on_lost(std::function<void()> fn);
    /// The parts, in the order they are taken.
    const std::vector<lock_part>& parts() const noexcept { return parts_; }
    /// The client's executor.
    lock_view::executor_type get_executor() const { return views_.front()->get_executor(); }

private:
    std::vector<lock_view> copies() const;
    void held();  // a new hold of every part began
    // Takes the parts in order with `take`; all or none (what was taken is released at once).
    bool take_all(const std::function<bool(lock_view&)>& take);

    std::vector<lock_part> parts_;
    std::vector<std::unique_ptr<mutex>> mutexes_;
    std::vector<std::unique_ptr<shared_mutex>> shared_;
    std::vector<lock_view*> views_;  // one per part, in canonical order
    std::shared_ptr<std::atomic<std::uint64_t>> generation_ = std::make_shared<std::atomic<std::uint64_t>>(0);
};

}  // namespace zkr
