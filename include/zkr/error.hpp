/// \file
/// zkr's one error type: zkr::error_code (boost::system::error_code) holding zkr::errc values,
/// in synchronous and asynchronous forms alike; exceptions are zkr::system_error
/// (boost::system::system_error), which is also what Asio's use_future and use_awaitable throw.
#pragma once
#include "zkr/export.hpp"

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <type_traits>

namespace zkr {

/// The error type of every zkr operation: handlers receive it, `error_code&` overloads fill it.
using error_code = boost::system::error_code;
/// What blocking zkr calls throw; use_future and use_awaitable throw the same type, so one
/// `catch (const zkr::system_error&)` sees every failure.
using system_error = boost::system::system_error;

/// Error codes. Negative values are the ZooKeeper C client's return codes, unchanged;
/// positive values are zkr's own.
enum class errc : int {
    // --- ZooKeeper (values of the C client's ZOO_ERRORS) ---
    system_error = -1,                  ///< ZSYSTEMERROR
    runtime_inconsistency = -2,         ///< ZRUNTIMEINCONSISTENCY (also: the ops of a failed multi)
    data_inconsistency = -3,            ///< ZDATAINCONSISTENCY
    connection_loss = -4,               ///< ZCONNECTIONLOSS: the request may or may not have been applied
    marshalling_error = -5,             ///< ZMARSHALLINGERROR
    unimplemented = -6,                 ///< ZUNIMPLEMENTED: the server does not know the operation
    operation_timeout = -7,             ///< the C client's own timeout (ZOPERATIONTIMEOUT)
    bad_arguments = -8,                 ///< ZBADARGUMENTS (also: input zkr refuses before sending it,
                                        ///< e.g. a request over client_options::max_request_size)
    invalid_state = -9,                 ///< ZINVALIDSTATE: the session expired, or authentication failed
    new_config_no_quorum = -13,         ///< ZNEWCONFIGNOQUORUM
    reconfig_in_progress = -14,         ///< ZRECONFIGINPROGRESS
    ssl_connection_error = -15,         ///< ZSSLCONNECTIONERROR
    api_error = -100,                   ///< ZAPIERROR
    no_node = -101,                     ///< ZNONODE: the node (or, for a create, its parent) does not exist
    no_auth = -102,                     ///< ZNOAUTH: the node's ACL does not allow it
    bad_version = -103,                 ///< ZBADVERSION: the node is not at the version given
    no_children_for_ephemerals = -108,  ///< ZNOCHILDRENFOREPHEMERALS
    node_exists = -110,                 ///< ZNODEEXISTS
    not_empty = -111,                   ///< ZNOTEMPTY: the node has children
    session_expired = -112,             ///< ZSESSIONEXPIRED: gone, with its ephemeral nodes and watches
    invalid_callback = -113,            ///< ZINVALIDCALLBACK
    invalid_acl = -114,                 ///< ZINVALIDACL
    auth_failed = -115,                 ///< ZAUTHFAILED
    closing = -116,                     ///< ZCLOSING: the handle is closing
    nothing = -117,                     ///< ZNOTHING
    session_moved = -118,               ///< ZSESSIONMOVED: the session moved to another server
    not_read_only = -119,               ///< ZNOTREADONLY: a write sent to a read-only server
    ephemeral_on_local_session = -120,  ///< ZEPHEMERALONLOCALSESSION
    no_watcher = -121,                  ///< ZNOWATCHER: no such watch (it fired, or was removed)
    reconfig_disabled = -123,           ///< ZRECONFIGDISABLED
    session_closed_require_sasl_auth = -124,  ///< ZSESSIONCLOSEDREQUIRESASLAUTH
    throttled_op = -127,                ///< ZTHROTTLEDOP: the server is overloaded; try again later

