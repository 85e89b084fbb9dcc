// "May this write have been applied?" — zkr::may_have_been_applied, the one rule every recipe
// takes (recipes/README.md), decided code by code against a real server: each test makes a
// write fail with one code and reads whether the server applied it. A code after which the
// write was seen applied must count as in doubt; throttled_op, which the server answers without
// applying, must not.
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "completion.hpp"
#include "session_port.hpp"
#include "zkr/client.hpp"
#include "zkr/error.hpp"
#include "zkr/retry.hpp"
#include "zkr/testkit.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <future>
#include <optional>
#include <map>
#include <memory>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;
namespace op = zkr::testkit::op_code;

namespace {
// A client through `proxy` whose requests are sent once (`retries` more at most), with no stall
// probe (it would release a held reply) and a session of `session`.
zkr::client_options through(const zkr::testkit::proxy& proxy, int retries, std::chrono::milliseconds session = 4000ms) {
    auto o = test_options(proxy.address(), session);
    o.retry_policy = std::make_shared<zkr::retry::retry_n_times>(retries, 100ms);
    o.stall_probe_after = 0ms;
    return o;
}

// Resends after a connection loss, gives up on anything else: so that a resend that meets an
// expired session is the last try, and its error the caller's.
struct resend_after_loss_only : zkr::retry::policy {
    std::optional<std::chrono::milliseconds> next_sleep(const zkr::retry::attempt& a) const override {
        if (a.error == errc::connection_loss && a.retry_count < 20) return 100ms;
        return std::nullopt;
    }
};

// The create's outcome, as the caller gets it.
zkr::error_code create_outcome(std::future<zkr::create_result>& f) { return zkr::test::error_of(f, 60s); }
}  // namespace

TEST_CASE("in doubt: a write whose reply was lost with the connection was applied (connection_loss)", "[in_doubt]") {
    const std::string connect = test_connect_string(), base = unique_path("doubt-loss"), path = base + "/written";
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(through(proxy, 0)), observer(test_options(connect));
    observer.create_parents(base);
    c.wait_connected(10s);
    proxy.lose_next_reply({op::create, op::create2}, 0, path);
    auto made = c.async_create(path, "x", zkr::create_mode::persistent, asio::use_future);
    auto ec = create_outcome(made);
    CHECK(ec == errc::connection_loss);
    CHECK(observer.exists(path).exists);  // applied all the same
    CHECK(zkr::may_have_been_applied(ec));
}

TEST_CASE("in doubt: a write unanswered when the connection timed out was applied (operation_timeout)", "[in_doubt]") {
    const std::string connect = test_connect_string(), base = unique_path("doubt-timeout"), path = base + "/written";
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(through(proxy, 0, 2000ms)), observer(test_options(connect));
    observer.create_parents(base);
    c.wait_connected(10s);
    // The server applies it; its answer stops at the proxy, and then nothing crosses at all: the
    // C client times the connection out (2/3 of the session timeout) with the create unanswered.
    proxy.hold_next_reply({op::create, op::create2}, path);
    auto made = c.async_create(path, "x", zkr::create_mode::persistent, asio::use_future);
    REQUIRE(eventually([&] { return proxy.replies_held() == 1; }));
    proxy.partition(true);
    auto ec = create_outcome(made);
    proxy.partition(false);
    CHECK(ec == errc::operation_timeout);
    CHECK(observer.exists(path).exists);
    CHECK(zkr::may_have_been_applied(ec));
}

