/// \file
/// zkr::persistent_node — a node that stays there: made again after its session is lost or
/// someone deletes it, until close(). Curator's PersistentNode (a service's registration).
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace zkr {

/// How a persistent_node makes its node.
struct persistent_node_options {
    /// Name the node "_c_<uuid>-<name>" (Curator's protected mode), so that a create whose reply
    /// was lost is found again by its name. Always on for the sequential modes: a sequential
    /// create cannot be resent without the risk of a second node.
    bool protection = false;
    /// Make missing parents, as container nodes (Curator's creatingParentContainersIfNeeded).
    bool create_parents = true;
};

namespace detail {
class persistent_node_impl;
class ttl_node_impl;
using node_created_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_wait_created(const std::shared_ptr<persistent_node_impl>& node, node_created_handler handler);
ZKR_EXPORT boost::asio::any_io_executor node_executor(const persistent_node_impl& node);
}  // namespace detail

/// Keeps a node at `path` with `data`, of any create_mode, for as long as it is open: made at
/// start(), made again when it is deleted (by anyone) and when a new session replaces one that
/// was lost (an ephemeral node goes with its session), deleted by close().
///
/// A sequential mode makes its node once and keeps its name: a node made again takes the same
/// path, with the mode's non-sequential form (Curator's rule, CURATOR-483). A node in the way is
/// never adopted when it belongs to another session (Curator adopts it and writes to it, even when
/// it is its own expired session's node, which the server is about to delete): it is waited out,
/// and ours is made as soon as it goes (with its session, or deleted). A node of this client's
/// current session (a create whose reply was lost) or of no session (a persistent one) is taken
/// over and given this node's data.
///
/// Work happens on the client's threads; nothing here calls user code. Thread-safe.
class ZKR_EXPORT persistent_node {
public:
    /// Checks the path and the data (std::invalid_argument naming what is wrong: a bad path, data
    /// over client_options::max_request_size); makes nothing until start().
    /// zkr::system_error(errc::client_closed) for a closed client.
    persistent_node(client& c, std::string path, create_mode mode, std::string data = {},
                    persistent_node_options options = {});
    /// close().
    ~persistent_node();
    persistent_node(const persistent_node&) = delete;
    persistent_node& operator=(const persistent_node&) = delete;

    /// Makes the node (in the background). std::logic_error when called a second time, or after
    /// close().
    void start();
    /// Blocks until the node was made once (true), or `deadline` passes or close() is called
    /// (false if it was never made); time_point::max() waits for ever.
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
    /// Completes once the node was made once (at once if it was). Handler: void(zkr::error_code):
    /// errc::cancelled when close() comes first, or by per-operation cancellation (any type).
    /// The handler runs on its associated executor, by default the client's, never on the
    /// ZooKeeper C client's threads; the node object may go before it completes (then: cancelled).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_created(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{detail::node_executor(*impl_),
                               [impl = impl_](auto handler) { detail::start_wait_created(impl, std::move(handler)); }},
            token);
    }
    /// \deprecated Use wait_created(timeout): kept for 0.2 only.
    [[deprecated("use zkr::persistent_node::wait_created(timeout)")]] bool wait_for_initial_create(std::chrono::milliseconds timeout) {
        return wait_created(timeout);
    }
    /// The node's path as made ("" before it is): differs from path() with protection or a
    /// sequential mode.
    std::string node_path() const;
    /// \deprecated Use node_path() (every recipe names the node it stands on so): kept for 0.2 only.
    [[deprecated("use zkr::persistent_node::node_path()")]] std::string actual_path() const { return node_path(); }
    /// The data the node is kept with.
    std::string data() const;
    /// Sets the node's data: written now if the node stands and is known to be ours (made or
    /// taken over on the current session; blocking; throws zkr::system_error on a failure other
    /// than the node being gone), and used by every later create. Never written to a node of
    /// another session standing at the path: a write to an ephemeral node is sent only on the
    /// node's session, also when that session expires before the client knows it (not sent
    /// again on the next one). std::invalid_argument for data too large; std::logic_error after
    /// close().
    void set_data(std::string data);
    /// Stops keeping the node and deletes it (guaranteed: an ephemeral node's delete is resent
    /// while its session lives and never sent on another; a persistent one's until it is gone). A
    /// create or take-over whose outcome is open (in flight, or its reply lost) is settled first,
    /// by its reply or one more read, and its node deleted if it is ours: this session's, or of
    /// no session (taken over). Another session's node at the path is never deleted. A node that
    /// has children by then is left (ZooKeeper deletes only childless nodes; a container goes
    /// once its children have). Idempotent.
    void close();

    /// The path given (before protection and sequence numbers).
    const std::string& path() const noexcept;

private:
    // Each waits on this node's machine as part of a wait of its own, which the observer hears
    // instead (as a group_member's or a ttl_node's wait).
    friend class group_member;
    friend class detail::ttl_node_impl;
    bool wait_created_unobserved(std::chrono::steady_clock::time_point deadline);
    std::shared_ptr<detail::persistent_node_impl> impl_;
};

}  // namespace zkr
