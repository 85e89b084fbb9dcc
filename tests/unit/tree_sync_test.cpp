// tree_sync (the tree cache's machine) against a model server: random changes to the subtree
// while the machine reads it, with faults injected — replies lost to connection trouble, the
// session expiring with reads in flight and events undelivered, the path's own node deleted and
// made again. After every run the machine must hold exactly the server's tree (paths, data,
// czxid, mzxid), and its events, replayed on an empty map, must build that same tree.
#include "cache/tree_sync.hpp"

#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <deque>
#include <map>
#include <random>
#include <set>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace tree_sync_test {

using zkr::detail::cache_read;
using zkr::detail::tree_sync;

namespace {

struct model_node {
    std::string data;
    zkr::stat stat;
    std::set<std::string> children;
};

// One ZooKeeper server and one session's connection to it: requests answered in order, watch
// events queued on the same channel as replies (the order a session sees them in).
class model_server {
public:
    explicit model_server(std::uint64_t seed) : rng_(seed) {
        nodes_["/"] = {};
    }

    std::int64_t zxid() { return ++zxid_; }

    bool exists(const std::string& p) const { return nodes_.count(p) > 0; }

    void create(const std::string& p, const std::string& data) {
        auto z = zxid();
        model_node n;
        n.data = data;
        n.stat.czxid = n.stat.mzxid = n.stat.pzxid = z;
        nodes_[p] = n;
        auto parent = zkr::parent_path(p);
        auto& pn = nodes_.at(parent);
        pn.children.insert(std::string(zkr::node_name(p)));
        pn.stat.pzxid = z;
        ++pn.stat.cversion;
        pn.stat.num_children = static_cast<int>(pn.children.size());
        fire_data(p, zkr::event_type::created);
        fire_child(parent, zkr::event_type::child);
    }
    void set(const std::string& p, const std::string& data) {
        auto& n = nodes_.at(p);
        n.data = data;
        n.stat.mzxid = zxid();
        ++n.stat.version;
        fire_data(p, zkr::event_type::changed);
    }
    void remove(const std::string& p) {
        auto parent = zkr::parent_path(p);
        nodes_.erase(p);
        auto z = zxid();
        auto& pn = nodes_.at(parent);
        pn.children.erase(std::string(zkr::node_name(p)));
        pn.stat.pzxid = z;
        ++pn.stat.cversion;
        pn.stat.num_children = static_cast<int>(pn.children.size());
        fire_data(p, zkr::event_type::deleted);
        fire_child(p, zkr::event_type::deleted);
        fire_child(parent, zkr::event_type::child);
    }

    // A random change somewhere under `root` (the root itself included), keeping depth <= 3.
    void random_change(const std::string& root) {
        std::vector<std::string> under;
        for (auto& [p, n] : nodes_)
            if (p == root || p.rfind(root + "/", 0) == 0) under.push_back(p);
        std::uniform_int_distribution<int> pick(0, 99);
        int what = pick(rng_);
        if (under.empty()) {
            create(root, "root" + std::to_string(zxid_));
            return;
        }
        auto& p = under[std::uniform_int_distribution<std::size_t>(0, under.size() - 1)(rng_)];
        int depth = static_cast<int>(std::count(p.begin() + root.size(), p.end(), '/'));
        if (what < 40 && depth < 3) {
            create(zkr::join_path(p, "n" + std::to_string(zxid_)), "d" + std::to_string(zxid_));
        } else if (what < 70) {
            set(p, "d" + std::to_string(zxid_));
        } else if (nodes_.at(p).children.empty()) {
            if (p != root || what < 80) remove(p);  // the root goes now and then too
        } else {
            // Delete a leaf below and make it again at once with the same data: version 0 both times.
            std::string leaf = p;
            while (!nodes_.at(leaf).children.empty()) leaf = zkr::join_path(leaf, *nodes_.at(leaf).children.begin());
            std::string data = nodes_.at(leaf).data;
            remove(leaf);
            create(leaf, data);
        }
    }

    struct message {
        bool is_event = false;
        cache_read read;  // the request answered, or the read whose watch fired
        zkr::event_type type = zkr::event_type::changed;
        zkr::error_code error;
        std::string data;
        zkr::stat stat;
        std::vector<std::string> children;
        bool exists = false;
    };

