// TTL nodes against real servers: client::create_ttl (the server reaps the node once it has gone
// its TTL unmodified), zkr::ttl_node (Curator's PersistentTtlNode layout: a container and a TTL
// child renewed while kept; left to expire by close(), deleted by it when it has no child), and a
// server without TTL nodes named in the error. Servers of their own: TTL nodes need
// extendedTypesEnabled=true, and a short container-check round reaps them soon.
#include "support/curator_driver.hpp"
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "session_port.hpp"
#include "toolkit/cleanup.hpp"
#include "zkr/client.hpp"
#include "zkr/path.hpp"
#include "zkr/testkit.hpp"
#include "zkr/ttl_node.hpp"

#include <catch2/catch.hpp>

#include <future>

using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::holds_throughout;
using zkr::test::test_options;

namespace {
zkr::testkit::ensemble_options ttl_servers() {
    auto o = zkr::test::own_servers(1);
    o.server_config["extendedTypesEnabled"] = "true";
    o.container_check_interval = 100ms;
    return o;
}
bool exists(zkr::client& c, const std::string& path) { return c.exists(path).exists; }

// The TTL of the nodes kept by renewal, and how long a test watches them kept. A renewal comes
// every TTL/2, so a TTL/2 late renewal lets the child expire: 2 s leaves a loaded machine (or a
// JVM's pause) a second, where 600 ms left it 300 ms. Watched for two TTLs: two renewals at least.
constexpr auto kept_ttl = 2000ms;
constexpr auto kept_window = 2 * kept_ttl;
}  // namespace

TEST_CASE("create_ttl: a TTL node (sequential too) that the server reaps once it has gone its TTL unmodified",
          "[ttl_node][own_servers]") {
    zkr::testkit::ensemble cluster(ttl_servers());
    zkr::client c(test_options(cluster.connect_string()));
    auto made = c.create_ttl("/ttl-plain", "data", zkr::create_mode::persistent, 700ms);
    CHECK(made.path == "/ttl-plain");
    CHECK(made.stat.ephemeral_owner == 0);  // the server shows TTL nodes and containers as 0: no session's
    CHECK(c.get_data("/ttl-plain").data == "data");
    auto seq = c.create_ttl("/ttl-seq-", "", zkr::create_mode::persistent_sequential, 700ms);
    CHECK(seq.path.size() == std::string("/ttl-seq-").size() + 10);
    // Asynchronously too.
    auto later = c.async_create_ttl("/ttl-async", "", zkr::create_mode::persistent, 700ms, boost::asio::use_future);
    CHECK(later.get().path == "/ttl-async");
    // A TTL node with a child is not reaped; once the child goes, it is.
    c.create("/ttl-plain/child");
    CHECK(eventually([&] { return !exists(c, seq.path) && !exists(c, "/ttl-async"); }, 15s));
    CHECK(exists(c, "/ttl-plain"));
    c.remove("/ttl-plain/child");
    CHECK(eventually([&] { return !exists(c, "/ttl-plain"); }, 15s));
}

TEST_CASE("create_ttl and ttl_node: bad input is refused, naming it, before anything is sent", "[ttl_node]") {
    zkr::client c(test_options(zkr::test::test_connect_string()));
    std::string path = zkr::test::unique_path("ttl-bad");
    CHECK_THROWS_WITH(c.create_ttl(path, "", zkr::create_mode::ephemeral, 1s), Catch::Contains("persistent or persistent_sequential"));
    CHECK_THROWS_WITH(c.create_ttl(path, "", zkr::create_mode::container, 1s), Catch::Contains("persistent or persistent_sequential"));
    CHECK_THROWS_WITH(c.create_ttl(path, "", zkr::create_mode::persistent, 0ms), Catch::Contains("the ttl must be from 1 ms"));
    CHECK_THROWS_WITH(c.create_ttl(path, "", zkr::create_mode::persistent, zkr::client::max_ttl + 1ms),
                      Catch::Contains("(it is 1099511627776 ms)"));
    zkr::error_code ec;
    c.create_ttl(path, "", zkr::create_mode::persistent, -5ms, ec);
    CHECK(ec == zkr::errc::bad_arguments);
    CHECK_THROWS_AS(c.create_ttl("no-slash", "", zkr::create_mode::persistent, 1s), zkr::system_error);

    CHECK_THROWS_WITH(zkr::ttl_node(c, path, 0ms), Catch::Contains("the ttl must be from 1 ms"));
    CHECK_THROWS_WITH(zkr::ttl_node(c, path, 1s, "", zkr::ttl_node_options{.child_name = "a/b"}), Catch::Contains("child name"));
    CHECK_THROWS_WITH(zkr::ttl_node(c, path, 1s, "", zkr::ttl_node_options{.child_name = ""}), Catch::Contains("child name"));
    CHECK_THROWS_WITH(zkr::ttl_node(c, path, 1s, "", zkr::ttl_node_options{.touch_schedule_factor = 1}),
                      Catch::Contains("touch_schedule_factor must be at least 2"));
    CHECK_THROWS_AS(zkr::ttl_node(c, "/zookeeper/x", 1s), std::invalid_argument);
    CHECK_FALSE(exists(c, path));
}

