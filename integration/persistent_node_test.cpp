// zkr::persistent_node and zkr::group_member against a real server: made, made again after a
// deletion and after a session expiry, sequential names kept (CURATOR-483), another session's
// node waited out and never adopted, a lost create reply, close deleting, bad input; group
// members seeing each other, Curator's GroupMember among them.
#include "support/curator_driver.hpp"
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "toolkit/cleanup.hpp"
#include "zkr/client.hpp"
#include "zkr/group_member.hpp"
#include "zkr/observer.hpp"
#include "zkr/path.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/testkit.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <mutex>

using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::holds_throughout;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {
// The node's owner session, or -1 when it does not exist.
std::int64_t owner_of(zkr::client& c, const std::string& path) {
    auto r = c.exists(path);
    return r.exists ? r.stat.ephemeral_owner : -1;
}
std::string data_of(zkr::client& c, const std::string& path) {
    zkr::error_code ec;
    auto d = c.get_data(path, ec);
    return ec ? "(" + ec.message() + ")" : d.data;
}
}  // namespace

TEST_CASE("persistent node: made, made again when deleted, its data set, deleted by close", "[persistent_node]") {
    std::string path = unique_path("pnode") + "/services/orders/host-a";  // parents made as containers
    zkr::client c(test_options(test_connect_string()));
    zkr::client other(test_options(test_connect_string()));
    zkr::persistent_node node(c, path, zkr::create_mode::ephemeral, "payload");
    CHECK(node.node_path().empty());
    CHECK_FALSE(other.exists(path).exists);  // nothing before start()
    node.start();
    REQUIRE(node.wait_created(10s));
    CHECK(node.node_path() == path);
    CHECK(owner_of(other, path) == c.session_id());
    CHECK(data_of(other, path) == "payload");

    auto czxid = other.exists(path).stat.czxid;
    other.remove(path);
    REQUIRE(eventually([&] { return owner_of(other, path) == c.session_id(); }));
    CHECK(other.exists(path).stat.czxid > czxid);
    CHECK(data_of(other, path) == "payload");

    node.set_data("new payload");
    // The node seen made again above may be one whose create's reply the node has not yet had:
    // the data is then written once that reply comes, not at once.
    CHECK(eventually([&] { return data_of(other, path) == "new payload"; }));
    CHECK(node.data() == "new payload");
    other.remove(path);
    REQUIRE(eventually([&] { return owner_of(other, path) == c.session_id(); }));
    CHECK(data_of(other, path) == "new payload");

    node.close();
    CHECK(eventually([&] { return !other.exists(path).exists; }));
    CHECK_THROWS_AS(node.set_data("x"), std::logic_error);
    CHECK_THROWS_AS(node.start(), std::logic_error);
}

TEST_CASE("persistent node: a node whose watch is refused (too many watches on its client) is still made again when deleted",
          "[persistent_node]") {
    // zkr refuses a watch that would take a reconnection's set-watches request past
    // max_request_size (errc::too_many_watches). The node is made, but its watch is refused: it
    // tries again (every 500 ms) rather than standing unwatched, where a delete would go unseen.
    std::string base = unique_path("pnode-watches"), pad(60, 'p');
    auto o = test_options(test_connect_string());
    o.max_request_size = 4096;
    zkr::client c(o), other(test_options(test_connect_string()));
    std::vector<zkr::watch> fillers;
    for (int i = 0;; ++i) {
        REQUIRE(i < 100);
        zkr::error_code ec;
        auto r = c.exists(base + "/filler-" + std::to_string(i) + pad, zkr::set_watch, ec);
        if (ec == zkr::errc::too_many_watches) break;
        REQUIRE_FALSE(ec);
        fillers.push_back(std::move(r.watch));
    }
    std::string path = base + "/node-" + pad + pad;
    zkr::persistent_node node(c, path, zkr::create_mode::ephemeral, "payload");
    node.start();
    REQUIRE(node.wait_created(10s));
    other.remove(path);
    CHECK(eventually([&] { return owner_of(other, path) == c.session_id(); }, 10s));
    // Watches freed: it is watched again, and a delete is seen at once.
    for (auto& w : fillers) CHECK_FALSE(w.remove());
    fillers.clear();
    other.remove(path);
    CHECK(eventually([&] { return owner_of(other, path) == c.session_id(); }, 10s));
    node.close();
    CHECK(eventually([&] { return !other.exists(path).exists; }));
}

