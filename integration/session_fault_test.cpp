// The session under faults: server restarts, expiry, leader failover, silence.
// These need servers of their own, so they do not run against an external ensemble.
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::connection_state;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::state_log;
using zkr::test::test_options;


TEST_CASE("server restarted within the session timeout: suspended then reconnected on the same session", "[session][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::test::restart_gate gate(cluster);  // see restart_gate: no connection stranded by the restart
    zkr::client c(test_options(gate.address(), 10s));
    c.wait_connected(10s);
    state_log log(c);
    auto session = c.session_id();
    c.create("/eph", "mine", zkr::create_mode::ephemeral);

    gate.stop();
    REQUIRE(eventually([&] { return log.saw(connection_state::suspended); }));
    CHECK_FALSE(c.is_connected());
    // An operation issued while the server is down completes once it is back (retried).
    auto pending = c.async_get_data("/eph", asio::use_future);
    gate.start();
    REQUIRE(eventually([&] { return log.saw(connection_state::reconnected); }, 15s));
    CHECK(pending.get().data == "mine");
    CHECK(c.session_id() == session);
    CHECK(c.session_count() == 1);
    CHECK(c.exists("/eph").exists);
    CHECK_FALSE(log.saw(connection_state::lost));
    auto states = log.snapshot();
    REQUIRE(states.size() >= 2);
    CHECK(states[0] == connection_state::suspended);
    CHECK(states[1] == connection_state::reconnected);
}

TEST_CASE("forced session expiry: lost and then a new session that works", "[session][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string()));
    zkr::client observer(test_options(cluster.connect_string()));
    c.wait_connected(10s);
    state_log log(c);
    c.create("/eph", "", zkr::create_mode::ephemeral);
    auto watch = c.get_data("/eph", zkr::set_watch).watch;

    auto old_session = zkr::testkit::expire_session(c, cluster.connect_string());
    REQUIRE(eventually([&] { return c.is_connected() && c.session_id() != 0 && c.session_id() != old_session; }));
    CHECK(c.session_count() == 2);
    // The server may drop the connection first (suspended); then lost, then the new session.
    // state() is live but listeners hear of a change later, on the executor: the log is waited
    // for on its own, not read the moment the client reads connected.
    std::vector<connection_state> states;
    REQUIRE(eventually([&] {
        states = log.snapshot();
        auto lost = std::find(states.begin(), states.end(), connection_state::lost);
        return lost != states.end() && lost + 1 != states.end();
    }));
    auto lost = std::find(states.begin(), states.end(), connection_state::lost);
    REQUIRE(lost != states.end());
    REQUIRE(lost + 1 != states.end());
    CHECK(*(lost + 1) == connection_state::connected);
    CHECK(std::count(states.begin(), states.end(), connection_state::lost) == 1);
    // The old session's ephemeral node and watch went with it.
    CHECK_FALSE(observer.exists("/eph").exists);
    // The old session's watch ends: with the node's deletion, when the server closing the session
    // could still tell this connection, else with the session itself. Never left pending.
    try {
        auto ev = watch.wait(10s);
        REQUIRE(ev);
        CHECK(ev->type == zkr::event_type::deleted);
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::session_expired);
    }
    // The new session works.
    auto e = c.create("/eph", "", zkr::create_mode::ephemeral);
    CHECK(e.stat.ephemeral_owner == c.session_id());
}

TEST_CASE("suspended past the session timeout: lost locally and then a new session", "[session][fault][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string(), 2s));
    c.wait_connected(10s);
    state_log log(c);
    auto old_session = c.session_id();
    auto granted = c.session_timeout();

    cluster.freeze(0);
    auto paused_at = std::chrono::steady_clock::now();
    REQUIRE(eventually([&] { return log.saw(connection_state::lost); }, 10s));
    auto lost_after = std::chrono::steady_clock::now() - paused_at;
    // Lost is declared while the server is still frozen: the client does not wait for it.
    CHECK(lost_after < granted * 3);
    cluster.thaw(0);
    REQUIRE(eventually([&] { return c.is_connected(); }, 15s));
    CHECK(c.session_id() != old_session);
    auto states = log.snapshot();
    CHECK(states.front() == connection_state::suspended);
    CHECK(std::find(states.begin(), states.end(), connection_state::reconnected) == states.end());
}

TEST_CASE("leader of a 3-server ensemble killed: the session survives", "[session][fault][ensemble][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(3));
    zkr::client c(test_options(cluster.connect_string(), 6s));
    c.wait_connected(10s);
    state_log log(c);
    auto session = c.session_id();
    c.create("/eph", "", zkr::create_mode::ephemeral);
    c.create("/counter", "0");

    int leader = cluster.wait_for_leader(30s);
    cluster.kill(leader);
    int new_leader = cluster.wait_for_leader(30s);
    CHECK(new_leader != leader);
    // Every client is cut (a follower that loses its leader closes its connections): what follows
    // is read once the client is back, not before it learnt of the cut.
    REQUIRE(eventually([&] { return log.saw(connection_state::reconnected); }, 30s));
    // Operations resume on the same session.
    CHECK(c.set_data("/counter", "1").version == 1);
    CHECK(c.session_id() == session);
    CHECK(c.exists("/eph").exists);
    CHECK_FALSE(log.saw(connection_state::lost));
    cluster.start(leader);
    CHECK(c.get_data("/counter").data == "1");
}
