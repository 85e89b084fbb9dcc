#include "zkr/error.hpp"

#include <boost/system/errc.hpp>

#include <string>

namespace zkr {
namespace {

class zkr_error_category final : public boost::system::error_category {
public:
    // A fixed id: categories compare equal across shared-library boundaries.
    constexpr zkr_error_category() noexcept : boost::system::error_category(0x7a6b725f65727273ULL) {}

public:
    const char* name() const noexcept override { return "zkr"; }

    std::string message(int value) const override {
        switch (static_cast<errc>(value)) {
            case errc::system_error: return "ZooKeeper system error";
            case errc::runtime_inconsistency: return "ZooKeeper runtime inconsistency";
            case errc::data_inconsistency: return "ZooKeeper data inconsistency";
            case errc::connection_loss: return "connection to the ZooKeeper server lost";
            case errc::marshalling_error: return "ZooKeeper marshalling error";
            case errc::unimplemented: return "operation not implemented by the server";
            case errc::operation_timeout: return "ZooKeeper operation timed out";
            case errc::bad_arguments: return "invalid arguments to a ZooKeeper call";
            case errc::invalid_state: return "ZooKeeper handle in an invalid state (session expired or auth failed)";
            case errc::new_config_no_quorum: return "no quorum of the new configuration is connected";
            case errc::reconfig_in_progress: return "a reconfiguration is already in progress";
            case errc::ssl_connection_error: return "SSL connection error";
            case errc::api_error: return "ZooKeeper API error";
            case errc::no_node: return "node does not exist";
            case errc::no_auth: return "not authenticated for this node";
            case errc::bad_version: return "node version does not match";
            case errc::no_children_for_ephemerals: return "ephemeral nodes may not have children";
            case errc::node_exists: return "node already exists";
            case errc::not_empty: return "node has children";
            case errc::session_expired: return "ZooKeeper session expired";
            case errc::invalid_callback: return "invalid callback";
            case errc::invalid_acl: return "invalid ACL";
            case errc::auth_failed: return "authentication failed";
            case errc::closing: return "ZooKeeper handle is closing";
            case errc::nothing: return "no server responses to process";
            case errc::session_moved: return "session moved to another server";
            case errc::not_read_only: return "write request sent to a read-only server";
            case errc::ephemeral_on_local_session: return "ephemeral node on a local session";
            case errc::no_watcher: return "no such watcher";
            case errc::reconfig_disabled: return "reconfiguration disabled";
            case errc::session_closed_require_sasl_auth: return "session closed: the server requires SASL authentication";
            case errc::throttled_op: return "operation throttled by the server";
            case errc::invalid_path: return "invalid znode path";
            case errc::invalid_connect_string: return "invalid ZooKeeper connect string";
            case errc::connect_timeout: return "timed out connecting to ZooKeeper";
            case errc::client_closed: return "zkr client closed";
            case errc::not_owner: return "the calling thread does not hold this lock";
            case errc::lock_lost: return "the lock was lost with its ZooKeeper session";
            case errc::upgrade_refused: return "read lock holder may not take the write lock (upgrade would deadlock)";
            case errc::watch_removed: return "watch removed before it fired";
            case errc::timed_out: return "the deadline passed";
            case errc::cancelled: return "the operation was cancelled";
            case errc::attempts_exhausted: return "the operation started over as often as it may";
            case errc::chroot_missing:
                return "the chroot of the connect string does not exist on the server: create it first";
            case errc::too_many_watches:
                return "too many watches on this client: a reconnection could not set them again in one request "
                       "(client_options::max_request_size); spread the waiters over more clients";
            case errc::outcome_unknown:
                return "the change's answer was lost and it cannot be told whether it was applied (do not simply "
                       "do it again)";
        }
        return "unknown zkr error " + std::to_string(value);
    }

    // Portable conditions for zkr's own deadline and cancellation, so code written against
    // Asio's conventions (boost::system::errc::operation_canceled, timed_out) recognises them.
    boost::system::error_condition default_error_condition(int value) const noexcept override {
        switch (static_cast<errc>(value)) {
            case errc::timed_out:
            case errc::connect_timeout: return boost::system::errc::make_error_condition(boost::system::errc::timed_out);
            case errc::cancelled: return boost::system::errc::make_error_condition(boost::system::errc::operation_canceled);
            default: return {value, *this};
        }
    }
};

}  // namespace

const boost::system::error_category& zkr_category() noexcept {
    static const zkr_error_category category;
    return category;
}

bool is_retryable(const error_code& ec) noexcept {
    if (ec.category() != zkr_category()) return false;
    switch (static_cast<errc>(ec.value())) {
        case errc::connection_loss:
        case errc::operation_timeout:
        case errc::session_moved:
        case errc::throttled_op:
            return true;
        default:
            return false;
    }
}

bool may_have_been_applied(const error_code& ec) noexcept {
    // Each decided by a write against a real server (integration/in_doubt_test.cpp) but where said.
    if (ec.category() != zkr_category()) return false;
    switch (static_cast<errc>(ec.value())) {
        case errc::connection_loss:    // its reply lost with the connection: applied
        case errc::operation_timeout:  // the connection timed out with it unanswered: applied
        case errc::session_expired:    // refused on the next session after a try whose reply was lost: applied
        case errc::client_closed:      // in flight when the client closed: applied
        case errc::invalid_state:      // as session_expired (the C client's word for an expired handle)
        case errc::closing:            // as client_closed (the C client's word for a closing handle)
        case errc::session_moved:      // not made by a test (a session moving between servers with a request
                                       // on the old connection): taken as in doubt, which costs a read at most
            return true;
        default:
            return false;
    }
}

bool is_session_lost(const error_code& ec) noexcept {
    if (ec.category() != zkr_category()) return false;
    switch (static_cast<errc>(ec.value())) {
        case errc::session_expired:
        case errc::invalid_state:
        case errc::auth_failed:
        case errc::closing:
        case errc::client_closed:
        case errc::lock_lost:
            return true;
        default:
            return false;
    }
}

}  // namespace zkr

namespace zkr {

bool is_connection_trouble(const error_code& ec) noexcept {
    if (is_retryable(ec)) return true;
    if (ec.category() != zkr_category()) return false;
    switch (static_cast<errc>(ec.value())) {
        case errc::session_expired:
        case errc::invalid_state:
        case errc::closing:
        case errc::timed_out:
        case errc::connect_timeout:
        case errc::attempts_exhausted:
            return true;
        default:
            return false;
    }
}

}  // namespace zkr