TEST_CASE("persistent node: back after its session expires, on the new session", "[persistent_node]") {
    std::string path = unique_path("pnode-expiry");
    zkr::client c(test_options(test_connect_string()));
    zkr::client other(test_options(test_connect_string()));
    zkr::persistent_node node(c, path, zkr::create_mode::ephemeral, "p");
    node.start();
    REQUIRE(node.wait_created(10s));
    auto first = c.session_id();
    auto expired = zkr::testkit::expire_session(c);
    CHECK(expired == first);
    REQUIRE(eventually([&] { auto o = owner_of(other, path); return o != -1 && o != first && o == c.session_id(); }, 20s));
    CHECK(data_of(other, path) == "p");
}

TEST_CASE("persistent node: a sequential node keeps its name when made again (CURATOR-483)", "[persistent_node]") {
    std::string parent = unique_path("pnode-seq");
    zkr::client c(test_options(test_connect_string()));
    zkr::client other(test_options(test_connect_string()));
    zkr::persistent_node node(c, parent + "/member-", zkr::create_mode::ephemeral_sequential, "m");
    node.start();
    REQUIRE(node.wait_created(10s));
    auto actual = node.node_path();
    // Protected (always, for a sequential mode): "_c_<uuid>-member-" and the 10-digit sequence.
    auto name = std::string(zkr::node_name(actual));
    CHECK(name.rfind("_c_", 0) == 0);
    CHECK(name.find("-member-") == 39);
    CHECK(name.size() == 39 + 8 + 10);
    other.remove(actual);
    REQUIRE(eventually([&] { return owner_of(other, actual) == c.session_id(); }));
    zkr::testkit::expire_session(c);
    REQUIRE(eventually([&] { return owner_of(other, actual) == c.session_id(); }, 20s));
    CHECK(node.node_path() == actual);
    CHECK(other.get_children(parent).children.size() == 1);  // never a second node
}

TEST_CASE("persistent node: another session's node is waited out, never adopted", "[persistent_node]") {
    // Curator adopts a node in the way and writes to it, even one of a session that is about to
    // go (its own expired session's): the write is lost with that node.
    std::string path = unique_path("pnode-foreign");
    zkr::client c(test_options(test_connect_string()));
    auto squatter = std::make_unique<zkr::client>(test_options(test_connect_string()));
    squatter->create_parents(zkr::parent_path(path));
    squatter->create(path, "theirs", zkr::create_mode::ephemeral);
    zkr::persistent_node node(c, path, zkr::create_mode::ephemeral, "ours");
    node.start();
    CHECK_FALSE(node.wait_created(500ms));
    // A wait with no end is ended by close() from another thread.
    {
        zkr::persistent_node blocked(c, path, zkr::create_mode::ephemeral, "ours too");
        blocked.start();
        auto waiting = std::async(std::launch::async, [&] { return blocked.wait_created(std::chrono::milliseconds::max()); });
        CHECK(waiting.wait_for(200ms) == std::future_status::timeout);
        blocked.close();
        CHECK_FALSE(zkr::test::get_within(waiting, 10s));
    }
    CHECK(holds_throughout([&] { return data_of(c, path) == "theirs" && owner_of(c, path) == squatter->session_id(); }, 500ms));
    CHECK(node.node_path().empty());
    squatter.reset();  // its session ends, and its node with it
    REQUIRE(node.wait_created(10s));
    CHECK(owner_of(c, path) == c.session_id());
    CHECK(data_of(c, path) == "ours");
}

