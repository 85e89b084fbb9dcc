// zkr's one error type: zkr::error_code (boost::system::error_code) holding zkr::errc values,
// in synchronous and asynchronous forms alike; exceptions are zkr::system_error
// (boost::system::system_error), which is also what Asio's use_future and use_awaitable throw.
#pragma once

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
    system_error = -1,
    runtime_inconsistency = -2,
    data_inconsistency = -3,
    connection_loss = -4,
    marshalling_error = -5,
    unimplemented = -6,
    operation_timeout = -7,  ///< the C client's own timeout (ZOPERATIONTIMEOUT)
    bad_arguments = -8,
    invalid_state = -9,
    new_config_no_quorum = -13,
    reconfig_in_progress = -14,
    ssl_connection_error = -15,
    api_error = -100,
    no_node = -101,
    no_auth = -102,
    bad_version = -103,
    no_children_for_ephemerals = -108,
    node_exists = -110,
    not_empty = -111,
    session_expired = -112,
    invalid_callback = -113,
    invalid_acl = -114,
    auth_failed = -115,
    closing = -116,
    nothing = -117,
    session_moved = -118,
    not_read_only = -119,
    ephemeral_on_local_session = -120,
    no_watcher = -121,
    reconfig_disabled = -123,
    session_closed_require_sasl_auth = -124,
    throttled_op = -127,

    // --- zkr ---
    invalid_path = 1,        ///< a znode path broke one of ZooKeeper's path rules
    invalid_connect_string,  ///< the connect string could not be parsed
    connect_timeout,         ///< no connection within the time asked for
    client_closed,           ///< the client was closed (or destroyed) while the operation was pending
    not_owner,               ///< release by a thread (or handle) that does not hold the lock
    lock_lost,               ///< the session that held the lock was lost
    upgrade_refused,         ///< write lock asked for by a thread holding only the read lock
    watch_removed,           ///< the watch was removed before it fired
    timed_out,               ///< a deadline the caller gave passed (compares equal to errc::timed_out conditions)
    cancelled,               ///< the caller cancelled the operation (compares equal to operation_canceled conditions)
    attempts_exhausted,      ///< the operation started over as often as it may (fresh lock nodes after session losses)
};

const boost::system::error_category& zkr_category() noexcept;

inline error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), zkr_category()}; }

/// Maps a ZooKeeper C client return code (ZOK, ZNONODE, ...) to an error_code. ZOK gives no error.
inline error_code make_zk_error_code(int rc) noexcept { return rc == 0 ? error_code{} : error_code{rc, zkr_category()}; }

/// The request may not have reached the server, or its reply did not come back; trying again
/// on the same session is safe for idempotent requests: connection loss, operation timeout,
/// session moved, throttled.
bool is_retryable(const error_code& ec) noexcept;

/// The session is gone (expired, or the client was closed, or authentication failed): every
/// ephemeral node and watch of it is gone too, and with them any lock it held.
bool is_session_lost(const error_code& ec) noexcept;

/// Trouble reaching the ensemble, not an answer from it: retryable errors, a session lost,
/// or a deadline of the caller's that passed first. try_lock and friends report these as
/// "not acquired" rather than throwing.
bool is_connection_trouble(const error_code& ec) noexcept;

}  // namespace zkr

template <>
struct boost::system::is_error_code_enum<zkr::errc> : std::true_type {};
