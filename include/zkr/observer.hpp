/// \file
/// zkr::observer — hooks that see every session change, request, retry, lock, lease and
/// leadership of a client: for metrics (zkr::metrics), tracing and audit logs.
#pragma once
#include "zkr/export.hpp"

#include "zkr/error.hpp"
#include "zkr/types.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zkr {

/// A request to the server, as an observer sees it.
enum class operation : std::uint8_t {
    create,          ///< a create (any mode)
    remove,          ///< a delete
    exists,          ///< an exists (also the idle session's heartbeat, a read of "/")
    get_data,        ///< a read of a node's data
    set_data,        ///< a write of a node's data
    get_children,    ///< a listing
    multi,           ///< a transaction
    remove_watches,  ///< a removal of watches
};
/// The operation's name ("create", "remove", "exists", "get_data", "set_data", "get_children",
/// "multi", "remove_watches").
ZKR_EXPORT const char* to_string(operation op) noexcept;

/// Which recipe an event is about.
enum class recipe_kind : std::uint8_t {
    mutex,            ///< zkr::mutex (and each part of a zkr::multi_lock)
    read_lock,        ///< the read side of zkr::shared_mutex
    write_lock,       ///< the write side of zkr::shared_mutex
    semaphore,        ///< zkr::semaphore: one acquisition, of one or more leases
    leader_latch,     ///< zkr::leader_latch
    leader_selector,  ///< zkr::leader_selector
    barrier,           ///< zkr::barrier (its waits)
    count_down_latch,  ///< zkr::count_down_latch (its count-downs and waits)
    counter,           ///< zkr::atomic_long, zkr::atomic_int, zkr::id_generator (their reads and changes)
    double_barrier,    ///< zkr::double_barrier (its enters and leaves)
    tree_cache,        ///< zkr::tree_cache (its waits for the first full read)
    persistent_node,   ///< zkr::persistent_node (its waits for the first create)
    ttl_node,          ///< zkr::ttl_node (its waits for the first create or touch)
    group_member,      ///< zkr::group_member (its waits to have joined: its node made, the group read)
};
/// The recipe's name ("mutex", "read_lock", "write_lock", "semaphore", "leader_latch",
/// "leader_selector", "barrier", "count_down_latch", "counter", "double_barrier", "tree_cache",
/// "persistent_node", "ttl_node", "group_member").
ZKR_EXPORT const char* to_string(recipe_kind r) noexcept;

/// How an acquisition (a lock, a semaphore's leases) ended.
enum class acquire_outcome : std::uint8_t {
    acquired,   ///< it holds
    timed_out,  ///< the deadline passed, or a try found it taken (a deadline of zero)
    cancelled,  ///< cancelled by its caller (per-operation cancellation, a lock_hold dropped)
    failed,     ///< an error ended it (the session expired, the client closed, bad input...)
};
/// The outcome's name ("acquired", "timed_out", "cancelled", "failed").
ZKR_EXPORT const char* to_string(acquire_outcome o) noexcept;

/// What a recipe that is not a lock did (observer::on_operation()).
enum class recipe_operation : std::uint8_t {
    wait,        ///< a barrier's or a count-down latch's wait, a cache's, a node's or a member's (blocking or async)
    count_down,  ///< a count-down latch's count_down (blocking or async)
    change,      ///< a counter's operation (get, add, set, compare-and-set, ...), from when it was queued
    enter,       ///< a double barrier's enter (blocking or async): done once the group is in
    leave,       ///< a double barrier's leave: done once every member has left
};
/// The operation's name ("wait", "count_down", "change", "enter", "leave").
ZKR_EXPORT const char* to_string(recipe_operation o) noexcept;

/// How a recipe operation ended.
enum class operation_outcome : std::uint8_t {
    done,       ///< it did what it was asked (passed, applied, stood; a compare-and-set that lost is done too)
    timed_out,  ///< its deadline passed first
    cancelled,  ///< cancelled by its caller (per-operation cancellation, close())
    failed,     ///< an error ended it (errc::outcome_unknown among them)
};
/// The outcome's name ("done", "timed_out", "cancelled", "failed").
ZKR_EXPORT const char* to_string(operation_outcome o) noexcept;