// The wait for a node in the way must survive that node's data changing: its watch fires
// "changed" and must be set again on that node. It was set again on our own node instead, which
// did not exist yet, so nothing was watched and ours was never made once the other node went.
TEST_CASE("persistent node: another session's node that changes while waited out is still waited out",
          "[persistent_node][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    const std::string path = "/pnode-foreign-changes/node";
    zkr::client c(test_options(cluster.connect_string()));
    auto squatter = std::make_unique<zkr::client>(test_options(cluster.connect_string()));
    squatter->create_parents(zkr::parent_path(path));
    squatter->create(path, "theirs", zkr::create_mode::ephemeral);
    const auto watches_before = cluster.watch_count(0);
    zkr::persistent_node node(c, path, zkr::create_mode::ephemeral, "ours");
    node.start();
    REQUIRE(eventually([&] { return cluster.watch_count(0) == watches_before + 1; }));  // waiting on theirs
    squatter->set_data(path, "theirs, changed");
    CHECK(eventually([&] { return cluster.watch_count(0) == watches_before + 1; }));  // and still, after the change
    squatter.reset();  // its session ends, and its node with it
    REQUIRE(node.wait_created(10s));
    CHECK(owner_of(c, path) == c.session_id());
    CHECK(data_of(c, path) == "ours");
}

// Once its session has expired, the path of our ephemeral node may hold another session's node
// before ours is back: the new data must not be written to it, and close() must not delete it
// (both went to whatever stood at the path).
TEST_CASE("persistent node: another session's node at its path after an expiry is never written to nor deleted",
          "[persistent_node][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    const std::string connect = cluster.connect_string(), path = "/pnode-replaced/node";
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address()));
    zkr::client other(test_options(connect));
    other.create(zkr::parent_path(path), "", zkr::create_mode::persistent);  // not a container: it stays
    zkr::persistent_node node(c, path, zkr::create_mode::ephemeral, "ours");
    node.start();
    REQUIRE(node.wait_created(10s));
    const auto first = c.session_id();
    proxy.refuse_connections(true);
    proxy.drop_connections();                       // c is cut off...
    zkr::testkit::expire_session(c, connect);       // ...its session ends on the server, and its node
    other.create(path, "theirs", zkr::create_mode::ephemeral);  // another session takes the path
    const auto watches_before = cluster.watch_count(0);
    proxy.refuse_connections(false);                // c is back: lost, then a new session, whose node waits for theirs
    REQUIRE(eventually([&] { return c.session_id() != first && cluster.watch_count(0) == watches_before + 1; }, 30s));
    node.set_data("ours, new");
    CHECK(data_of(other, path) == "theirs");
    node.close();
    CHECK(holds_throughout([&] { return owner_of(other, path) == other.session_id() && data_of(other, path) == "theirs"; }, 500ms));
}

namespace {

// What a client's observer hears of the requests at one path: which started, and how they ended.
struct path_requests : zkr::observer {
    explicit path_requests(std::string p) : path(std::move(p)) {}
    void on_request_started(const zkr::request_info& r) override {
        std::lock_guard lock(mutex);
        if (r.path == path) started.push_back(r.operation);
    }
    void on_request_finished(const zkr::request_info& r, zkr::error_code result, std::chrono::nanoseconds) override {
        std::lock_guard lock(mutex);
        if (r.path == path) finished.emplace_back(r.operation, result);
    }
    bool has_started(zkr::operation op) {
        std::lock_guard lock(mutex);
        return std::find(started.begin(), started.end(), op) != started.end();
    }
    std::vector<zkr::error_code> results_of(zkr::operation op) {
        std::lock_guard lock(mutex);
        std::vector<zkr::error_code> out;
        for (auto& [o, ec] : finished)
            if (o == op) out.push_back(ec);
        return out;
    }
    const std::string path;
    std::mutex mutex;
    std::vector<zkr::operation> started;
    std::vector<std::pair<zkr::operation, zkr::error_code>> finished;
};

// A client cut off by a proxy, whose session ends while it cannot know: either it gives the
// session up itself (suspended a whole session timeout: testkit::expire_session waits for that),
// or the server closes it and the client is told so once it is let back in.
struct cut_off_client {
    cut_off_client(const std::string& connect, const std::string& path)
        : proxy(first_server(connect)), seen(std::make_shared<path_requests>(path)), c(options(proxy, seen)) {}
    static zkr::client_options options(const zkr::testkit::proxy& proxy, std::shared_ptr<path_requests> seen) {
        auto o = test_options(proxy.address());
        o.observer = std::move(seen);
        return o;
    }
    void cut() {
        credentials = zkr::testkit::credentials_of(c);
        proxy.refuse_connections(true);
        proxy.drop_connections();  // all the client knows is that its connection is down
    }
    void end_session(const std::string& connect, bool told_by_server) {
        if (told_by_server) zkr::testkit::close_session(connect, credentials);
        else zkr::testkit::expire_session(c, connect);
    }
    void let_back() { proxy.refuse_connections(false); }

