// zkr::tree_cache against a real server: the first read, every kind of change in order, a path
// that does not exist yet, depth limits, a node deleted and made again unseen, resync after a
// session loss (deletions reported, initialized again), watches removed by close(), a slow
// listener, and convergence under random changes with partitions and expiries.
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"
#include "zkr/testkit.hpp"
#include "zkr/tree_cache.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::get_within;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// Every event a cache sent, in order.
struct event_log {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<zkr::cache_event> events;
    zkr::subscription sub;
    explicit event_log(zkr::tree_cache& c) {
        sub = c.on_change([this](const zkr::cache_event& e) {
            std::lock_guard lock(mutex);
            events.push_back(e);
            changed.notify_all();
        });
    }
    std::vector<zkr::cache_event> snapshot() {
        std::lock_guard lock(mutex);
        return events;
    }
    // Waits for an event matching `pred` at index `from` or later; returns its index (or throws).
    std::size_t wait_for(const std::function<bool(const zkr::cache_event&)>& pred, std::size_t from = 0,
                         std::chrono::milliseconds timeout = 10s) {
        std::unique_lock lock(mutex);
        std::size_t found = SIZE_MAX;
        bool ok = changed.wait_for(lock, timeout, [&] {
            for (std::size_t i = from; i < events.size(); ++i)
                if (pred(events[i])) {
                    found = i;
                    return true;
                }
            return false;
        });
        if (!ok) zkr::test::fail_deadline("a cache event", timeout);
        return found;
    }
    std::size_t count(zkr::cache_event_type t) {
        std::lock_guard lock(mutex);
        return std::count_if(events.begin(), events.end(), [&](auto& e) { return e.type == t; });
    }
};

auto is(zkr::cache_event_type t, const std::string& path = {}) {
    return [t, path](const zkr::cache_event& e) { return e.type == t && (path.empty() || e.path == path); };
}

// The subtree as the server has it now (path -> data), read afresh, `max_depth` deep.
std::map<std::string, std::string> server_tree(zkr::client& c, const std::string& path, int max_depth = -1, int depth = 0) {
    std::map<std::string, std::string> out;
    zkr::error_code ec;
    auto d = c.get_data(path, ec);
    if (ec == zkr::errc::no_node) return out;
    if (ec) throw zkr::system_error(ec, "server_tree " + path);
    out[path] = d.data;
    if (max_depth >= 0 && depth >= max_depth) return out;
    auto kids = c.get_children(path, ec);
    if (ec == zkr::errc::no_node) return out;
    if (ec) throw zkr::system_error(ec, "server_tree children " + path);
    for (auto& k : kids.children) out.merge(server_tree(c, zkr::join_path(path, k), max_depth, depth + 1));
    return out;
}

// The first few paths where the cache differs from the server, for a failure's message.
std::string tree_difference(const std::map<std::string, std::string>& server, const std::map<std::string, std::string>& cache) {
    std::ostringstream out;
    out << server.size() << " nodes on the server, " << cache.size() << " cached";
    int shown = 0;
    for (auto& [p, data] : server) {
        auto it = cache.find(p);
        if (it == cache.end()) out << "; missing " << p;
        else if (it->second != data) out << "; " << p << " cached \"" << it->second << "\", server \"" << data << "\"";
        else continue;
        if (++shown == 8) return out.str();
    }
    for (auto& [p, data] : cache) {
        if (server.count(p)) continue;
        out << "; extra " << p;
        if (++shown == 8) break;
    }
    return out.str();
}

std::map<std::string, std::string> cache_tree(zkr::tree_cache& cache, const std::string& path) {
    std::map<std::string, std::string> out;
    auto n = cache.get(path);
    if (!n) return out;
    out[path] = n->data;
    for (auto& k : cache.children(path)) out.merge(cache_tree(cache, zkr::join_path(path, k)));
    return out;
}

}  // namespace

