/// \file
/// zkr::leader_observer — who leads an election, and every change, without taking part: what
/// routers and clients of a service need (CURATOR-22). Creates no node.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/election_types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace zkr {

/// Which recipe's election a leader_observer follows.
enum class election_recipe {
    latch,     ///< zkr::leader_latch, Curator's LeaderLatch: "latch-" nodes
    selector,  ///< zkr::leader_selector, Curator's LeaderSelector: "lock-" nodes
};

namespace detail {
class observer_impl;
using leader_handler = boost::asio::any_completion_handler<void(error_code, std::optional<election_participant>)>;
ZKR_EXPORT void start_next_leader(const std::shared_ptr<observer_impl>& o, leader_handler handler);
ZKR_EXPORT boost::asio::any_io_executor observer_executor(const observer_impl& o);
}  // namespace detail

/// Follows the leader of the election on `path`. It watches only the leader's node (its
/// departure) — or, while nobody takes part, the path's children — so a change costs one
/// notification to each observer and a read, whatever the number of participants. After a
/// connection loss or a new session it reads the election again.
///
/// Handlers and listeners run on the client's executor (or their own), in order. Thread-safe.
class ZKR_EXPORT leader_observer {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// Starts following the election on `path` at once. Throws std::invalid_argument for a bad
    /// path; zkr::system_error(errc::client_closed) for a closed client.
    leader_observer(client& c, std::string path, election_recipe recipe = election_recipe::latch);
    /// close().
    ~leader_observer();
    leader_observer(const leader_observer&) = delete;
    leader_observer& operator=(const leader_observer&) = delete;

    /// The leader as last read (std::nullopt: nobody takes part, or not read yet).
    std::optional<election_participant> leader() const;
    /// True once the election was read at least once.
    bool ready() const;
    /// Calls `fn(leader)` on the client's executor after every change of leader (a different
    /// node leads, or none).
    [[nodiscard]] subscription on_change(std::function<void(const std::optional<election_participant>&)> fn);
    /// Completes with the next change of leader. Handler: void(zkr::error_code,
    /// std::optional<zkr::election_participant>); errc::cancelled when closed or by per-operation
    /// cancellation (any type); errc::client_closed.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_next_change(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, std::optional<election_participant>)>(
            detail::initiation{get_executor(),
                               [impl = impl_](auto handler) { detail::start_next_leader(impl, std::move(handler)); }},
            token);
    }
    /// Stops following: its watch is removed, pending waits complete with errc::cancelled.
    void close();

    /// The election's path.
    const std::string& path() const noexcept;
    /// The client's executor (where handlers run by default).
    executor_type get_executor() const { return detail::observer_executor(*impl_); }

private:
    std::shared_ptr<detail::observer_impl> impl_;
};

}  // namespace zkr