    zkr::testkit::proxy proxy;
    std::shared_ptr<path_requests> seen;
    zkr::client c;
    zkr::testkit::session_credentials credentials;
};

}  // namespace

// The session layer resends an idempotent request whose session expired on the next session; a
// write to, or a delete of, an ephemeral node must not be: by then its path may hold another
// session's node. Cut off, the client cannot know its session expired; the write and the delete
// below are sent (queued) on it all the same, and must end with it.
TEST_CASE("persistent node: a write sent while its session expires unnoticed never reaches another session's node on "
          "the next session",
          "[persistent_node][own_servers]") {
    const bool told_by_server = GENERATE(false, true);
    INFO((told_by_server ? "the server closed the session" : "the client gave the session up"));
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    const std::string connect = cluster.connect_string(), path = "/pnode-resent/node";
    cut_off_client cut(connect, path);
    zkr::client other(test_options(connect));
    other.create(zkr::parent_path(path), "", zkr::create_mode::persistent);
    zkr::persistent_node node(cut.c, path, zkr::create_mode::ephemeral, "ours");
    node.start();
    REQUIRE(node.wait_created(10s));
    cut.cut();
    auto write = std::async(std::launch::async, [&] { node.set_data("ours, new"); });
    REQUIRE(eventually([&] { return cut.seen->has_started(zkr::operation::set_data); }));  // sent while ours
    cut.end_session(connect, told_by_server);
    other.create(path, "theirs", zkr::create_mode::ephemeral);  // another session takes the path
    cut.let_back();
    REQUIRE(write.wait_for(30s) == std::future_status::ready);
    CHECK_NOTHROW(write.get());  // the node went with its session: made again with the new data
    REQUIRE(cut.c.flush_observer(10s));  // the observer hears of requests on a thread of its own
    CHECK(cut.seen->results_of(zkr::operation::set_data) == std::vector<zkr::error_code>{zkr::errc::session_expired});
    CHECK(data_of(other, path) == "theirs");
    node.close();
    CHECK(holds_throughout([&] { return owner_of(other, path) == other.session_id() && data_of(other, path) == "theirs"; }, 500ms));
}