TEST_CASE("tree cache: reads the subtree, then reports creates, changes and deletes in order", "[tree_cache]") {
    std::string path = unique_path("cache");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(path);
    c.create(path + "/a", "a0");
    c.create(path + "/a/x", "x0");
    c.create(path + "/b", "b0");

    zkr::tree_cache cache(c, path);
    event_log log(cache);
    cache.start();
    REQUIRE(cache.wait_initialized(std::chrono::milliseconds::max()));  // for ever: no deadline overflows
    CHECK(cache.initialized());
    CHECK(cache.size() == 4);
    CHECK(cache.children(path) == std::vector<std::string>{"a", "b"});
    CHECK(cache.children(path + "/a") == std::vector<std::string>{"x"});
    REQUIRE(cache.get(path + "/a/x"));
    CHECK(cache.get(path + "/a/x")->data == "x0");
    CHECK(cache.get(path + "/a/x")->stat.czxid == c.exists(path + "/a/x").stat.czxid);
    CHECK_FALSE(cache.get(path + "/nothing"));

    auto init = log.wait_for(is(zkr::cache_event_type::initialized));
    auto first = log.snapshot();
    CHECK(init == 4);  // four created first, then initialized
    for (std::size_t i = 0; i < 4; ++i) CHECK(first[i].type == zkr::cache_event_type::created);

    c.set_data(path + "/a", "a1");
    auto changed = log.wait_for(is(zkr::cache_event_type::changed, path + "/a"), init);
    CHECK(log.snapshot()[changed].data == "a1");
    c.create(path + "/c", "c0");
    auto created = log.wait_for(is(zkr::cache_event_type::created, path + "/c"), changed);
    CHECK(log.snapshot()[created].data == "c0");
    c.remove(path + "/a/x");
    auto deleted = log.wait_for(is(zkr::cache_event_type::deleted, path + "/a/x"), created);
    CHECK(log.snapshot()[deleted].data.empty());
    CHECK_FALSE(cache.get(path + "/a/x"));
    CHECK(cache.children(path + "/a").empty());
    CHECK(cache.children(path) == std::vector<std::string>{"a", "b", "c"});
    CHECK(cache.get(path + "/a")->data == "a1");
    CHECK(cache_tree(cache, path) == server_tree(c, path));
    CHECK(log.count(zkr::cache_event_type::initialized) == 1);
}

TEST_CASE("tree cache: a path that does not exist is waited for and never created", "[tree_cache]") {
    std::string path = unique_path("cache-missing");
    zkr::client c(test_options(test_connect_string()));
    zkr::tree_cache cache(c, path + "/config");
    event_log log(cache);
    cache.start();
    REQUIRE(cache.wait_initialized(10s));  // the whole (empty) subtree is read
    CHECK(cache.size() == 0);
    CHECK_FALSE(c.exists(path + "/config").exists);
    CHECK_FALSE(c.exists(path).exists);

    c.create_parents(path + "/config");
    c.create(path + "/config/db", "url");
    log.wait_for(is(zkr::cache_event_type::created, path + "/config/db"));
    CHECK(cache.get(path + "/config/db")->data == "url");
    // The path's own node deleted (its child first) and made again: seen both ways.
    c.remove(path + "/config/db");
    c.remove(path + "/config");
    log.wait_for(is(zkr::cache_event_type::deleted, path + "/config"));
    CHECK(cache.size() == 0);
    c.create(path + "/config", "again");
    log.wait_for([&](auto& e) { return e.type == zkr::cache_event_type::created && e.path == path + "/config" && e.data == "again"; });
    CHECK(cache.get(path + "/config")->data == "again");
}

TEST_CASE("tree cache: max_depth 0 caches the node alone, 1 its children too", "[tree_cache]") {
    std::string path = unique_path("cache-depth");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(path + "/a/deep");
    zkr::tree_cache zero(c, path, zkr::tree_cache_options{.max_depth = 0});
    zkr::tree_cache one(c, path, zkr::tree_cache_options{.max_depth = 1});
    zero.start();
    one.start();
    REQUIRE(zero.wait_initialized(10s));
    REQUIRE(one.wait_initialized(10s));
    CHECK(zero.size() == 1);
    CHECK(zero.children(path).empty());
    CHECK(one.size() == 2);
    CHECK(one.children(path) == std::vector<std::string>{"a"});
    CHECK_FALSE(one.get(path + "/a/deep"));
    c.create(path + "/b");
    REQUIRE(eventually([&] { return one.size() == 3; }));
    CHECK(zero.size() == 1);
}