TEST_CASE("in doubt: a write bound to its session, lost with the connection and then refused on the next session, was "
          "applied (session_expired)",
          "[in_doubt]") {
    // A write to an ephemeral node is sent only on that node's session (persistent_node, the
    // cleanup service: session_port::set_data_on_session). Its first try's reply is lost with
    // the connection; the session is closed on the server while the client cannot reach it; the
    // resend, on the next session, is refused with session_expired: the caller's last word.
    const std::string connect = test_connect_string(), base = unique_path("doubt-expired"), path = base + "/written";
    zkr::testkit::proxy proxy(first_server(connect));
    auto options = through(proxy, 0);
    options.retry_policy = std::make_shared<resend_after_loss_only>();
    zkr::client c(options), observer(test_options(connect));
    observer.create_parents(base);
    observer.create(path, "old", zkr::create_mode::persistent);
    c.wait_connected(10s);
    auto session = zkr::testkit::credentials_of(c);
    proxy.refuse_connections(true);
    proxy.lose_next_reply({op::set_data}, 0, path);
    std::promise<zkr::error_code> written;
    zkr::detail::port_of(c)->set_data_on_session(
        session.id, path, "new", zkr::any_version,
        zkr::detail::completion<zkr::stat>(zkr::detail::completion<zkr::stat>::inline_fn(
            [&](zkr::error_code ec, zkr::stat) { written.set_value(ec); })));
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    zkr::testkit::close_session(connect, session);
    proxy.refuse_connections(false);
    auto f = written.get_future();
    REQUIRE(f.wait_for(60s) == std::future_status::ready);
    auto ec = f.get();
    INFO(ec.message());
    CHECK(ec == errc::session_expired);
    CHECK(observer.get_data(path).data == "new");  // applied by the first try
    CHECK(zkr::may_have_been_applied(ec));
}

TEST_CASE("in doubt: a write in flight when its client closed was applied (client_closed)", "[in_doubt]") {
    const std::string connect = test_connect_string(), base = unique_path("doubt-closed"), path = base + "/written";
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client observer(test_options(connect));
    observer.create_parents(base);
    std::future<zkr::create_result> made;
    {
        zkr::client c(through(proxy, 0));
        c.wait_connected(10s);
        proxy.hold_next_reply({op::create, op::create2}, path);
        made = c.async_create(path, "x", zkr::create_mode::persistent, asio::use_future);
        REQUIRE(eventually([&] { return proxy.replies_held() == 1; }));
    }  // closed with the create unanswered
    auto ec = create_outcome(made);
    CHECK(ec == errc::client_closed);
    CHECK(observer.exists(path).exists);
    CHECK(zkr::may_have_been_applied(ec));
}

// (That a throttled resend keeps an earlier attempt's doubt is the session layer's rule,
// final_failure in src/requests.hpp: tests/unit/error_test.cpp.)
TEST_CASE("in doubt: a write the server throttled was not applied (throttled_op)", "[in_doubt][own_servers]") {
    // One request in the server's pipeline at a time, and one that waited in its throttle longer
    // than 1 ms is answered throttled_op without being applied (ZooKeeper 3.6+).
    auto options = zkr::test::own_servers(1);
    options.jvm_options.push_back("-Dzookeeper.request_throttle_max_requests=1");
    options.jvm_options.push_back("-Dzookeeper.throttled_op_wait_time=1");
    zkr::testkit::ensemble server(options);
    zkr::testkit::proxy proxy(server.address(0));
    zkr::client c(through(proxy, 0)), observer(test_options(server.connect_string()));
    c.wait_connected(10s);
    const std::string base = "/throttled";
    observer.create(base, "", zkr::create_mode::persistent);
    // A burst: some are throttled. Each one throttled must be absent, each one made present.
    std::map<std::string, std::future<zkr::create_result>> burst;
    for (int round = 0; round < 20; ++round) {
        for (int i = 0; i < 100; ++i) {
            auto path = base + "/n" + std::to_string(round) + "-" + std::to_string(i);
            burst.emplace(path, c.async_create(path, "x", zkr::create_mode::persistent, asio::use_future));
        }
        int throttled = 0;
        for (auto& [path, f] : burst) {
            auto ec = create_outcome(f);
            INFO(path << ": " << ec.message());
            if (ec == errc::throttled_op) {
                ++throttled;
                CHECK_FALSE(observer.exists(path).exists);
            } else {
                REQUIRE_FALSE(ec);
                CHECK(observer.exists(path).exists);
            }
        }
        burst.clear();
        if (throttled > 0) {
            SUCCEED("throttled " << throttled << " of 100 in round " << round);
            break;
        }
        REQUIRE(round < 19);  // the server throttled nothing in 2,000 writes: the premise failed
    }
    CHECK_FALSE(zkr::may_have_been_applied(zkr::make_error_code(errc::throttled_op)));
}