TEST_CASE("guaranteed delete: a delete sent while its session expires unnoticed never removes another session's node "
          "on the next session",
          "[persistent_node][own_servers]") {
    const bool told_by_server = GENERATE(false, true);
    INFO((told_by_server ? "the server closed the session" : "the client gave the session up"));
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    const std::string connect = cluster.connect_string(), path = "/cleanup-resent";
    cut_off_client cut(connect, path);
    zkr::client other(test_options(connect));
    cut.c.create(path, "ours", zkr::create_mode::ephemeral);
    cut.cut();
    auto deleted = std::make_shared<std::promise<zkr::error_code>>();
    zkr::detail::cleanup_service::of(*zkr::detail::port_of(cut.c))
        ->guaranteed_delete(path, zkr::detail::completion<>(zkr::detail::completion<>::inline_fn(
                                      [deleted](zkr::error_code ec) { deleted->set_value(ec); })));
    REQUIRE(eventually([&] { return cut.seen->has_started(zkr::operation::remove); }));
    cut.end_session(connect, told_by_server);
    other.create(path, "theirs", zkr::create_mode::ephemeral);
    cut.let_back();
    auto result = deleted->get_future();
    REQUIRE(result.wait_for(30s) == std::future_status::ready);
    CHECK(result.get() == zkr::errc::lock_lost);  // gone with its session, says the delete
    REQUIRE(cut.c.flush_observer(10s));  // the observer hears of requests on a thread of its own
    CHECK(cut.seen->results_of(zkr::operation::remove) == std::vector<zkr::error_code>{zkr::errc::session_expired});
    CHECK(owner_of(other, path) == other.session_id());
    CHECK(data_of(other, path) == "theirs");
}

TEST_CASE("persistent node: a create whose reply was lost is taken over, not duplicated", "[persistent_node]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("pnode-lost");
    zkr::client observer(test_options(connect));
    observer.create_parents(path);
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address()));
    proxy.lose_next_reply({zkr::testkit::op_code::create, zkr::testkit::op_code::create2}, 0, path + "/node");
    zkr::persistent_node node(c, path + "/node", zkr::create_mode::ephemeral, "d");
    node.start();
    REQUIRE(node.wait_created(15s));
    CHECK(proxy.replies_lost() == 1);
    CHECK(owner_of(observer, path + "/node") == c.session_id());
    CHECK(observer.get_children(path).children.size() == 1);

    // The same for a sequential node: its protected name finds it again.
    proxy.lose_next_reply({zkr::testkit::op_code::create, zkr::testkit::op_code::create2}, 0);
    zkr::persistent_node seq(c, path + "/seq-", zkr::create_mode::ephemeral_sequential, "s");
    seq.start();
    REQUIRE(seq.wait_created(15s));
    CHECK(proxy.replies_lost() == 2);
    CHECK(observer.get_children(path).children.size() == 2);  // node and one seq- node
    CHECK(owner_of(observer, seq.node_path()) == c.session_id());
}

TEST_CASE("persistent node: a persistent node survives its session and is taken over on the next", "[persistent_node]") {
    std::string path = unique_path("pnode-persistent");
    zkr::client other(test_options(test_connect_string()));
    {
        zkr::client c(test_options(test_connect_string()));
        zkr::persistent_node node(c, path, zkr::create_mode::persistent, "v1");
        node.start();
        REQUIRE(node.wait_created(10s));
        zkr::testkit::expire_session(c);
        CHECK(data_of(other, path) == "v1");
        other.set_data(path, "changed by someone");
        // Taken over on the new session with its own data: the create finds it (no session's) and
        // writes it. New data set meanwhile is written by that take-over (set_data writes at once
        // only to a node known to be ours: on a new session, not before the take-over).
        REQUIRE(eventually([&] { return c.session_count() == 2 && c.is_connected(); }));
        node.set_data("v2");
        CHECK(eventually([&] { return data_of(other, path) == "v2"; }));
        CHECK(owner_of(other, path) == 0);
        node.close();
        CHECK(eventually([&] { return !other.exists(path).exists; }));
    }
}

TEST_CASE("persistent node: bad input is refused before anything is sent", "[persistent_node]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_WITH(zkr::persistent_node(c, "relative", zkr::create_mode::ephemeral), Catch::Contains("node path"));
    CHECK_THROWS_WITH(zkr::persistent_node(c, "/zookeeper/x", zkr::create_mode::ephemeral), Catch::Contains("node path"));
    std::string big(2 * 1024 * 1024, 'x');
    CHECK_THROWS_WITH(zkr::persistent_node(c, "/fine", zkr::create_mode::ephemeral, big), Catch::Contains("node data"));
    zkr::persistent_node node(c, "/fine", zkr::create_mode::ephemeral);
    CHECK_THROWS_WITH(node.set_data(big), Catch::Contains("node data"));
    CHECK_FALSE(c.exists("/fine").exists);
}