    // The server takes a request: its reply is queued, and its watch registered if it succeeds.
    void request(const cache_read& r, bool lose_reply) {
        message m;
        m.read = r;
        if (lose_reply) {
            m.error = make_error_code(zkr::errc::connection_loss);  // no watch: the C client registers it with the reply
            channel_.push_back(m);
            return;
        }
        auto it = nodes_.find(r.path);
        switch (r.what) {
            case cache_read::kind::data:
                if (it == nodes_.end()) m.error = make_error_code(zkr::errc::no_node);
                else {
                    m.data = it->second.data;
                    m.stat = it->second.stat;
                    data_watches_.emplace(r.path, r);
                }
                break;
            case cache_read::kind::children:
                if (it == nodes_.end()) m.error = make_error_code(zkr::errc::no_node);
                else {
                    m.children.assign(it->second.children.begin(), it->second.children.end());
                    m.stat = it->second.stat;
                    child_watches_.emplace(r.path, r);
                }
                break;
            case cache_read::kind::exists:
                m.exists = it != nodes_.end();
                data_watches_.emplace(r.path, r);
                break;
        }
        channel_.push_back(m);
    }

    // The session expires: its watches go, and what was on its way is lost.
    std::vector<message> expire() {
        data_watches_.clear();
        child_watches_.clear();
        std::vector<message> lost;
        for (auto& m : channel_)
            if (!m.is_event) {
                m.error = make_error_code(zkr::errc::session_expired);
                lost.push_back(m);
            }
        channel_.clear();
        return lost;
    }

    std::deque<message>& channel() { return channel_; }

    // The subtree at `root` as (path -> node), `max_depth` deep.
    std::map<std::string, model_node> subtree(const std::string& root, int max_depth) const {
        std::map<std::string, model_node> out;
        for (auto& [p, n] : nodes_) {
            if (p != root && p.rfind(root + "/", 0) != 0) continue;
            int depth = static_cast<int>(std::count(p.begin() + root.size(), p.end(), '/'));
            if (max_depth >= 0 && depth > max_depth) continue;
            out[p] = n;
        }
        return out;
    }

    std::mt19937_64& rng() { return rng_; }

private:
    void fire(std::multimap<std::string, cache_read>& table, const std::string& p, zkr::event_type type) {
        auto range = table.equal_range(p);
        for (auto it = range.first; it != range.second; ++it) {
            message m;
            m.is_event = true;
            m.read = it->second;
            m.type = type;
            channel_.push_back(m);
        }
        table.erase(range.first, range.second);
    }
    void fire_data(const std::string& p, zkr::event_type type) { fire(data_watches_, p, type); }
    void fire_child(const std::string& p, zkr::event_type type) { fire(child_watches_, p, type); }

    std::mt19937_64 rng_;
    std::int64_t zxid_ = 0;
    std::map<std::string, model_node> nodes_;
    std::multimap<std::string, cache_read> data_watches_, child_watches_;
    std::deque<message> channel_;
};

void deliver(tree_sync& sync, const model_server::message& m) {
    if (m.is_event) return sync.watch_fired(m.read, m.type);
    switch (m.read.what) {
        case cache_read::kind::data: return sync.data_read(m.read, m.error, m.data, m.stat);
        case cache_read::kind::children: return sync.children_read(m.read, m.error, m.children, m.stat);
        case cache_read::kind::exists: return sync.exists_read(m.read, m.error, m.exists);
    }
}

// What a listener builds from the events alone.
struct replayed {
    std::map<std::string, std::pair<std::string, zkr::stat>> nodes;
    int initialized = 0;
    std::vector<std::string> problems;

