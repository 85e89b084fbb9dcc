/// \file
/// zkr::leader_latch — leader election among participants of one path, wire-compatible with
/// Curator 5.4's LeaderLatch: zkr and Curator participants on one path elect one leader among
/// them. Leadership is a hold: it ends with the session, when the connection is suspect past
/// the session's lease, or when anyone deletes the leader's node — and the leader is told.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/election_types.hpp"
#include "zkr/lock_types.hpp"
#include "zkr/types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkr {

namespace detail {
class latch_impl;
using latch_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_await_leadership(const std::shared_ptr<latch_impl>& latch, latch_handler handler);
ZKR_EXPORT void start_latch_wait_lost(const std::shared_ptr<latch_impl>& latch, latch_handler handler);
ZKR_EXPORT boost::asio::any_io_executor latch_executor(const latch_impl& latch);
}  // namespace detail

/// One participant of a leader election. Each joins by making an ephemeral sequential node
/// `path/_c_<uuid>-latch-<seq>` whose data is its id; the first node leads; each other watches
/// only the node before it. A leader that leaves, or whose session ends, hands over to the next.
///
/// Leadership is a hold, read live like a lock's (see lock_state): has_leadership() is true only
/// while the connection is up on the node's session and the server answered within the lease.
/// When the connection becomes suspect the latch stops leading (on_not_leader, has_leadership()
/// false) — as Curator does on SUSPENDED — and leads again with the same node if the session comes
/// back; when the session is lost, or anyone deletes its node, the leadership is lost for good and
/// the latch queues again with a new node (a higher fencing token). It never claims leadership on
/// a node of any session but the client's current one (CURATOR-696), never deletes anyone else's
/// node (CURATOR-645), and starts over when its path was deleted meanwhile (a container parent
/// reaped while the session was away).
///
/// Handlers and listeners run on the client's executor (or their own associated executor), never
/// on the ZooKeeper C client's threads nor on zkr's session thread; listeners are called in order.
/// All members are thread-safe. The latch may outlive its client: it then leads nowhere.
class ZKR_EXPORT leader_latch {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// A participant on `path` whose node carries `id` (Curator's participant id; may be empty).
    /// Nothing is sent until start(). `on_close` says what close() and the destructor do to the
    /// listeners (Curator's CloseMode): silent by default. Throws std::invalid_argument naming
    /// the path and the rule it breaks (the root "/" too), or an id too large for a node;
    /// zkr::system_error(errc::client_closed) for a closed client.
    leader_latch(client& c, std::string path, std::string id = {}, close_mode on_close = close_mode::silent);
    /// close() with the mode given at construction.
    ~leader_latch();
    leader_latch(const leader_latch&) = delete;
    leader_latch& operator=(const leader_latch&) = delete;

    /// Joins the election and returns at once; the latch keeps taking part, through outages and
    /// new sessions, until closed. Throws std::logic_error if it was started before.
    void start();
    /// Leaves the election: our node is deleted (guaranteed) and the next participant leads.
    /// Returns at once. Waiting wait_leadership() calls return false; pending async waits
    /// complete with errc::cancelled. Idempotent; safe inside the latch's own listeners.
    void close();
    /// close(), telling the listeners (notify_leader: on_not_leader runs if it was leading) or not.
    void close(close_mode mode);

