/// \file
/// zkr::group_member — membership of a group: this process's ephemeral node under the group's
/// path, kept there through session loss, and every member's id and payload. Curator's GroupMember
/// layout ("<group>/<id>", ephemeral, the payload as data): zkr and Curator members see each other.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/tree_cache.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace zkr {

namespace detail {
using joined_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_wait_joined(const std::shared_ptr<persistent_node_impl>& node, const std::shared_ptr<cache_impl>& cache,
                                  joined_handler handler);
}  // namespace detail

/// Joins the group at `group_path` as `id` with `payload`: an ephemeral zkr::persistent_node at
/// "<group_path>/<id>" (made again after a session loss or a deletion), and a zkr::tree_cache of
/// the group's direct children for members(). Thread-safe.
class ZKR_EXPORT group_member {
public:
    /// Checks the input (std::invalid_argument naming it: a bad group path; an id that is empty,
    /// "." or "..", or holds '/' or a character ZooKeeper refuses in a node name; a payload too
    /// large); joins nothing until start(). zkr::system_error(errc::client_closed) for a closed
    /// client.
    group_member(client& c, std::string group_path, std::string id, std::string payload = {});
    /// close().
    ~group_member();
    group_member(const group_member&) = delete;
    group_member& operator=(const group_member&) = delete;

    /// Joins: makes this member's node and starts reading the group. std::logic_error when
    /// called a second time, or after close().
    void start();
    /// Blocks until this member's node was made and the group read once (true), or `deadline`
    /// passes (false); time_point::max() waits for ever.
    bool wait_joined(std::chrono::steady_clock::time_point deadline);
    /// wait_joined(deadline) for a time point of any other clock (or precision), converted once.
    template <class Clock, class Duration>
    bool wait_joined(const std::chrono::time_point<Clock, Duration>& deadline) {
        return wait_joined(detail::to_steady(deadline));
    }
    /// wait_joined(deadline) with the deadline `timeout` from now (any std::chrono::duration;
    /// duration::max() waits for ever).
    template <class Rep, class Period>
    bool wait_joined(const std::chrono::duration<Rep, Period>& timeout) {
        return wait_joined(detail::deadline_after(timeout));
    }
    /// Completes once this member's node was made and the group read once. Handler:
    /// void(zkr::error_code): errc::cancelled when close() comes first, or by per-operation
    /// cancellation (any type). The handler runs on its associated executor, by default the
    /// client's; the member object may go before it completes (then: cancelled).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_joined(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{cache_.get_executor(), [node = node_.impl_, cache = cache_.impl_](auto handler) {
                                   detail::start_wait_joined(node, cache, std::move(handler));
                               }},
            token);
    }
    /// Every member as last read, id -> payload; this member always among them, with its own
    /// payload.
    std::map<std::string, std::string> members() const;
    /// Sets this member's payload (written to its node now if it exists; see
    /// persistent_node::set_data).
    void set_payload(std::string payload);
    /// Calls `fn(event)` for every change of the group's cache (members joining, leaving,
    /// changing payload; `initialized`), on the client's executor. Events of the group's own
    /// node have path() as their path.
    [[nodiscard]] subscription on_change(std::function<void(const cache_event&)> fn);
    /// Leaves: the node is deleted, the cache closed. Idempotent.
    void close();

    /// This member's id.
    const std::string& id() const noexcept { return id_; }
    /// The group's path.
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_, id_;
    persistent_node node_;
    tree_cache cache_;
};

}  // namespace zkr