    void apply(const std::vector<zkr::cache_event>& events) {
        for (auto& e : events) {
            switch (e.type) {
                case zkr::cache_event_type::created:
                    if (nodes.count(e.path)) problems.push_back("created twice: " + e.path);
                    nodes[e.path] = {e.data, e.stat};
                    break;
                case zkr::cache_event_type::changed:
                    if (!nodes.count(e.path)) problems.push_back("changed before created: " + e.path);
                    else if (e.stat.mzxid <= nodes[e.path].second.mzxid) problems.push_back("changed to nothing newer: " + e.path);
                    nodes[e.path] = {e.data, e.stat};
                    break;
                case zkr::cache_event_type::deleted:
                    if (!nodes.erase(e.path)) problems.push_back("deleted before created: " + e.path);
                    for (auto& [p, n] : nodes)
                        if (p.rfind(e.path + "/", 0) == 0) problems.push_back("deleted before its child: " + e.path);
                    break;
                case zkr::cache_event_type::initialized: ++initialized; break;
            }
        }
    }
};

struct fault_plan {
    int lose_reply_percent = 0;  // a request's reply lost to connection trouble (then a reconnection)
    int expire_percent = 0;      // per step: the session expires (then a new one)
    int change_percent = 30;     // per step: a change on the server
};

// Runs the machine against the model for `steps`, then lets it settle with no more changes or
// faults; checks it against the server.
void run(std::uint64_t seed, int max_depth, std::size_t window, fault_plan plan, int steps = 400) {
    INFO("seed " << seed << " max_depth " << max_depth << " window " << window);
    const std::string root = "/cache";
    model_server server(seed);
    auto& rng = server.rng();
    std::uniform_int_distribution<int> percent(0, 99);
    // A tree to start from (sometimes none: the cache waits for its path).
    if (seed % 4 != 0) {
        server.create(root, "root");
        for (int i = 0; i < 20; ++i) server.random_change(root);
    }
    server.channel().clear();  // nobody watched yet

    tree_sync sync(root, max_depth, window);
    replayed seen;
    int sessions = 1;
    sync.new_session();
    std::size_t most_in_flight = 0;
    auto pump = [&](bool faults) {
        for (auto& r : sync.next_reads()) server.request(r, faults && percent(rng) < plan.lose_reply_percent);
        most_in_flight = std::max(most_in_flight, sync.in_flight());
        seen.apply(sync.take_events());
    };
    bool reconnect_due = false;
    for (int step = 0; step < steps; ++step) {
        pump(true);
        int roll = percent(rng);
        if (roll < plan.change_percent) server.random_change(root);
        else if (roll < plan.change_percent + plan.expire_percent) {
            for (auto& m : server.expire()) deliver(sync, m);  // replies fail with session_expired
            sync.session_lost();
            seen.apply(sync.take_events());
            for (int i = 0; i < 3; ++i) server.random_change(root);  // changes nobody sees
            server.channel().clear();
            sync.new_session();
            ++sessions;
            reconnect_due = false;
        } else if (!server.channel().empty()) {
            auto m = server.channel().front();
            server.channel().pop_front();
            if (!m.is_event && m.error == zkr::errc::connection_loss) reconnect_due = true;
            deliver(sync, m);
        } else if (reconnect_due) {
            sync.retry_failed();
            reconnect_due = false;
        }
        seen.apply(sync.take_events());
    }
    // Settle: the connection is back, nothing changes any more.
    for (int guard = 0; guard < 100000; ++guard) {
        sync.retry_failed();
        pump(false);
        if (server.channel().empty() && sync.queued() == 0 && sync.in_flight() == 0) break;
        if (!server.channel().empty()) {
            auto m = server.channel().front();
            server.channel().pop_front();
            deliver(sync, m);
        }
    }
    seen.apply(sync.take_events());

    REQUIRE(sync.queued() == 0);
    REQUIRE(sync.in_flight() == 0);
    CHECK(most_in_flight <= window);
    CHECK(sync.initialized());
    CHECK(seen.initialized >= 1);
    CHECK(seen.initialized <= sessions);
    CHECK(seen.problems.empty());
    for (auto& p : seen.problems) UNSCOPED_INFO(p);

    auto expected = server.subtree(root, max_depth);
    std::vector<std::string> expected_paths;
    for (auto& [p, n] : expected) expected_paths.push_back(p);
    CHECK(sync.paths() == expected_paths);
    std::vector<std::string> replayed_paths;
    for (auto& [p, n] : seen.nodes) replayed_paths.push_back(p);
    CHECK(replayed_paths == expected_paths);
    CHECK(sync.size() == expected.size());
    for (auto& [p, n] : expected) {
        auto cached = sync.get(p);
        REQUIRE(cached);
        CHECK(cached->data == n.data);
        CHECK(cached->stat.czxid == n.stat.czxid);
        CHECK(cached->stat.mzxid == n.stat.mzxid);
        CHECK(seen.nodes[p].first == n.data);
        CHECK(seen.nodes[p].second.mzxid == n.stat.mzxid);
        if (max_depth < 0 || static_cast<int>(std::count(p.begin() + root.size(), p.end(), '/')) < max_depth) {
            std::vector<std::string> kids(n.children.begin(), n.children.end());
            CHECK(sync.children(p) == kids);
        }
    }
}

}  // namespace

