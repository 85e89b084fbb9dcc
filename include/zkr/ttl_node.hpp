/// \file
/// zkr::ttl_node — a node that outlives its keeper by a time, not by a session: Curator's
/// PersistentTtlNode layout (a container node, and a TTL child "touch" renewed while it is kept).
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace zkr {

/// How a ttl_node keeps its child.
struct ttl_node_options {
    /// The TTL child's name (Curator's default).
    std::string child_name = "touch";
    /// Renewals per ttl: the child is touched every ttl / touch_schedule_factor (Curator's
    /// default 2). At least 2, so that one late renewal does not let the node expire.
    int touch_schedule_factor = 2;
    /// Make missing parents, as container nodes.
    bool create_parents = true;
};

namespace detail {
class ttl_node_impl;
using ttl_created_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_wait_created(const std::shared_ptr<ttl_node_impl>& node, ttl_created_handler handler);
ZKR_EXPORT boost::asio::any_io_executor ttl_executor(const ttl_node_impl& node);
}  // namespace detail

/// Keeps a container node at `path` with `data` (a persistent_node of create_mode::container:
/// made again whenever it goes, until close()), and under it a TTL child (client::create_ttl,
/// persistent with `ttl`) that it creates or touches (a set_data, which renews its TTL) every
/// ttl / touch_schedule_factor. While it is kept, the node stands. Once nobody renews the child —
/// close() was called, or the process died, froze or lost the ensemble — the child expires `ttl`
/// after its last renewal, and the server reaps the empty container after it (both on its
/// container-check round, znode.container.checkIntervalMs): the node outlives its keeper by about
/// `ttl`, whatever its session. Several keepers (zkr or Curator) may keep one path.
///
/// The server must make TTL nodes (zookeeper.extendedTypesEnabled=true): otherwise
/// wait_created() throws zkr::system_error(errc::unimplemented) saying so.
///
/// Work happens on the client's threads; nothing here calls user code. Thread-safe.
class ZKR_EXPORT ttl_node {
public:
    /// Checks the path, the data and the options (std::invalid_argument naming what is wrong: a
    /// bad path, data over client_options::max_request_size, a ttl outside 1 ms .. client::max_ttl,
    /// a child name that is not one path segment, a factor below 2); makes nothing until start().
    /// zkr::system_error(errc::client_closed) for a closed client.
    ttl_node(client& c, std::string path, std::chrono::milliseconds ttl, std::string data = {},
             ttl_node_options options = {});
    /// close().
    ~ttl_node();
    ttl_node(const ttl_node&) = delete;
    ttl_node& operator=(const ttl_node&) = delete;

    /// Makes the node and starts renewing its child (in the background). std::logic_error when
    /// called a second time, or after close().
    void start();
    /// Blocks until the node was made and its child created or touched once (true), or
    /// `deadline` passes or close() is called (false); time_point::max() waits for ever. Throws
    /// zkr::system_error(errc::unimplemented) once the server has refused the TTL child (it does
    /// not make TTL nodes), naming the setting.
    bool wait_created(std::chrono::steady_clock::time_point deadline);
    /// wait_created(deadline) for a time point of any other clock (or precision), converted once.
    template <class Clock, class Duration>
    bool wait_created(const std::chrono::time_point<Clock, Duration>& deadline) {
        return wait_created(detail::to_steady(deadline));
    }
    /// wait_created(deadline) with the deadline `timeout` from now (any std::chrono::duration;
    /// duration::max() waits for ever).
    template <class Rep, class Period>
    bool wait_created(const std::chrono::duration<Rep, Period>& timeout) {
        return wait_created(detail::deadline_after(timeout));
    }
    /// Completes once the node was made and its child created or touched once. Handler:
    /// void(zkr::error_code): errc::unimplemented when the server refused the TTL child,
    /// errc::cancelled when close() came first or by per-operation cancellation (any type). The
    /// handler runs on its associated executor, by default the client's; the node object may go
    /// before it completes (then: cancelled).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_created(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{detail::ttl_executor(*impl_),
                               [impl = impl_](auto handler) { detail::start_wait_created(impl, std::move(handler)); }},
            token);
    }
    /// \deprecated Use wait_created(timeout): kept for 0.2 only.
    [[deprecated("use zkr::ttl_node::wait_created(timeout)")]] bool wait_for_initial_create(std::chrono::milliseconds timeout) {
        return wait_created(timeout);
    }
    /// The data the node is kept with.
    std::string data() const;
    /// Sets the node's data (persistent_node::set_data).
    void set_data(std::string data);
    /// Stops renewing the child and keeping the node. The node is left to expire (`ttl` after the
    /// last renewal, as Curator's close() does: another keeper may still renew it), except when it
    /// has no child (closed before the first renewal landed, or made again after the child had
    /// expired): then it is deleted, as a container that never had a child is never reaped.
    /// Idempotent.
    void close();
    /// The node's path.
    const std::string& path() const noexcept;
    /// The child's TTL.
    std::chrono::milliseconds ttl() const noexcept;
    /// Renewals that reached the server so far (creates or touches of the child).
    std::uint64_t touches() const;

private:
    std::shared_ptr<detail::ttl_node_impl> impl_;
};

}  // namespace zkr
