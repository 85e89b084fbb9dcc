/// \file
/// zkr::barrier — a gate that holds everyone until it is removed, wire-compatible with Curator
/// 5.4's DistributedBarrier: the barrier is up while its node exists.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/detail/node_wait.hpp"

#include <boost/asio/deferred.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace zkr {

namespace detail {
class session_port;
}

/// A barrier at `path`: set() puts it up (makes the node, its missing parents as containers),
/// remove() takes it down (deletes the node), and waiters pass once the node is gone. Curator's
/// DistributedBarrier on the same path sets, removes and waits on the same node.
///
/// Waits block the calling thread, never the client's. A waiter that gives up removes its watch
/// (Curator leaks one per timed-out wait, CURATOR-654). A lost connection or session never lets a
/// waiter through: only the server's word that the node is gone does (its deletion event, or a
/// read). Thread-safe.
class ZKR_EXPORT barrier {
public:
    /// Throws std::invalid_argument for a path ZooKeeper does not take (naming the rule),
    /// zkr::system_error(client_closed) for a closed client. Sends nothing.
    barrier(client& c, std::string path);
    ~barrier();
    barrier(const barrier&) = delete;
    barrier& operator=(const barrier&) = delete;

    /// Puts the barrier up; already up is fine. Throws zkr::system_error.
    void set();
    /// Takes it down, releasing every waiter; already down is fine. Throws zkr::system_error.
    void remove();
    /// Whether it is up, as this client's server sees it now. Throws zkr::system_error.
    bool is_set() const;
    /// Blocks until the barrier is down (true) or `deadline` passed (false; its watch removed);
    /// time_point::max() waits for ever, a deadline already past reads once (a poll, answered
    /// within a session timeout however the server is). Throws zkr::system_error (client_closed,
    /// or a read that failed for good under the client's retry policy).
    bool wait(std::chrono::steady_clock::time_point deadline);
    /// wait(deadline) for a time point of any other clock (or precision), converted to the steady
    /// clock once, at the call.
    template <class Clock, class Duration>
    bool wait(const std::chrono::time_point<Clock, Duration>& deadline) {
        return wait(detail::to_steady(deadline));
    }
    /// wait(deadline) with the deadline `timeout` from now: any std::chrono::duration; one too
    /// long for the steady clock (duration::max()) waits for ever, zero or less reads once.
    template <class Rep, class Period>
    bool wait(const std::chrono::duration<Rep, Period>& timeout) {
        return wait(detail::deadline_after(timeout));
    }
    /// Blocks until the barrier is down.
    void wait() { wait(std::chrono::steady_clock::time_point::max()); }
    /// \deprecated Use wait(timeout): kept for 0.2 only.
    [[deprecated("use zkr::barrier::wait(timeout)")]] bool wait_for(std::chrono::milliseconds timeout) { return wait(timeout); }
    /// Completes once the barrier is down, blocking nothing meanwhile. Handler:
    /// void(zkr::error_code): no error once the node is gone (as read from the server; a lost
    /// session makes it read again on the next one), errc::client_closed, errc::cancelled by
    /// per-operation cancellation (any type; the watch is removed from the server), or the error
    /// of a read the retry policy gave up on. The handler runs on its associated executor, by
    /// default the client's. The barrier object may go before it completes.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{executor_, [port = port_, executor = executor_, path = path_](auto handler) {
                                   detail::start_node_wait(port, executor, path, false, recipe_kind::barrier, std::move(handler));
                               }},
            token);
    }
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;
    /// The client's executor: where async_wait completes by default.
    executor_type get_executor() const { return executor_; }
    /// The barrier's path.
    const std::string& path() const noexcept { return path_; }

private:
    std::shared_ptr<detail::session_port> port() const;
    std::weak_ptr<detail::session_port> port_;
    boost::asio::any_io_executor executor_;
    std::string path_;
};

}  // namespace zkr