/// Why a hold (a lock hold, a lease) stopped standing before its release.
enum class loss_reason : std::uint8_t {
    session,       ///< its session expired or was given up (partition, frozen process), or the client closed
    node_deleted,  ///< someone else deleted its node
};
/// The reason's name ("session", "node_deleted").
ZKR_EXPORT const char* to_string(loss_reason r) noexcept;

/// How a client learnt that a session of its own expired (observer::on_session_expiry()).
enum class expiry_cause : std::uint8_t {
    /// The server said so, before the client gave the session up: the C client, reconnecting,
    /// was told the session had expired (a partition or a frozen process that outlasted the
    /// session timeout but not the client's own wait, a session expired or closed from outside).
    server,
    /// The client gave the session up first: its connection was down for a whole session
    /// timeout with no server answering (a partition, a frozen process whose timer ran out
    /// first), so it could no longer count on the session and started a new one. The server
    /// expires it too, or zkr closes it there once a server is back; that later word is not a
    /// second expiry.
    given_up,
};
/// The cause's name ("server", "given_up").
ZKR_EXPORT const char* to_string(expiry_cause c) noexcept;

/// A request: `id` pairs its start, retries and end (unique within the client).
struct request_info {
    std::uint64_t id = 0;                                ///< the same in the request's start, retries and end
    zkr::operation operation = zkr::operation::exists;  ///< what it asks of the server
    std::string_view path{};  ///< its path (a transaction's first); valid during the call only
};

/// One acquisition, hold or leadership of a recipe: `id` pairs its events (acquire started,
/// acquire finished, released or lost; unique within the client).
struct recipe_info {
    std::uint64_t id = 0;                     ///< the same in an acquisition's events and its hold's (a latch's: all its own)
    recipe_kind recipe = recipe_kind::mutex;  ///< which recipe
    std::string_view path{};  ///< the lock, semaphore or latch path; valid during the call only
    /// In on_acquire_finished() with acquire_outcome::acquired: the holds it made, each released or
    /// lost on its own later (a semaphore's leases; 1 for a lock). 0 otherwise.
    std::size_t holds = 0;
};

/// Receives what a client does. Every hook has a no-op default: override the ones you need.
///
/// Threads and order: the hooks of one client are called on one thread of that client's own
/// ("zkr-observer"), never on the ZooKeeper C client's threads nor on the session thread, one
/// at a time, in the order the events happened in the client. An observer given to several
/// clients is called from each client's thread: it must be thread-safe (zkr::metrics is).
///
/// Hooks must be quick. The client hands each event over through a bounded queue and never waits
/// for the observer: a hook that blocks or is slow delays only later hooks, and once the queue
/// is full further events are dropped (counted, and reported by on_events_dropped() and once
/// through zkr::log). A hook that throws has its exception caught and reported once through
/// zkr::log; the session is not affected. Hooks may be declared noexcept.
///
/// Events are handed over in batches, up to 10 ms after they happen (durations are measured when
/// they happen, with std::chrono::steady_clock); client::flush_observer() waits for them (not from
/// a hook: that waits out its timeout). Once events were dropped, gauges built from them (holds,
/// waiters, leaders standing) may stay off by what was dropped.
class ZKR_EXPORT observer {
public:
    virtual ~observer();

