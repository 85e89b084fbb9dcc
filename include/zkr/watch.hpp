/// \file
/// zkr::watch — a one-shot ZooKeeper watch, delivered as the completion of an async wait.
#pragma once
#include "zkr/export.hpp"

#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/error.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace zkr {

/// What happened to a watched node.
enum class event_type {
    created,      ///< the node was created (a watch left by exists)
    deleted,      ///< the node was deleted
    changed,      ///< the node's data changed
    child,        ///< a child was added or removed (a watch left by get_children)
    not_watching  ///< the watch ended without the node changing, e.g. because another watch of
                  ///< this client on the same path was removed (ZooKeeper removes them together)
};
/// The event type's name ("created", "deleted", ...).
ZKR_EXPORT const char* to_string(event_type t) noexcept;

/// What a watch reports when it fires.
struct watch_event {
    event_type type = event_type::changed;  ///< what happened
    std::string path;                       ///< the watched node
};

namespace detail {
struct watch_state;
struct watch_access;
using watch_handler = boost::asio::any_completion_handler<void(error_code, watch_event)>;
using void_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_watch_wait(const std::shared_ptr<watch_state>& state, watch_handler handler);
ZKR_EXPORT void start_watch_remove(const std::shared_ptr<watch_state>& state, void_handler handler);
ZKR_EXPORT boost::asio::any_io_executor watch_executor(const std::shared_ptr<watch_state>& state);
}  // namespace detail

/// A watch left by a read (`exists`, `get_data`, `get_children` with `zkr::set_watch`).
/// It fires once. It ends with an error instead when its session is lost
/// (errc::session_expired), the client is closed (errc::client_closed) or it is removed
/// (errc::watch_removed). Copies share one watch. Only one wait may be pending at a time.
class ZKR_EXPORT watch {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// No watch (valid() is false).
    watch() = default;
    /// Made by the client's reads; not for users.
    explicit watch(std::shared_ptr<detail::watch_state> state) : state_(std::move(state)) {}

    /// False for a default-constructed watch or a read that left none.
    bool valid() const noexcept { return state_ != nullptr; }
    /// True once the watch fired or ended.
    bool done() const;
    /// The watched path.
    const std::string& path() const;
    /// The client's executor (where handlers run by default); empty for an empty watch.
    executor_type get_executor() const { return detail::watch_executor(state_); }

    /// Waits for the event. Handler: void(zkr::error_code, zkr::watch_event). The handler runs
    /// on its associated executor, by default the client's. Per-operation cancellation
    /// (terminal) ends the wait with errc::cancelled; the watch stays set.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, watch_event)>(
            detail::initiation{get_executor(),
                               [](auto handler, std::shared_ptr<detail::watch_state> state) {
                                   detail::start_watch_wait(state, std::move(handler));
                               }},
            token, state_);
    }

    /// Blocks until the watch fires; throws zkr::system_error if it ends otherwise.
    watch_event wait();
    /// Like wait(), but gives up at `deadline` and returns std::nullopt (the watch stays set);
    /// time_point::max() waits for ever.
    std::optional<watch_event> wait(std::chrono::steady_clock::time_point deadline);
    /// wait(deadline) for a time point of any other clock (or precision), converted once.
    template <class Clock, class Duration>
    std::optional<watch_event> wait(const std::chrono::time_point<Clock, Duration>& deadline) {
        return wait(detail::to_steady(deadline));
    }
    /// wait(deadline) with the deadline `timeout` from now (any std::chrono::duration;
    /// duration::max() waits for ever).
    template <class Rep, class Period>
    std::optional<watch_event> wait(const std::chrono::duration<Rep, Period>& timeout) {
        return wait(detail::deadline_after(timeout));
    }
    /// \deprecated Use wait(timeout): kept for 0.2 only.
    [[deprecated("use zkr::watch::wait(timeout)")]] std::optional<watch_event> wait_for(std::chrono::milliseconds timeout) {
        return wait(timeout);
    }

    /// Removes the watch from the server (so it leaves nothing behind) and ends it with
    /// errc::watch_removed. Handler: void(zkr::error_code); errc::no_watcher if it had fired.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_remove(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(),
                               [](auto handler, std::shared_ptr<detail::watch_state> state) {
                                   detail::start_watch_remove(state, std::move(handler));
                               }},
            token, state_);
    }
    /// Blocking remove; returns the error instead of throwing (no_watcher is expected).
    zkr::error_code remove();

private:
    friend struct detail::watch_access;
    std::shared_ptr<detail::watch_state> state_;
};

}  // namespace zkr