TEST_CASE("group member: members see each other, themselves included, and a leaver goes", "[group_member]") {
    std::string path = unique_path("group");
    zkr::client ca(test_options(test_connect_string()));
    zkr::client cb(test_options(test_connect_string()));
    zkr::group_member a(ca, path, "host-a", "pa");
    CHECK(a.members() == std::map<std::string, std::string>{{"host-a", "pa"}});  // self, before start
    zkr::group_member b(cb, path, "host-b", "pb");
    a.start();
    b.start();
    REQUIRE(a.wait_joined(10s));
    REQUIRE(b.wait_joined(10s));
    CHECK(a.wait_joined(std::chrono::milliseconds::max()));  // for ever: no deadline overflows
    std::map<std::string, std::string> both{{"host-a", "pa"}, {"host-b", "pb"}};
    CHECK(eventually([&] { return a.members() == both && b.members() == both; }));
    b.set_payload("pb2");
    CHECK(eventually([&] { return a.members()["host-b"] == "pb2"; }));
    b.close();
    CHECK(eventually([&] { return a.members() == std::map<std::string, std::string>{{"host-a", "pa"}}; }));
}

TEST_CASE("group member: bad ids and paths are refused", "[group_member]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_WITH(zkr::group_member(c, "/g", "a/b"), Catch::Contains("member id"));
    CHECK_THROWS_WITH(zkr::group_member(c, "/g", ""), Catch::Contains("member id"));
    CHECK_THROWS_WITH(zkr::group_member(c, "/g", ".."), Catch::Contains("member id"));
    CHECK_THROWS_AS(zkr::group_member(c, "g", "a"), std::invalid_argument);
    CHECK_FALSE(c.exists("/g").exists);
}

TEST_CASE("group member: zkr's and Curator's GroupMember see each other on one path", "[group_member][interop]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("group-interop");
    zkr::client c(test_options(connect));
    zkr::group_member ours(c, path, "zkr-1", "from zkr");
    ours.start();
    REQUIRE(ours.wait_joined(10s));
    zkr::test::curator_session curator(connect);
    curator.group_start("g", path, "curator-1", "from curator");
    std::map<std::string, std::string> everyone{{"zkr-1", "from zkr"}, {"curator-1", "from curator"}};
    CHECK(eventually([&] { return ours.members() == everyone; }, 15s));
    CHECK(eventually([&] { return curator.group_members("g") == everyone; }, 15s));
    curator.close("g");
    CHECK(eventually([&] { return ours.members() == std::map<std::string, std::string>{{"zkr-1", "from zkr"}}; }, 15s));
}

TEST_CASE("persistent node and group member: close leaves no watch on the server", "[persistent_node][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string()));
    zkr::client other(test_options(cluster.connect_string()));
    auto before = cluster.watch_count(0);
    {
        zkr::persistent_node node(c, "/reg/a", zkr::create_mode::ephemeral, "x");
        node.start();
        REQUIRE(node.wait_created(10s));
        // Made again twice (each run watches the node anew).
        for (int i = 0; i < 2; ++i) {
            auto czxid = other.exists("/reg/a").stat.czxid;
            other.remove("/reg/a");
            REQUIRE(eventually([&] { auto r = other.exists("/reg/a"); return r.exists && r.stat.czxid > czxid; }));
        }
        zkr::group_member member(c, "/group", "m1", "p");
        member.start();
        REQUIRE(member.wait_joined(10s));
        REQUIRE(eventually([&] { return cluster.watch_count(0) > before; }));
        member.close();
        node.close();
    }
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
    // A node's close sends its watch's removal, then its delete: the count back proves only the
    // first, and the delete is read through another client.
    CHECK(eventually([&] { return !other.exists("/reg/a").exists; }));
    CHECK_FALSE(other.exists("/group/m1").exists);
}