    /// The client's connection changed state (connected, suspended, reconnected, lost,
    /// closed); `session` is the session it is about (0 when there is none).
    virtual void on_connection_state(connection_state state, std::int64_t session) { (void)state, (void)session; }
    /// `session` expired: called once per session, however the client learnt it, before the
    /// on_connection_state(connection_state::lost) of that session.
    ///
    /// - expiry_cause::server: the server said so first (the C client, reconnecting, was told).
    /// - expiry_cause::given_up: the client gave the session up first, after a whole session
    ///   timeout with its connection down (a partition, a frozen process, servers unreachable).
    ///   When the server later says that same session expired (the old connection coming back,
    ///   or zkr closing the given-up session on the server), this is not called again.
    ///
    /// Not called for a session lost to an authentication failure (the client gives it up, but
    /// nothing timed out: zkr::log reports it as an error), nor when the client closes (a close
    /// ends the session on the server; that is connection_state::closed).
    ///
    /// The default calls on_session_expired(session), so an observer written for that hook hears
    /// of every expiry, whatever its cause.
    virtual void on_session_expiry(std::int64_t session, expiry_cause cause) {
        (void)cause;
        on_session_expired(session);
    }
    /// `session` expired, whatever the cause: called by on_session_expiry()'s default only (an
    /// observer that overrides on_session_expiry() does not get it unless it calls it). Kept for
    /// observers written before on_session_expiry(); before zkr 0.2.0 it was called only for
    /// expiries the server reported, and a session given up after a whole session timeout was only
    /// a connection_state::lost.
    virtual void on_session_expired(std::int64_t session) { (void)session; }

    /// A request is made: sent, or held until there is a connection (its end follows in any case).
    virtual void on_request_started(const request_info& request) { (void)request; }
    /// A request failed with `cause` and will be sent again after `backoff` (attempt 1 is the
    /// first retry).
    virtual void on_retry(const request_info& request, error_code cause, int attempt, std::chrono::nanoseconds backoff) {
        (void)request, (void)cause, (void)attempt, (void)backoff;
    }
    /// A request ended: `result` is what its caller gets (empty for success; no_node,
    /// node_exists, bad_version... are answers, not failures of the client), `duration` from its
    /// start to its end, retries included.
    virtual void on_request_finished(const request_info& request, error_code result, std::chrono::nanoseconds duration) {
        (void)request, (void)result, (void)duration;
    }

    /// An acquisition started (lock(), try_lock(), try_lock_for(), async_lock(); a semaphore's
    /// acquire). A re-entry of a hold this owner has already is not an acquisition, nor is a try
    /// refused at once (the client closed, or a try while the connection is down).
    virtual void on_acquire_started(const recipe_info& recipe) { (void)recipe; }
    /// The acquisition ended after waiting `wait`.
    virtual void on_acquire_finished(const recipe_info& recipe, acquire_outcome outcome, std::chrono::nanoseconds wait) {
        (void)recipe, (void)outcome, (void)wait;
    }
    /// A hold acquired was released (its last unlock, a lock_hold's release, a lease's
    /// release), after `held`. A hold lost is reported by on_lost() instead, never by both.
    virtual void on_released(const recipe_info& recipe, std::chrono::nanoseconds held) { (void)recipe, (void)held; }
    /// A hold acquired was lost after `held` (the moment the client learned of it).
    virtual void on_lost(const recipe_info& recipe, loss_reason reason, std::chrono::nanoseconds held) {
        (void)recipe, (void)reason, (void)held;
    }
    /// A leader latch or selector gained (`leader`) or gave up or lost leadership.
    virtual void on_leadership(const recipe_info& recipe, bool leader) { (void)recipe, (void)leader; }
    /// A lock's queue was read (participants()): `depth` nodes, holders included.
    virtual void on_queue_depth(const recipe_info& recipe, std::size_t depth) { (void)recipe, (void)depth; }
    /// A recipe that is not a lock ended an operation (a barrier's or a count-down latch's wait,
    /// a count-down, a counter's operation) after `duration`. `recipe.holds` is 0; `recipe.id` is
    /// the operation's own. (The double barrier, the caches and the nodes do not report yet.)
    virtual void on_operation(const recipe_info& recipe, recipe_operation operation, operation_outcome outcome,
                              std::chrono::nanoseconds duration) {
        (void)recipe, (void)operation, (void)outcome, (void)duration;
    }

    /// `count` events were dropped because the queue to this observer was full.
    virtual void on_events_dropped(std::uint64_t count) { (void)count; }
};

}  // namespace zkr