    // --- zkr ---
    invalid_path = 1,        ///< a znode path broke one of ZooKeeper's path rules (zkr::path_problem
                             ///< says which; the server's character rules included)
    invalid_connect_string,  ///< the connect string could not be parsed
    connect_timeout,         ///< no connection within the time asked for (compares equal to the
                             ///< portable timed_out condition)
    client_closed,           ///< the client was closed (or destroyed) while the operation was pending
    not_owner,               ///< release by a thread (or handle) that does not hold the lock
    lock_lost,               ///< the session that held the lock was lost
    upgrade_refused,         ///< write lock asked for by a thread holding only the read lock
    watch_removed,           ///< the watch was removed before it fired
    timed_out,               ///< a deadline the caller gave passed (compares equal to the portable
                             ///< timed_out condition, boost::system::errc::timed_out)
    cancelled,               ///< the caller cancelled the operation (compares equal to the portable
                             ///< operation_canceled condition)
    attempts_exhausted,      ///< the operation started over as often as it may (fresh lock nodes after session losses)
    chroot_missing,          ///< the connect string's chroot (its "/path" suffix) is not a node on the server
    too_many_watches,        ///< a watch refused: with it, the watches a reconnection sets again (in
                             ///< one request) would exceed client_options::max_request_size, and the
                             ///< server would drop every reconnection for ever (docs/operations.md)
    outcome_unknown,         ///< a change whose answer was lost (with its session, or after the
                             ///< retry policy gave up resending it) and which zkr could not settle:
                             ///< it may or may not have been applied; do not simply do it again
};

/// The category of every zkr::errc value, named "zkr" (with a fixed id: it compares equal across
/// shared libraries). It maps timed_out and connect_timeout to the portable timed_out condition and
/// cancelled to operation_canceled.
ZKR_EXPORT const boost::system::error_category& zkr_category() noexcept;

/// Makes an error_code of a zkr::errc value (what `error_code ec = errc::lock_lost;` calls).
inline error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), zkr_category()}; }

/// Maps a ZooKeeper C client return code (ZOK, ZNONODE, ...) to an error_code. ZOK gives no error.
inline error_code make_zk_error_code(int rc) noexcept { return rc == 0 ? error_code{} : error_code{rc, zkr_category()}; }

/// The request may not have reached the server, or its reply did not come back; trying again
/// on the same session is safe for idempotent requests: connection loss, operation timeout,
/// session moved, throttled.
ZKR_EXPORT bool is_retryable(const error_code& ec) noexcept;

/// A failed write may or may not have been applied: the request was (or may have been) sent,
/// and its answer never came — connection loss, operation timeout (the connection timed out
/// with it unanswered), session expired or moved, invalid state, the handle closing, the client
/// closed. Doing it again blindly may apply it twice: read first (zkr's recipes do, or say
/// errc::outcome_unknown). Every other error is the server's answer, or a refusal before
/// sending: the write was not applied. Among them throttled_op: the server refused it unapplied
/// (tested against a real server); when an earlier attempt of the same request was in doubt,
/// zkr reports that attempt's error instead, so this answer never hides one. The one rule of
/// every recipe of zkr's (recipes/README.md).
ZKR_EXPORT bool may_have_been_applied(const error_code& ec) noexcept;

/// The session is gone — expired (session_expired, invalid_state, closing), authentication
/// failed, the client was closed (client_closed), or the lock's session was lost (lock_lost):
/// every ephemeral node and watch of it is gone too, and with them any lock it held.
ZKR_EXPORT bool is_session_lost(const error_code& ec) noexcept;

/// Trouble reaching the ensemble, not an answer from it: retryable errors, the session expiring
/// (session_expired, invalid_state, closing), a deadline that passed first (timed_out,
/// connect_timeout), or an acquisition that started over as often as it may
/// (attempts_exhausted). Not client_closed, auth_failed or lock_lost. try_lock and friends
/// report these as "not acquired" rather than throwing.
ZKR_EXPORT bool is_connection_trouble(const error_code& ec) noexcept;

}  // namespace zkr

/// \cond
// Makes zkr::errc an error code enum of Boost.System: `error_code ec = errc::lock_lost;` and
// `ec == errc::lock_lost` work. Not a name of zkr's own (left out of the API reference).
template <>
struct boost::system::is_error_code_enum<zkr::errc> : std::true_type {};
/// \endcond
