#include "requests.hpp"
#include "zkr/error.hpp"

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

#include <zookeeper/zookeeper.h>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace error_test {

TEST_CASE("every ZooKeeper return code maps to its zkr::errc", "[error]") {
    CHECK_FALSE(zkr::make_zk_error_code(ZOK));
    CHECK(zkr::make_zk_error_code(ZNONODE) == zkr::errc::no_node);
    CHECK(zkr::make_zk_error_code(ZNODEEXISTS) == zkr::errc::node_exists);
    CHECK(zkr::make_zk_error_code(ZCONNECTIONLOSS) == zkr::errc::connection_loss);
    CHECK(zkr::make_zk_error_code(ZSESSIONEXPIRED) == zkr::errc::session_expired);
    CHECK(zkr::make_zk_error_code(ZBADVERSION) == zkr::errc::bad_version);
    CHECK(zkr::make_zk_error_code(ZNOWATCHER) == zkr::errc::no_watcher);
    CHECK(zkr::make_zk_error_code(ZTHROTTLEDOP) == zkr::errc::throttled_op);
    for (int rc : {ZSYSTEMERROR, ZRUNTIMEINCONSISTENCY, ZDATAINCONSISTENCY, ZCONNECTIONLOSS, ZMARSHALLINGERROR,
                   ZUNIMPLEMENTED, ZOPERATIONTIMEOUT, ZBADARGUMENTS, ZINVALIDSTATE, ZNEWCONFIGNOQUORUM,
                   ZRECONFIGINPROGRESS, ZSSLCONNECTIONERROR, ZAPIERROR, ZNONODE, ZNOAUTH, ZBADVERSION,
                   ZNOCHILDRENFOREPHEMERALS, ZNODEEXISTS, ZNOTEMPTY, ZSESSIONEXPIRED, ZINVALIDCALLBACK, ZINVALIDACL,
                   ZAUTHFAILED, ZCLOSING, ZNOTHING, ZSESSIONMOVED, ZNOTREADONLY, ZEPHEMERALONLOCALSESSION,
                   ZNOWATCHER, ZRECONFIGDISABLED, ZSESSIONCLOSEDREQUIRESASLAUTH, ZTHROTTLEDOP}) {
        INFO(rc);
        auto ec = zkr::make_zk_error_code(rc);
        CHECK(ec.value() == rc);
        CHECK(ec.category() == zkr::zkr_category());
        CHECK(ec.message().find("unknown") == std::string::npos);
    }
}

TEST_CASE("retryable and session-lost predicates", "[error]") {
    using zkr::errc;
    for (auto e : {errc::connection_loss, errc::operation_timeout, errc::session_moved, errc::throttled_op}) {
        CHECK(zkr::is_retryable(e));
        CHECK_FALSE(zkr::is_session_lost(e));
    }
    for (auto e : {errc::session_expired, errc::client_closed, errc::lock_lost, errc::auth_failed}) {
        CHECK(zkr::is_session_lost(e));
        CHECK_FALSE(zkr::is_retryable(e));
    }
    for (auto e : {errc::no_node, errc::node_exists, errc::bad_version, errc::invalid_path, errc::not_owner}) {
        CHECK_FALSE(zkr::is_retryable(e));
        CHECK_FALSE(zkr::is_session_lost(e));
    }
    // Codes of other categories are never ours.
    CHECK_FALSE(zkr::is_retryable(zkr::error_code(boost::system::errc::make_error_code(boost::system::errc::timed_out))));
    CHECK_FALSE(zkr::is_session_lost(zkr::error_code(boost::system::errc::make_error_code(boost::system::errc::connection_reset))));
}

TEST_CASE("zkr's own errors have messages and convert from the enum", "[error]") {
    zkr::error_code ec = zkr::errc::upgrade_refused;
    CHECK(ec.category().name() == std::string("zkr"));
    CHECK(ec.message().find("upgrade") != std::string::npos);
    CHECK(zkr::error_code(zkr::errc::not_owner).message().find("does not hold") != std::string::npos);
    CHECK(zkr::error_code(999, zkr::zkr_category()).message() == "unknown zkr error 999");
}