TEST_CASE("tree cache: after a session loss it resyncs, reports what changed unseen, and is initialized again",
          "[tree_cache]") {
    // Partitioned; its session closed on the server; meanwhile a node is deleted and made again
    // with new data at the same version (0), another deleted, another made. On return the cache
    // must report each (Curator's CuratorCache misses the first: it compares versions).
    std::string connect = test_connect_string();
    std::string path = unique_path("cache-resync");
    zkr::client writer(test_options(connect));
    writer.create_parents(path);
    writer.create(path + "/same", "old");
    writer.create(path + "/gone", "g");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address()));
    zkr::tree_cache cache(c, path);
    event_log log(cache);
    cache.start();
    REQUIRE(cache.wait_initialized(10s));
    auto mark = log.wait_for(is(zkr::cache_event_type::initialized)) + 1;  // listeners hear of it after
    auto old_czxid = cache.get(path + "/same")->stat.czxid;

    auto credentials = zkr::testkit::credentials_of(c);
    proxy.partition(true);
    zkr::testkit::close_session(connect, credentials);
    writer.remove(path + "/same");
    writer.create(path + "/same", "new");
    writer.remove(path + "/gone");
    writer.create(path + "/fresh", "f");
    proxy.partition(false);

    auto again = log.wait_for(is(zkr::cache_event_type::initialized), mark, 30s);
    auto events = log.snapshot();
    bool same_changed = false, gone_deleted = false, fresh_created = false;
    for (std::size_t i = mark; i < again; ++i) {
        auto& e = events[i];
        if (e.path == path + "/same" && e.type == zkr::cache_event_type::changed && e.data == "new") same_changed = true;
        if (e.path == path + "/gone" && e.type == zkr::cache_event_type::deleted) gone_deleted = true;
        if (e.path == path + "/fresh" && e.type == zkr::cache_event_type::created && e.data == "f") fresh_created = true;
    }
    CHECK(same_changed);
    CHECK(gone_deleted);
    CHECK(fresh_created);
    CHECK(cache.get(path + "/same")->stat.czxid > old_czxid);
    CHECK(cache.get(path + "/same")->stat.version == 0);
    CHECK(cache_tree(cache, path) == server_tree(writer, path));
    CHECK(c.session_count() == 2);
}

TEST_CASE("tree cache: close removes every watch it left on the server", "[tree_cache][own_servers]") {
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    zkr::client c(test_options(cluster.connect_string()));
    c.create_parents("/tree/a");
    for (int i = 0; i < 10; ++i) c.create("/tree/a/n" + std::to_string(i), "d");
    auto before = cluster.watch_count(0);
    {
        zkr::tree_cache cache(c, "/tree");
        cache.start();
        REQUIRE(cache.wait_initialized(10s));
        CHECK(cache.size() == 12);
        // A data and a child watch per node (the server counts one per path and kind).
        REQUIRE(eventually([&] { return cluster.watch_count(0) >= before + 24; }));
        cache.close();
        CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
        CHECK(cache.size() == 12);  // still readable
    }
    // A cache on a missing path leaves an exists watch; close takes it too.
    zkr::tree_cache missing(c, "/not-there");
    missing.start();
    REQUIRE(missing.wait_initialized(10s));
    REQUIRE(eventually([&] { return cluster.watch_count(0) == before + 1; }));
    missing.close();
    CHECK(eventually([&] { return cluster.watch_count(0) == before; }));
    CHECK_FALSE(c.exists("/not-there").exists);
}

