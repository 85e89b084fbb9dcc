/// \file
/// zkr::double_barrier — members enter together and leave together, wire-compatible with
/// Curator 5.4's DistributedDoubleBarrier (kazoo 2.8's DoubleBarrier has the same layout; tested).
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace zkr {

namespace detail {
struct barrier_member;
using barrier_handler = boost::asio::any_completion_handler<void(error_code, bool)>;
/// `deadline` time_point::max(): none.
ZKR_EXPORT void start_barrier_call(const std::shared_ptr<barrier_member>& m, bool leaving,
                                   std::chrono::steady_clock::time_point deadline, barrier_handler handler);
ZKR_EXPORT boost::asio::any_io_executor barrier_executor(const std::shared_ptr<barrier_member>& m);
}  // namespace detail

/// How a double barrier lays out its rounds.
struct double_barrier_options {
    /// false (the default): Curator's layout, one round at a time on the path — a member that
    /// enters again before every member of the last round has left counts in that round (and
    /// passes at once), as with Curator and kazoo. true: zkr's own layout for a path used round
    /// after round — round V's members are under "<path>/round-<V>" (V: the path's data version,
    /// moved by the member that closes a round); a member joins only a round still open (a multi
    /// checks the version), so one back from leaving round V waits in round V+1 for a group of
    /// its own. Curator and kazoo members cannot join a reusable barrier; every member of one
    /// path must use the same layout; nothing else may write the path's data.
    bool reusable = false;
};

/// A double barrier at `path` for `member_count` members (Curator's layout: each member an
/// ephemeral node "<uuid>" under `path`, which is made as a container; a persistent "ready"
/// node once enough have entered). enter_for() returns true once `member_count` members are in
/// (a threshold, as Curator's: more may enter); leave_for() returns true once every member has
/// left. Curator members on the same path count as members (tested).
///
/// Deadlines bound the waits; the writes of a call (its node, "ready", a delete) follow the
/// client's retry policy, and a member giving up waits for its node's delete at most a session
/// timeout: with the server unreachable, a call may so return that much after its deadline.
///
/// Better than Curator's, on the same layout:
/// - an entrant that times out or fails deletes its node before the call returns (Curator
///   leaves it, so a late entrant passes alone: CURATOR-318, -80); so does a leaver;
/// - session and connection events never let anyone through (GH-1290): only what the server
///   lists does; a member whose session expires while it waits enters again on its new one;
/// - the watches of a timed-out wait are removed.
///
/// One object is one member: enter, then leave (and, reusable, enter and leave again round after
/// round). Thread-safe (blocking calls are serialised);
/// they block the calling thread, never the client's.
///
/// Async forms: async_enter, async_enter_for, async_enter_until, async_leave, async_leave_for,
/// async_leave_until. One state machine runs both faces (recipes/barrier/double_barrier_fsm.hpp),
/// so they keep every promise above.
/// Handler: void(zkr::error_code, bool passed) — passed as the blocking call's result (false
/// only when a deadline passed); errc::cancelled on per-operation cancellation (any type: this
/// member's node is deleted first, its watch removed), errc::bad_arguments for a call while
/// another of this member runs, or an enter once entered, or a leave before; the blocking
/// calls' errors else. The handler runs on its associated executor, by default the client's;
/// never on the ZooKeeper C client's threads. The object may go before a call completes: one
/// that then enters deletes this member's node at once (nobody would leave it).
class ZKR_EXPORT double_barrier {
public:
    /// Throws std::invalid_argument for a bad path or a `member_count` below 1, naming it;
    /// zkr::system_error(client_closed) for a closed client. Sends nothing.
    double_barrier(client& c, std::string path, int member_count);
    /// The same, with `options` (double_barrier_options::reusable).
    double_barrier(client& c, std::string path, int member_count, double_barrier_options options);
    /// Deletes this member's node if it is still there (without waiting for the answer).
    ~double_barrier();
    double_barrier(const double_barrier&) = delete;
    double_barrier& operator=(const double_barrier&) = delete;

    /// Enters and waits until `member_count` members are in (true), or `deadline` passed (false:
    /// this member's node is deleted first). time_point::max() waits for ever; a deadline already
    /// past makes the node and lists once (bounded by a session timeout, as a try is). Throws
    /// zkr::system_error (the node deleted first), std::logic_error when already entered.
    /// Curator's layout: errc::outcome_unknown when the connection dropped while the round may
    /// have closed unseen (kazoo's leave deletes "ready" first: docs/coordination.md) — the
    /// group may have passed without this member; it is never told true unless the group was
    /// complete, and it does not wait out its deadline for a round that has gone.
    bool enter_until(std::chrono::steady_clock::time_point deadline);
    /// enter_until(deadline) for a time point of any other clock (or precision), converted to
    /// the steady clock once, at the call.
    template <class Clock, class Duration>
    bool enter_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return enter_until(detail::to_steady(deadline));
    }
    /// enter_until() with the deadline `timeout` from now: any std::chrono::duration; one too
    /// long for the steady clock (duration::max()) waits for ever, zero or less lists once.
    template <class Rep, class Period>
    bool enter_for(const std::chrono::duration<Rep, Period>& timeout) {
        return enter_until(detail::deadline_after(timeout));
    }
    /// enter_until() without a deadline.
    void enter() { enter_until(std::chrono::steady_clock::time_point::max()); }
    /// Leaves and waits until every member has left (true), or `deadline` passed (false; this
    /// member's node is deleted first all the same). Throws zkr::system_error, std::logic_error
    /// when not entered.
    bool leave_until(std::chrono::steady_clock::time_point deadline);
    /// leave_until(deadline) for a time point of any other clock, converted once, at the call.
    template <class Clock, class Duration>
    bool leave_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return leave_until(detail::to_steady(deadline));
    }
    /// leave_until() with the deadline `timeout` from now (any std::chrono::duration).
    template <class Rep, class Period>
    bool leave_for(const std::chrono::duration<Rep, Period>& timeout) {
        return leave_until(detail::deadline_after(timeout));
    }
    /// leave_until() without a deadline.
    void leave() { leave_until(std::chrono::steady_clock::time_point::max()); }

    /// enter() blocking nothing. Handler: void(zkr::error_code, bool passed); see the class.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_enter(CompletionToken&& token = {}) {
        return start(false, [] { return std::chrono::steady_clock::time_point::max(); }, std::forward<CompletionToken>(token));
    }
    /// enter_for() blocking nothing (passed false: `timeout` passed, the node deleted first). The
    /// timeout counts from when the operation is started (with a deferred token, when it is run).
    template <class Rep, class Period, class CompletionToken = boost::asio::deferred_t>
    auto async_enter_for(const std::chrono::duration<Rep, Period>& timeout, CompletionToken&& token = {}) {
        return start(false, [timeout] { return detail::deadline_after(timeout); }, std::forward<CompletionToken>(token));
    }
    /// enter_until() blocking nothing (any clock's time point, converted once, at the call).
    template <class Clock, class Duration, class CompletionToken = boost::asio::deferred_t>
    auto async_enter_until(const std::chrono::time_point<Clock, Duration>& deadline, CompletionToken&& token = {}) {
        return start(false, [at = detail::to_steady(deadline)] { return at; }, std::forward<CompletionToken>(token));
    }
    /// leave() blocking nothing. Handler: void(zkr::error_code, bool passed).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_leave(CompletionToken&& token = {}) {
        return start(true, [] { return std::chrono::steady_clock::time_point::max(); }, std::forward<CompletionToken>(token));
    }
    /// leave_for() blocking nothing; the timeout counts from when the operation is started.
    template <class Rep, class Period, class CompletionToken = boost::asio::deferred_t>
    auto async_leave_for(const std::chrono::duration<Rep, Period>& timeout, CompletionToken&& token = {}) {
        return start(true, [timeout] { return detail::deadline_after(timeout); }, std::forward<CompletionToken>(token));
    }
    /// leave_until() blocking nothing.
    template <class Clock, class Duration, class CompletionToken = boost::asio::deferred_t>
    auto async_leave_until(const std::chrono::time_point<Clock, Duration>& deadline, CompletionToken&& token = {}) {
        return start(true, [at = detail::to_steady(deadline)] { return at; }, std::forward<CompletionToken>(token));
    }
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;
    /// The client's executor: where the async calls complete by default.
    executor_type get_executor() const { return detail::barrier_executor(member_); }

    /// The barrier's path.
    const std::string& path() const noexcept;
    /// This member's node ("<path>/<uuid>"). Reusable: "<path>/round-<V>/<uuid>" of the round
    /// it last entered, empty before its first; read it between calls.
    const std::string& node_path() const noexcept;
    /// How many members it waits for.
    int member_count() const noexcept;

private:
    // `deadline_of()` gives the deadline when the operation starts.
    template <class DeadlineOf, class CompletionToken>
    auto start(bool leaving, DeadlineOf deadline_of, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, bool)>(
            detail::initiation{get_executor(), [member = member_, leaving, deadline_of](auto handler) {
                                   detail::start_barrier_call(member, leaving, deadline_of(), std::move(handler));
                               }},
            token);
    }
    bool call(bool leaving, std::chrono::steady_clock::time_point deadline);

    std::shared_ptr<detail::barrier_member> member_;
    std::mutex mutex_;  // serialises the blocking calls
};

}  // namespace zkr
