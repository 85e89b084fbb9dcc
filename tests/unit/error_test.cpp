#include "zkr/error.hpp"

#include <catch2/catch.hpp>

#include <zookeeper/zookeeper.h>

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
    CHECK_FALSE(zkr::is_retryable(std::make_error_code(std::errc::timed_out)));
    CHECK_FALSE(zkr::is_session_lost(std::make_error_code(std::errc::connection_reset)));
}

TEST_CASE("zkr's own errors have messages and convert from the enum", "[error]") {
    std::error_code ec = zkr::errc::upgrade_refused;
    CHECK(ec.category().name() == std::string("zkr"));
    CHECK(ec.message().find("upgrade") != std::string::npos);
    CHECK(std::error_code(zkr::errc::not_owner).message().find("does not hold") != std::string::npos);
    CHECK(std::error_code(999, zkr::zkr_category()).message() == "unknown zkr error 999");
}
