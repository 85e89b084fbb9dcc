// The stall probe (client_options::stall_probe_after): a server that holds a request until its
// next request arrives (ZooKeeper 3.6.0 to 3.8.0, ZOOKEEPER-4537) is sent one, instead of the
// connection waiting 2/3 of the session timeout. The fault proxy plays that server: it holds the
// reply until the client sends anything.
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/client.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <future>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::test::get_within;
using zkr::test::unique_path;
namespace zk_op = zkr::testkit::op_code;

TEST_CASE("stall probe: a reply the server holds until its next request comes within the probe's wait, not the heartbeat's",
          "[stall_probe][proxy]") {
    zkr::testkit::proxy proxy(zkr::test::first_server(zkr::test::test_connect_string()));
    // 10 s: the heartbeat would go out only after 2.5 s of silence, the connection time out at 6.67 s.
    zkr::client c(zkr::test::test_options(proxy.address(), 10s));
    c.wait_connected(10s);
    const std::string base = unique_path("stall-probe"), path = base + "/stalled";
    c.create_parents(base, zkr::create_mode::container);  // the server reaps it once empty
    auto probes_before = proxy.requests_seen(zk_op::exists, "/");

    proxy.hold_next_reply({zk_op::create, zk_op::create2}, path);
    auto sent = std::chrono::steady_clock::now();
    auto created = c.async_create(path, "x", zkr::create_mode::ephemeral, asio::use_future);
    // The probe goes out 100 ms to 150 ms after the create (default stall_probe_after, half-wait
    // ticks); the heartbeat would release it only after 2.5 s of silence. 2.4 s: before that, with
    // room for a loaded machine.
    auto result = get_within(created, 2400ms, "the held create's answer, released by the probe");
    auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - sent).count();
    CHECK(result.path == path);
    CHECK(proxy.replies_held() == 1);
    // One probe, then one more per doubling of the wait (100, 200, 400 ms...) that passed before
    // the answer came: on a quiet machine one, or two if the first passed before the server's
    // answer reached the proxy (its answer is then held too) and 200 ms later another released
    // both. A loaded machine that answers late may see one more per doubling, never one per tick.
    long long allowed = 1;
    for (long long wait = 100, at = 100; at <= took_ms; wait *= 2, at += wait) ++allowed;
    auto probes = proxy.requests_seen(zk_op::exists, "/") - probes_before;
    CHECK(probes >= 1);
    CHECK(probes <= allowed);
    // The same connection and session: nothing timed out.
    CHECK(proxy.connections_accepted() == 1);
    CHECK(c.session_count() == 1);
    CHECK(c.is_connected());
}

TEST_CASE("stall probe: zero turns it off, and the held reply waits for the heartbeat", "[stall_probe][proxy]") {
    zkr::testkit::proxy proxy(zkr::test::first_server(zkr::test::test_connect_string()));
    auto options = zkr::test::test_options(proxy.address(), 10s);
    options.stall_probe_after = 0ms;
    zkr::client c(options);
    c.wait_connected(10s);
    const std::string base = unique_path("stall-probe"), path = base + "/unprobed";
    c.create_parents(base, zkr::create_mode::container);
    auto probes_before = proxy.requests_seen(zk_op::exists, "/");

    proxy.hold_next_reply({zk_op::create, zk_op::create2}, path);
    auto created = c.async_create(path, "x", zkr::create_mode::ephemeral, asio::use_future);
    CHECK(created.wait_for(1500ms) == std::future_status::timeout);
    CHECK(proxy.requests_seen(zk_op::exists, "/") == probes_before);
    // The heartbeat (after 2.5 s to 5 s of silence) releases it, before the connection's timeout.
    CHECK(get_within(created, 8s, "the held create's answer, released by the heartbeat").path == path);
    CHECK(proxy.connections_accepted() == 1);
}

TEST_CASE("stall probe: an idle session on a slow link sends its heartbeats and no probe after them", "[stall_probe][proxy]") {
    zkr::testkit::proxy proxy(zkr::test::first_server(zkr::test::test_connect_string()));
    zkr::client c(zkr::test::test_options(proxy.address(), 4s));  // a heartbeat per second of silence
    c.wait_connected(10s);
    proxy.set_delay(300ms);  // a round trip of 600 ms: each heartbeat waits longer than the probe's 100 ms
    auto before = proxy.requests_seen(zk_op::exists, "/");
    // A window of 3.5 s: about three heartbeats. Were the session's own requests waited on, each
    // would draw two probes (at 100 ms and 300 ms) before its answer.
    CHECK(zkr::test::holds_throughout([&] { return proxy.requests_seen(zk_op::exists, "/") - before <= 5; }, 3500ms));
    CHECK(proxy.requests_seen(zk_op::exists, "/") - before >= 2);  // the heartbeats went out
    proxy.set_delay(0ms);
}

TEST_CASE("stall probe: a negative wait or one past the session timeout is refused, naming the option", "[stall_probe]") {
    auto options = zkr::test::test_options(zkr::test::test_connect_string(), 4s);
    options.stall_probe_after = -1ms;
    CHECK_THROWS_WITH(zkr::client(options), Catch::Contains("stall_probe_after") && Catch::Contains("-1 ms"));
    options.stall_probe_after = 5s;
    CHECK_THROWS_WITH(zkr::client(options), Catch::Contains("stall_probe_after") && Catch::Contains("5000 ms"));
    options.stall_probe_after = 4s;
    CHECK_NOTHROW(zkr::client(options));
}