TEST_CASE("tree cache: a listener that blocks holds up only its own calls", "[tree_cache]") {
    std::string path = unique_path("cache-slow");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(path);
    zkr::tree_cache cache(c, path);
    std::promise<void> release;
    auto released = release.get_future().share();
    std::atomic<int> calls{0};
    auto sub = cache.on_change([&](const zkr::cache_event&) {
        if (calls++ == 0) released.wait();  // the first call blocks the client's executor
    });
    cache.start();
    REQUIRE(eventually([&] { return calls.load() == 1; }));
    // The cache keeps reading, and a lock on the same client is taken (its machinery does not
    // run on the executor).
    c.create(path + "/while-blocked", "x");
    CHECK(eventually([&] { return cache.get(path + "/while-blocked").has_value(); }));
    CHECK(cache.initialized());
    zkr::mutex m(c, path + "-lock");
    CHECK(m.try_lock_for(5s));
    m.unlock();
    CHECK(calls.load() == 1);
    release.set_value();
    CHECK(eventually([&] { return calls.load() >= 3; }));  // created x2 (path, while-blocked) + initialized
}

TEST_CASE("tree cache: async_wait_initialized completes, and is cancelled by close", "[tree_cache]") {
    std::string path = unique_path("cache-async");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(path);
    {
        zkr::tree_cache cache(c, path);
        auto f = cache.async_wait_initialized(asio::use_future);
        cache.start();
        get_within(f, 10s);  // throws on an error
        auto again = cache.async_wait_initialized(asio::use_future);  // initialized: at once
        get_within(again, 10s);
    }
    zkr::tree_cache never(c, path);  // never started: never initialized
    auto waiting = never.async_wait_initialized(asio::use_future);
    asio::cancellation_signal signal;
    auto cancelled = never.async_wait_initialized(asio::bind_cancellation_slot(signal.slot(), asio::use_future));
    signal.emit(asio::cancellation_type::terminal);
    CHECK_THROWS_MATCHES(get_within(cancelled, 10s), zkr::system_error,
                         Catch::Predicate<zkr::system_error>([](auto& e) { return e.code() == zkr::errc::cancelled; }));
    never.close();
    CHECK_THROWS_MATCHES(get_within(waiting, 10s), zkr::system_error,
                         Catch::Predicate<zkr::system_error>([](auto& e) { return e.code() == zkr::errc::cancelled; }));
    CHECK_FALSE(never.wait_initialized(10ms));
    CHECK_THROWS_AS(never.start(), std::logic_error);
}

TEST_CASE("tree cache: bad input is refused before anything is sent", "[tree_cache]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_WITH(zkr::tree_cache(c, "no-slash"), Catch::Contains("cached path"));
    CHECK_THROWS_WITH(zkr::tree_cache(c, "/a/"), Catch::Contains("cached path"));
    CHECK_THROWS_WITH(zkr::tree_cache(c, "/zookeeper/quota"), Catch::Contains("cached path"));
    CHECK_THROWS_WITH(zkr::tree_cache(c, "/"), Catch::Contains("cached path"));
    CHECK_THROWS_WITH(zkr::tree_cache(c, "/a", zkr::tree_cache_options{.max_depth = -2}), Catch::Contains("max_depth -2"));
    CHECK_THROWS_WITH(zkr::tree_cache(c, "/a", zkr::tree_cache_options{.max_reads_in_flight = 0}),
                      Catch::Contains("max_reads_in_flight"));
    zkr::tree_cache cache(c, "/a");
    CHECK_THROWS_AS(cache.on_change({}), std::invalid_argument);
}