TEST_CASE("tree_sync: converges on the server's tree under random changes", "[tree_sync]") {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) run(seed, -1, 64, {});
}

TEST_CASE("tree_sync: converges with replies lost to connection trouble", "[tree_sync]") {
    for (std::uint64_t seed = 100; seed <= 140; ++seed) run(seed, -1, 8, {.lose_reply_percent = 20});
}

TEST_CASE("tree_sync: converges across session expiries, resyncing with deletions reported", "[tree_sync]") {
    for (std::uint64_t seed = 200; seed <= 240; ++seed) run(seed, -1, 4, {.lose_reply_percent = 10, .expire_percent = 3});
}

TEST_CASE("tree_sync: max_depth 0 and 1 cache only that deep", "[tree_sync]") {
    for (std::uint64_t seed = 300; seed <= 320; ++seed) {
        run(seed, 0, 16, {.lose_reply_percent = 10, .expire_percent = 2});
        run(seed, 1, 16, {.lose_reply_percent = 10, .expire_percent = 2});
    }
}

TEST_CASE("tree_sync: a window of one read still walks the whole tree", "[tree_sync]") {
    for (std::uint64_t seed = 400; seed <= 410; ++seed) run(seed, -1, 1, {.lose_reply_percent = 10, .expire_percent = 2});
}

TEST_CASE("tree_sync: a node deleted and made again with the same version is reported changed", "[tree_sync]") {
    // The session is lost; meanwhile the node is deleted and made again (version 0 both times)
    // with new data. The resync must report it (Curator's CuratorCache compares versions: silent).
    using kind = cache_read::kind;
    tree_sync sync("/c", 0, 8);
    sync.new_session();
    auto reads = sync.next_reads();
    REQUIRE(reads.size() == 1);
    REQUIRE(reads[0].what == kind::exists);
    sync.exists_read(reads[0], {}, true);
    reads = sync.next_reads();
    REQUIRE(reads.size() == 1);  // depth 0: the data, no listing
    REQUIRE(reads[0].what == kind::data);
    zkr::stat old_stat;
    old_stat.czxid = old_stat.mzxid = 10;
    sync.data_read(reads[0], {}, "old", old_stat);
    auto events = sync.take_events();
    REQUIRE(events.size() == 2);
    CHECK(events[0].type == zkr::cache_event_type::created);
    CHECK(events[1].type == zkr::cache_event_type::initialized);

    sync.session_lost();
    CHECK_FALSE(sync.initialized());
    sync.new_session();
    reads = sync.next_reads();
    REQUIRE(reads.size() == 1);
    REQUIRE(reads[0].what == kind::data);
    zkr::stat new_stat;  // version 0 again, like the old one
    new_stat.czxid = new_stat.mzxid = 20;
    sync.data_read(reads[0], {}, "new", new_stat);
    events = sync.take_events();
    REQUIRE(events.size() == 2);
    CHECK(events[0].type == zkr::cache_event_type::changed);
    CHECK(events[0].data == "new");
    CHECK(events[0].stat.czxid == 20);
    CHECK(events[1].type == zkr::cache_event_type::initialized);
    CHECK(sync.get("/c")->data == "new");
}