TEST_CASE("zkr's deadline and cancellation codes meet Asio's conditions", "[error]") {
    namespace bse = boost::system::errc;
    zkr::error_code cancelled = zkr::errc::cancelled;
    zkr::error_code timed_out = zkr::errc::timed_out;
    CHECK(cancelled == bse::operation_canceled);
    CHECK(zkr::error_code(boost::asio::error::operation_aborted) == bse::operation_canceled);
    CHECK(timed_out == bse::timed_out);
    CHECK(zkr::error_code(zkr::errc::connect_timeout) == bse::timed_out);
    CHECK_FALSE(zkr::error_code(zkr::errc::connection_loss) == bse::timed_out);
    // ZooKeeper's own codes keep their zkr identity.
    CHECK(zkr::error_code(zkr::errc::no_node).default_error_condition().category() == zkr::zkr_category());
    // One type for sync and async: an error_code converts to std::error_code for code that wants it.
    std::error_code as_std = zkr::error_code(zkr::errc::lock_lost);
    CHECK(as_std.value() == static_cast<int>(zkr::errc::lock_lost));
    CHECK(as_std.message() == zkr::error_code(zkr::errc::lock_lost).message());
}

TEST_CASE("connection trouble: what try_lock reports as not acquired", "[error]") {
    using zkr::errc;
    for (auto e : {errc::connection_loss, errc::operation_timeout, errc::session_expired, errc::timed_out,
                   errc::connect_timeout, errc::attempts_exhausted, errc::session_moved})
        CHECK(zkr::is_connection_trouble(e));
    for (auto e : {errc::no_node, errc::client_closed, errc::upgrade_refused, errc::lock_lost, errc::no_auth,
                   errc::cancelled, errc::invalid_path})
        CHECK_FALSE(zkr::is_connection_trouble(e));
}

TEST_CASE("a thrown zkr::system_error carries the code and the context", "[error]") {
    try {
        throw zkr::system_error(zkr::errc::not_owner, "zkr: release of \"/x\"");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == zkr::errc::not_owner);
        CHECK(std::string(e.what()).find("/x") != std::string::npos);
    }
}

TEST_CASE("may_have_been_applied: the one in-doubt rule, code by code", "[error][in_doubt]") {
    using zkr::errc;
    // The request was (or may have been) sent and its answer never came.
    for (auto e : {errc::connection_loss, errc::operation_timeout, errc::session_expired, errc::session_moved,
                   errc::invalid_state, errc::closing, errc::client_closed}) {
        INFO(zkr::make_error_code(e).message());
        CHECK(zkr::may_have_been_applied(zkr::make_error_code(e)));
    }
    // The server's answer, a refusal unapplied, or zkr's refusal before sending.
    for (auto e : {errc::throttled_op, errc::no_node, errc::node_exists, errc::bad_version, errc::not_empty, errc::no_auth,
                   errc::bad_arguments, errc::invalid_path, errc::timed_out, errc::cancelled, errc::too_many_watches,
                   errc::unimplemented, errc::no_children_for_ephemerals, errc::outcome_unknown}) {
        INFO(zkr::make_error_code(e).message());
        CHECK_FALSE(zkr::may_have_been_applied(zkr::make_error_code(e)));
    }
    CHECK_FALSE(zkr::may_have_been_applied({}));
    CHECK_FALSE(zkr::may_have_been_applied(boost::asio::error::operation_aborted));
}

TEST_CASE("a request failed for good keeps the doubt of an earlier attempt", "[error][in_doubt]") {
    using zkr::detail::final_failure;
    auto ec = [](zkr::errc e) { return zkr::make_error_code(e); };
    // Lost with the connection (maybe applied), then refused by a throttled server until the retry
    // policy gave up: the caller must still hear that it may have been applied.
    CHECK(final_failure(ec(zkr::errc::throttled_op), ec(zkr::errc::connection_loss)) == zkr::errc::connection_loss);
    CHECK(final_failure(ec(zkr::errc::throttled_op), ec(zkr::errc::operation_timeout)) == zkr::errc::operation_timeout);
    // Nothing in doubt before: the refusal stands (not applied).
    CHECK(final_failure(ec(zkr::errc::throttled_op), {}) == zkr::errc::throttled_op);
    // A last attempt in doubt itself, or an answer that settles it (the recipes read it: a
    // bad_version after a lost write is theirs to settle): as it is.
    CHECK(final_failure(ec(zkr::errc::session_expired), ec(zkr::errc::connection_loss)) == zkr::errc::session_expired);
    CHECK(final_failure(ec(zkr::errc::bad_version), ec(zkr::errc::connection_loss)) == zkr::errc::bad_version);
    CHECK(final_failure(ec(zkr::errc::node_exists), ec(zkr::errc::connection_loss)) == zkr::errc::node_exists);
}

}  // namespace error_test