TEST_CASE("tree cache: converges on the server's tree after random changes through partitions and expiries",
          "[tree_cache][chaos]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("cache-random");
    zkr::client writer(test_options(connect));
    writer.create_parents(path);
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address()));
    zkr::tree_cache cache(c, path, zkr::tree_cache_options{.max_reads_in_flight = 4});
    cache.start();
    REQUIRE(cache.wait_initialized(10s));

    std::mt19937 rng(Catch::rngSeed());
    std::vector<std::string> nodes;  // below path
    auto change = [&] {
        int what = std::uniform_int_distribution<int>(0, 9)(rng);
        if (nodes.empty() || what < 4) {
            std::string parent = nodes.empty() || what < 2 ? path : nodes[std::uniform_int_distribution<std::size_t>(0, nodes.size() - 1)(rng)];
            if (std::count(parent.begin() + path.size(), parent.end(), '/') >= 3) parent = path;
            std::string p = parent + "/n" + std::to_string(rng() % 100000);
            zkr::error_code ec;
            writer.create(p, "d" + std::to_string(rng()), zkr::create_mode::persistent, ec);
            if (!ec) nodes.push_back(p);
        } else if (what < 8) {
            zkr::error_code ec;
            writer.set_data(nodes[rng() % nodes.size()], "d" + std::to_string(rng()), zkr::any_version, ec);
        } else {
            auto i = rng() % nodes.size();
            zkr::error_code ec;
            writer.remove(nodes[i], zkr::any_version, ec);  // not_empty when it has children: fine
            if (!ec) nodes.erase(nodes.begin() + static_cast<long>(i));
        }
    };
    for (int round = 0; round < 6; ++round) {
        INFO("round " << round);
        for (int i = 0; i < 15; ++i) change();
        // Each fault starts from a session (the last one's loss may still be being recovered).
        REQUIRE(eventually([&] { return c.is_connected(); }, 20s));
        if (round % 3 == 1) {
            // Cut off, session closed on the server: changes made unseen.
            auto credentials = zkr::testkit::credentials_of(c);
            proxy.partition(true);
            zkr::testkit::close_session(connect, credentials);
            for (int i = 0; i < 15; ++i) change();
            proxy.partition(false);
        } else if (round % 3 == 2) {
            // A short partition on the same session: the server replays what the watches missed.
            proxy.partition(true);
            for (int i = 0; i < 15; ++i) change();
            proxy.partition(false);
        }
    }
    std::map<std::string, std::string> expected, cached;
    bool converged = eventually([&] {
        if (!c.is_connected() || !cache.initialized()) return false;
        expected = server_tree(writer, path);
        cached = cache_tree(cache, path);
        return cached == expected;
    }, 30s);
    // What a failure needs to be understood (CI shows this test's output, not a debugger).
    INFO("connected: " << c.is_connected() << ", initialized: " << cache.initialized() << ", sessions: "
                       << c.session_count() << "; " << tree_difference(expected, cached));
    REQUIRE(converged);
    CHECK(cache.size() == expected.size());
    for (auto& [p, data] : expected) {
        auto n = cache.get(p);
        REQUIRE(n);
        CHECK(n->stat.mzxid == writer.exists(p).stat.mzxid);
    }
}

TEST_CASE("tree cache: a subtree too large to watch from one client is said so, and nothing crashes", "[tree_cache]") {
    // libzookeeper_mt sends every watched path in one request after a reconnection; zkr refuses a
    // watch that would take that request past max_request_size (too_many_watches), at once, on
    // the calling thread. A cache over more than fits must not claim it holds the tree, and its
    // thousands of refusals must not recurse (a stack overflow at 30,000 nodes, found by the
    // benchmark).
    std::string path = unique_path("cache-too-many");
    zkr::client writer(test_options(test_connect_string()));
    writer.create_parents(path);
    std::vector<std::future<zkr::create_result>> made;
    for (int i = 0; i < 4000; ++i)
        made.push_back(writer.async_create(path + "/n" + std::to_string(i), "d", zkr::create_mode::persistent, asio::use_future));
    for (auto& f : made) get_within(f, 30s);
    auto o = test_options(test_connect_string());
    o.max_request_size = 4096;
    zkr::client c(o);
    zkr::tree_cache cache(c, path);
    cache.start();
    CHECK_FALSE(cache.wait_initialized(3s));
    CHECK(cache.size() < 4001);
    CHECK(c.is_connected());
}