TEST_CASE("create_ttl and ttl_node on a server without TTL nodes: the error says how to enable them, and nothing is left",
          "[ttl_node][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));  // extendedTypesEnabled unset
    zkr::client c(test_options(cluster.connect_string()));
    try {
        c.create_ttl("/no-ttl", "", zkr::create_mode::persistent, 1s);
        FAIL("create_ttl succeeded on a server without TTL nodes");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == zkr::errc::unimplemented);
        CHECK_THAT(e.what(), Catch::Contains("extendedTypesEnabled=true"));
    }
    CHECK_FALSE(exists(c, "/no-ttl"));

    auto before = cluster.watch_count(0);
    {
        zkr::ttl_node node(c, "/reg/no-ttl", 1s, "payload");
        node.start();
        try {
            node.wait_created(10s);
            FAIL("wait_created returned on a server without TTL nodes");
        } catch (const zkr::system_error& e) {
            CHECK(e.code() == zkr::errc::unimplemented);
            CHECK_THAT(e.what(), Catch::Contains("/reg/no-ttl") && Catch::Contains("extendedTypesEnabled=true"));
        }
        CHECK(node.touches() == 0);
    }
    // Closed with no child: the container (which would never be reaped) is deleted, and no watch stays.
    CHECK(eventually([&] { return !exists(c, "/reg/no-ttl"); }));
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
}

TEST_CASE("ttl node: a container and a TTL child renewed while kept (Curator's layout), back when deleted, left to expire "
          "by close",
          "[ttl_node][own_servers]") {
    zkr::testkit::ensemble cluster(ttl_servers());
    zkr::client c(test_options(cluster.connect_string()));
    zkr::client other(test_options(cluster.connect_string()));
    const std::string path = "/services/orders/alive";
    auto before = cluster.watch_count(0);
    zkr::ttl_node node(c, path, kept_ttl, "payload");
    CHECK(node.ttl() == kept_ttl);
    CHECK_FALSE(exists(other, path));  // nothing before start()
    node.start();
    REQUIRE(node.wait_created(10s));
    CHECK(other.get_data(path).data == "payload");
    CHECK(exists(other, path + "/touch"));

    // Kept past several TTLs (the server checks every 100 ms): renewed, never reaped.
    auto touches = node.touches();
    CHECK(holds_throughout([&] { return exists(other, path + "/touch"); }, kept_window));
    CHECK(node.touches() >= touches + 2);

    // Deleted by someone (the child and the node, in one transaction: removed one after the other,
    // the keeper may put the child back in between, and the node's remove is refused): both are back.
    other.multi({zkr::op::remove{path + "/touch"}, zkr::op::remove{path}});
    CHECK(eventually([&] { return exists(other, path + "/touch"); }, 10s));
    CHECK(other.get_data(path).data == "payload");

    // Seeing the child back does not mean the node's create was answered: set_data before that
    // answer returns at once and the create to come writes it.
    node.set_data("new payload");
    CHECK(eventually([&] { return other.get_data(path).data == "new payload"; }));

    // close(): no more renewals; the child expires, then the server reaps the container.
    node.close();
    CHECK(exists(other, path));  // left to its TTL, as Curator's close() leaves it
    CHECK(eventually([&] { return !exists(other, path); }, 15s));
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
    CHECK_THROWS_AS(node.start(), std::logic_error);
}