    /// Blocks until this latch leads (true) or `deadline` passes or it is closed (false);
    /// time_point::max() waits for ever.
    bool wait_leadership(std::chrono::steady_clock::time_point deadline);
    /// wait_leadership(deadline) for a time point of any other clock (or precision), converted once.
    template <class Clock, class Duration>
    bool wait_leadership(const std::chrono::time_point<Clock, Duration>& deadline) {
        return wait_leadership(detail::to_steady(deadline));
    }
    /// wait_leadership(deadline) with the deadline `timeout` from now (any std::chrono::duration;
    /// duration::max() waits for ever).
    template <class Rep, class Period>
    bool wait_leadership(const std::chrono::duration<Rep, Period>& timeout) {
        return wait_leadership(detail::deadline_after(timeout));
    }
    /// Blocks until this latch leads (true) or it is closed (false).
    bool wait_leadership() { return wait_leadership(std::chrono::steady_clock::time_point::max()); }
    /// Completes when this latch leads (at once if it does). Handler: void(zkr::error_code):
    /// errc::cancelled when the latch is closed first or per-operation cancellation (any type)
    /// fires; errc::client_closed.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_leadership(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(),
                               [impl = impl_](auto handler) { detail::start_await_leadership(impl, std::move(handler)); }},
            token);
    }
    /// \deprecated Use wait_leadership(timeout): kept for 0.2 only.
    template <class Rep, class Period>
    [[deprecated("use zkr::leader_latch::wait_leadership(timeout)")]] bool await_leadership(const std::chrono::duration<Rep, Period>& timeout) {
        return wait_leadership(timeout);
    }
    /// \deprecated Use async_wait_leadership(token): kept for 0.2 only.
    template <class CompletionToken = boost::asio::deferred_t>
    [[deprecated("use zkr::leader_latch::async_wait_leadership(token)")]] auto async_await_leadership(CompletionToken&& token = {}) {
        return async_wait_leadership(std::forward<CompletionToken>(token));
    }

    /// True while this latch leads, read live (held: see the class).
    bool has_leadership() const;
    /// The leadership's standing: held (leads), uncertain (leads, but the connection is suspect:
    /// stop acting and wait), lost (its session ended or its node was deleted; the latch queues
    /// again), not_held (never led, or closed).
    lock_state state() const;
    /// Until when the leadership is certainly still ours (the session's lease), while state() is
    /// held; the epoch otherwise.
    std::chrono::steady_clock::time_point valid_until() const;
    /// The czxid of the node this latch leads with: ensemble-wide and increasing with each new
    /// leadership, so a resource can refuse a leader whose token is lower than one it has seen.
    /// Throws zkr::system_error(errc::not_owner) when it does not lead (nor is uncertain).
    std::int64_t fencing_token() const;
    /// A guard for client::multi: the transaction fails whole, with errc::lock_lost, once the node
    /// this latch leads with is gone — whatever this process believes. Throws errc::not_owner
    /// when it does not lead.
    op::guard guard() const;
    /// The node this latch leads with (while it leads or is uncertain); empty otherwise.
    std::string node_path() const;
    /// Completes with errc::lock_lost when the current leadership is lost, errc::cancelled when the
    /// latch is closed first, errc::not_owner when it does not lead. Handler: void(zkr::error_code).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_lost(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(),
                               [impl = impl_](auto handler) { detail::start_latch_wait_lost(impl, std::move(handler)); }},
            token);
    }

    /// Calls `fn` on the client's executor each time this latch starts leading.
    [[nodiscard]] subscription on_leadership(std::function<void()> fn);
    /// Calls `fn` on the client's executor each time this latch stops leading (uncertain, lost,
    /// or closed with notify_leader).
    [[nodiscard]] subscription on_not_leader(std::function<void()> fn);

    /// Everyone in the election in queue order, the first one leading, with their ids (one
    /// listing, then one read per node in one round trip; nodes that leave meanwhile are
    /// skipped), read from this client's server (see lock_view::participants). Throws
    /// zkr::system_error when it cannot list.
    std::vector<election_participant> participants() const;
    /// The leader, if anyone takes part.
    std::optional<election_participant> leader() const;

    /// The election's path.
    const std::string& path() const noexcept;
    /// This participant's id.
    const std::string& id() const noexcept;
    /// The client's executor (where handlers run by default).
    executor_type get_executor() const { return detail::latch_executor(*impl_); }

private:
    std::shared_ptr<detail::latch_impl> impl_;
};

}  // namespace zkr