TEST_CASE("tree_sync: a reply or watch event of an earlier session or a dropped node changes nothing", "[tree_sync]") {
    using kind = cache_read::kind;
    tree_sync sync("/c", 1, 8);
    sync.new_session();
    auto exists = sync.next_reads();
    sync.exists_read(exists[0], {}, true);
    auto reads = sync.next_reads();  // data and children of /c
    REQUIRE(reads.size() == 2);
    zkr::stat s;
    s.czxid = s.mzxid = 5;
    sync.data_read(reads[0], {}, "root", s);
    sync.children_read(reads[1], {}, {"a"}, s);
    auto child = sync.next_reads();  // data of /c/a (depth 1: no listing)
    REQUIRE(child.size() == 1);
    REQUIRE(child[0].what == kind::data);
    zkr::stat cs;
    cs.czxid = cs.mzxid = 6;
    sync.data_read(child[0], {}, "a1", cs);
    REQUIRE(sync.get("/c/a"));
    (void)sync.take_events();

    // A new session; the old data read's watch fires late, and an old reply arrives: ignored.
    sync.session_lost();
    sync.new_session();
    sync.watch_fired(child[0], zkr::event_type::deleted);
    CHECK(sync.get("/c/a"));
    zkr::stat late;
    late.czxid = 6;
    late.mzxid = 99;
    sync.data_read(child[0], {}, "late", late);
    CHECK(sync.get("/c/a")->data == "a1");

    // The new walk's listing no longer shows "a": dropped, reported deleted; its reads' late
    // answers change nothing.
    auto walk = sync.next_reads();
    REQUIRE(walk.size() == 2);
    sync.data_read(walk[0], {}, "root", s);
    sync.children_read(walk[1], {}, {}, s);
    auto events = sync.take_events();
    REQUIRE(events.size() == 2);
    CHECK(events[0].type == zkr::cache_event_type::deleted);
    CHECK(events[0].path == "/c/a");
    CHECK(events[1].type == zkr::cache_event_type::initialized);
    CHECK_FALSE(sync.get("/c/a"));
    CHECK(sync.children("/c").empty());
}

TEST_CASE("tree_sync: initialized waits for reads that failed and were sent again", "[tree_sync]") {
    using kind = cache_read::kind;
    tree_sync sync("/c", 1, 8);
    sync.new_session();
    auto exists = sync.next_reads();
    sync.exists_read(exists[0], {}, true);
    auto reads = sync.next_reads();
    REQUIRE(reads.size() == 2);
    zkr::stat s;
    s.czxid = s.mzxid = 5;
    sync.data_read(reads[0], {}, "root", s);
    // The listing's reply is lost to connection trouble: the walk is not over.
    sync.children_read(reads[1], make_error_code(zkr::errc::connection_loss), {}, {});
    CHECK(sync.has_failed_reads());
    CHECK_FALSE(sync.initialized());
    CHECK(sync.next_reads().empty());  // nothing until the connection is back
    sync.retry_failed();
    auto again = sync.next_reads();
    REQUIRE(again.size() == 1);
    CHECK(again[0].what == kind::children);
    sync.children_read(again[0], {}, {"a"}, s);
    CHECK_FALSE(sync.initialized());  // a's data is still due
    auto child = sync.next_reads();
    REQUIRE(child.size() == 1);
    sync.data_read(child[0], {}, "a", s);
    CHECK(sync.initialized());
    auto events = sync.take_events();
    REQUIRE(events.size() == 3);
    CHECK(events[2].type == zkr::cache_event_type::initialized);
}

TEST_CASE("tree_sync: a read that fails for good keeps the walk from ending, until a new session", "[tree_sync]") {
    tree_sync sync("/c", 0, 8);
    sync.new_session();
    auto exists = sync.next_reads();
    sync.exists_read(exists[0], {}, true);
    auto reads = sync.next_reads();
    REQUIRE(reads.size() == 1);
    sync.data_read(reads[0], make_error_code(zkr::errc::too_many_watches), {}, {});
    CHECK_FALSE(sync.initialized());
    CHECK(sync.unreadable() == 1);
    CHECK_FALSE(sync.has_failed_reads());  // not retried on this session
    CHECK(sync.next_reads().empty());
    sync.session_lost();
    sync.new_session();
    reads = sync.next_reads();
    REQUIRE(reads.size() == 1);
    zkr::stat s;
    s.czxid = s.mzxid = 3;
    sync.data_read(reads[0], {}, "x", s);
    CHECK(sync.initialized());
    CHECK(sync.unreadable() == 0);
}

}  // namespace tree_sync_test