TEST_CASE("ttl node: two keepers of one path keep it while either renews", "[ttl_node][own_servers]") {
    zkr::testkit::ensemble cluster(ttl_servers());
    zkr::client a(test_options(cluster.connect_string())), b(test_options(cluster.connect_string()));
    zkr::client other(test_options(cluster.connect_string()));
    const std::string path = "/shared-alive";
    zkr::ttl_node first(a, path, kept_ttl), second(b, path, kept_ttl);
    first.start();
    second.start();
    REQUIRE(first.wait_created(10s));
    REQUIRE(second.wait_created(10s));
    auto cleanup = zkr::detail::cleanup_service::of(*zkr::detail::port_of(a));
    first.close();
    // The child still has a keeper: neither it nor the node goes; and the closed keeper's delete,
    // refused as the node has a child, is not resent.
    CHECK(holds_throughout([&] { return exists(other, path + "/touch"); }, kept_window));
    CHECK(cleanup->delete_retries() == 0);
    second.close();
    CHECK(eventually([&] { return !exists(other, path); }, 15s));
}

TEST_CASE("ttl node: closed while it waits for its node to be made, it leaves no watch", "[ttl_node][own_servers]") {
    zkr::testkit::ensemble cluster(ttl_servers());
    zkr::client c(test_options(cluster.connect_string()));
    auto before = cluster.watch_count(0);
    // Its parent is missing and not to be made: the node cannot be, and the renewal waits for it.
    zkr::ttl_node node(c, "/missing-parent/alive", 1s, "", zkr::ttl_node_options{.create_parents = false});
    node.start();
    REQUIRE(eventually([&] { return cluster.watch_count(0) > before; }));
    CHECK_FALSE(node.wait_created(100ms));
    node.close();
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
    CHECK_FALSE(c.exists("/missing-parent").exists);
}

TEST_CASE("ttl node: zkr's ttl_node and Curator's PersistentTtlNode keep one path together", "[ttl_node][interop][own_servers]") {
    zkr::testkit::ensemble cluster(ttl_servers());
    zkr::client c(test_options(cluster.connect_string()));
    zkr::client other(test_options(cluster.connect_string()));
    const std::string path = "/interop/alive";
    zkr::test::curator_session curator(cluster.connect_string());
    curator.ttl_node_start("t", path, kept_ttl, "curator");
    REQUIRE(curator.ttl_node_wait("t", 10s));
    // Curator renews its child a period after the container is made.
    REQUIRE(eventually([&] { return exists(other, path + "/touch"); }));  // the child zkr renews
    zkr::ttl_node node(c, path, kept_ttl, "zkr");
    node.start();
    REQUIRE(node.wait_created(10s));
    // Curator's keeper stops; zkr's renewals keep the node past several TTLs.
    curator.close("t");
    auto touches = node.touches();
    CHECK(holds_throughout([&] { return exists(other, path + "/touch"); }, kept_window));
    CHECK(node.touches() >= touches + 2);
    // And the other way round: a Curator keeper keeps what zkr's left.
    curator.ttl_node_start("u", path, kept_ttl, "curator");
    REQUIRE(curator.ttl_node_wait("u", 10s));
    node.close();
    CHECK(holds_throughout([&] { return exists(other, path + "/touch"); }, kept_window));
    curator.close("u");
    CHECK(eventually([&] { return !exists(other, path); }, 15s));
}

TEST_CASE("ttl node: a renewal whose reply is lost with the connection is resent, and the node is kept",
          "[ttl_node][own_servers]") {
    zkr::testkit::ensemble cluster(ttl_servers());
    zkr::testkit::proxy proxy(cluster.address(0));
    zkr::client c(test_options(proxy.address()));
    zkr::client other(test_options(cluster.connect_string()));
    c.wait_connected(10s);
    const std::string path = "/lost-reply/alive";
    // The first renewal's create is applied, its answer lost and the connection closed.
    proxy.lose_next_reply({zkr::testkit::op_code::create_ttl}, 0, path + "/touch");
    zkr::ttl_node node(c, path, kept_ttl, "payload");
    node.start();
    REQUIRE(node.wait_created(15s));
    CHECK(proxy.replies_lost() == 1);
    CHECK(exists(other, path + "/touch"));
    // Resent on the same session, it found its own child and touched it; renewals go on.
    auto touches = node.touches();
    CHECK(holds_throughout([&] { return exists(other, path + "/touch"); }, kept_window));
    CHECK(node.touches() >= touches + 2);
}
