// zkr::atomic_long, zkr::atomic_int and zkr::id_generator against real ZooKeeper servers, beside
// Curator's DistributedAtomicLong, with replies lost and sessions closed between request and reply.
#include "support/curator_driver.hpp"
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/atomic.hpp"
#include "zkr/client.hpp"
#include "zkr/count_down_latch.hpp"
#include "zkr/retry.hpp"
#include "zkr/id_generator.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"
#include "zkr/shared_count.hpp"
#include "zkr/testkit.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <future>
#include <limits>
#include <set>
#include <thread>

using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::first_server;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {
std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int c : b) s.push_back(static_cast<char>(c));
    return s;
}
}  // namespace

TEST_CASE("atomic long: each operation's result and the node's bytes (Curator's layout)", "[atomic]") {
    zkr::client c(test_options(test_connect_string()));
    std::string path = unique_path("atomic") + "/orders";
    zkr::atomic_long orders(c, path);
    auto r = orders.get();
    CHECK(r.succeeded);
    CHECK(r.pre == 0);
    CHECK(r.post == 0);
    CHECK_FALSE(c.exists(path).exists);  // a read makes nothing

    r = orders.increment();
    CHECK((r.succeeded && r.pre == 0 && r.post == 1 && r.attempts == 1));
    CHECK(c.get_data(path).data == bytes({0, 0, 0, 0, 0, 0, 0, 1}));
    r = orders.add(5);
    CHECK((r.succeeded && r.pre == 1 && r.post == 6));
    r = orders.decrement();
    CHECK((r.succeeded && r.pre == 6 && r.post == 5));
    r = orders.subtract(7);
    CHECK((r.succeeded && r.pre == 5 && r.post == -2));
    CHECK(c.get_data(path).data == bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}));
    r = orders.compare_and_set(7, 8);
    CHECK_FALSE(r.succeeded);
    CHECK(r.pre == -2);
    r = orders.compare_and_set(-2, 8);
    CHECK((r.succeeded && r.pre == -2 && r.post == 8));
    orders.force_set(0);
    CHECK(orders.get().post == 0);
    orders.force_set(std::numeric_limits<std::int64_t>::max());
    r = orders.increment();  // wraps, as Java's long does
    CHECK(r.post == std::numeric_limits<std::int64_t>::min());

    // Another object sees the same counter; its cache is refreshed by a lost race.
    zkr::atomic_long other(c, path);
    other.force_set(100);
    r = orders.increment();
    CHECK((r.succeeded && r.pre == 100 && r.post == 101 && r.attempts == 2));

    // atomic_int: 4 bytes, the layout shared_count reads.
    std::string ipath = unique_path("atomic-int");
    zkr::atomic_int i(c, ipath);
    CHECK(i.add(41).post == 41);
    CHECK(i.increment().post == 42);
    CHECK(c.get_data(ipath).data == bytes({0, 0, 0, 42}));
    zkr::shared_count count(c, ipath, 0);
    CHECK(count.get() == 42);
    CHECK(i.compare_and_set(42, -1).succeeded);
    CHECK(eventually([&] { return count.get() == -1; }));
}

TEST_CASE("atomic long: 8 writers x 50 increments, every one applied once and seen once", "[atomic]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-contended");
    std::mutex m;
    std::vector<std::int64_t> posts;
    int failed = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            zkr::client c(test_options(connect));
            // Giving up under contention is not the subject here (its own test below): 1000 tries.
            zkr::atomic_long counter(c, path, zkr::atomic_options{.max_attempts = 1000});
            for (int n = 0; n < 50; ++n) {
                auto r = counter.increment();
                std::lock_guard lock(m);
                if (!r.succeeded || r.post != r.pre + 1) ++failed;
                posts.push_back(r.post);
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(failed == 0);
    std::set<std::int64_t> distinct(posts.begin(), posts.end());
    CHECK(distinct.size() == 400);  // no two increments saw the same value
    CHECK(*distinct.begin() == 1);
    CHECK(*distinct.rbegin() == 400);
    zkr::client c(test_options(connect));
    CHECK(zkr::atomic_long(c, path).get().post == 400);
}

TEST_CASE("atomic long: Curator's DistributedAtomicLong and zkr's count one counter together", "[atomic][interop]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-interop") + "/n";
    zkr::client c(test_options(connect));
    zkr::atomic_long ours(c, path);
    zkr::test::curator_session curator(connect);
    curator.along_new("n", path);
    CHECK(ours.add(10).post == 10);
    CHECK(curator.along_get("n") == std::tuple<bool, std::int64_t, std::int64_t>{true, 10, 10});
    CHECK(curator.along_add("n", 5) == std::tuple<bool, std::int64_t, std::int64_t>{true, 10, 15});
    CHECK(ours.get().post == 15);
    // Both at once.
    auto tag = curator.along_increments_send("n", 200);
    int succeeded = 0;
    for (int i = 0; i < 200; ++i) succeeded += ours.increment().succeeded ? 1 : 0;
    CHECK(curator.ok(tag, 60s).args.at(0) == "200");
    CHECK(succeeded == 200);
    CHECK(ours.get().post == 415);
    CHECK(std::get<2>(curator.along_get("n")) == 415);
}

TEST_CASE("atomic long: an increment whose reply is lost is applied once, and told what it did", "[atomic]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-lost-reply");
    zkr::testkit::proxy proxy(first_server(connect));
    // The observer reads the server behind the proxy: on an ensemble another could lag.
    zkr::client c(test_options(proxy.address(), 10000ms)), observer(test_options(first_server(connect)));
    zkr::atomic_long counter(c, path);
    REQUIRE(counter.add(41).post == 41);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    auto r = counter.increment();  // applied, reply lost, resent on the same session: fails whole
    CHECK(proxy.replies_lost() == 1);
    CHECK((r.succeeded && r.pre == 41 && r.post == 42));
    CHECK(zkr::atomic_long(observer, path).get().post == 42);
    CHECK(counter.increment().post == 43);  // and the next one is its own
    CHECK(zkr::atomic_long(observer, path).get().post == 43);

    // With another writer between the lost reply and the resend: still once, still its own result.
    proxy.refuse_connections(true);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    auto pending = std::async(std::launch::async, [&] { return counter.add(100); });
    REQUIRE(eventually([&] { return proxy.replies_lost() == 2; }));
    zkr::atomic_long(observer, path).add(1000);
    proxy.refuse_connections(false);
    r = pending.get();
    CHECK((r.succeeded && r.pre == 43 && r.post == 143));
    CHECK(zkr::atomic_long(observer, path).get().post == 1143);
}

TEST_CASE("atomic long: a session lost between a change and its answer — settled when it can be, never applied twice",
          "[atomic]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-expiry");
    zkr::testkit::proxy proxy(first_server(connect));
    // The observer reads the server behind the proxy: on an ensemble another could lag.
    zkr::client c(test_options(proxy.address(), 10000ms)), observer(test_options(first_server(connect)));
    zkr::atomic_long counter(c, path);
    REQUIRE(counter.increment().post == 1);

    SECTION("the change never reached the server: it is applied on the new session") {
        auto old = zkr::testkit::credentials_of(c);
        // The change is seen by the proxy and held back; the session is closed on the server
        // meanwhile, which closes its connection: what was held never reaches the server.
        proxy.set_delay(3s);
        auto pending = std::async(std::launch::async, [&] { return counter.increment(); });
        REQUIRE(eventually([&] { return proxy.requests_seen(zkr::test::zk_op::multi) == 2; }));
        zkr::testkit::close_session(connect, old);
        proxy.drop_connections();
        proxy.set_delay(0s);
        auto r = pending.get();
        CHECK(c.session_id() != old.id);
        CHECK((r.succeeded && r.pre == 1 && r.post == 2));
        CHECK(zkr::atomic_long(observer, path).get().post == 2);
    }
    SECTION("the change was applied and its answer lost with the session: outcome_unknown, applied once") {
        auto old = zkr::testkit::credentials_of(c);
        proxy.refuse_connections(true);
        proxy.lose_next_reply({zkr::test::zk_op::multi});
        auto pending = std::async(std::launch::async, [&] { return counter.increment(); });
        REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
        zkr::testkit::close_session(connect, old);
        proxy.refuse_connections(false);
        try {
            pending.get();
            FAIL("a change lost with its session was reported settled");
        } catch (const zkr::system_error& e) {
            CHECK(e.code() == errc::outcome_unknown);
            CHECK_THAT(e.what(), Catch::Contains(path));
        }
        CHECK(zkr::atomic_long(observer, path).get().post == 2);  // once
        auto r = counter.increment();  // the object goes on, on its new session
        CHECK((r.succeeded && r.pre == 2 && r.post == 3));
    }
    // Nothing but the counter and this object's record (of the current session) under the path.
    auto kids = observer.get_children(path).children;
    REQUIRE(kids.size() == 1);
    CHECK(observer.exists(path + "/" + kids[0]).stat.ephemeral_owner == c.session_id());
}

TEST_CASE("atomic long: bad input and a node that holds no counter are errors naming what was wrong", "[atomic]") {
    zkr::client c(test_options(test_connect_string()));
    CHECK_THROWS_AS(zkr::atomic_long(c, "no-slash"), std::invalid_argument);
    CHECK_THROWS_WITH(zkr::atomic_long(c, "/a", zkr::atomic_options{.max_attempts = 0}), Catch::Contains("max_attempts"));
    CHECK_THROWS_WITH(zkr::id_generator(c, "/ids", 0), Catch::Contains("block_size"));
    std::string path = unique_path("atomic-bad");
    c.create_parents(path);
    c.set_data(path, "abc");
    zkr::atomic_long l(c, path);
    try {
        l.increment();
        FAIL("incremented 3 bytes");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::bad_arguments);
        CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("3 bytes") && Catch::Contains("8-byte"));
    }
    c.set_data(path, bytes({0, 0, 0, 0, 0, 0, 0, 9}));
    zkr::atomic_int i(c, path);
    CHECK_THROWS_WITH(i.get(), Catch::Contains("8 bytes") && Catch::Contains("4-byte"));
    CHECK(c.get_data(path).data == bytes({0, 0, 0, 0, 0, 0, 0, 9}));  // untouched
    CHECK(l.get().post == 9);
}

TEST_CASE("atomic long: contention past max_attempts is reported, not applied", "[atomic]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-give-up");
    zkr::client c(test_options(connect)), other(test_options(connect));
    zkr::atomic_long counter(c, path, zkr::atomic_options{.max_attempts = 1});
    REQUIRE(counter.increment().post == 1);
    zkr::atomic_long(other, path).force_set(50);  // counter's cache is stale now
    auto r = counter.increment();
    CHECK_FALSE(r.succeeded);
    CHECK(r.attempts == 1);
    CHECK(r.pre == 50);  // what it read after losing
    CHECK(r.post == 50);
    CHECK(zkr::atomic_long(other, path).get().post == 50);
    CHECK(counter.increment().post == 51);
}

TEST_CASE("id generator: unique across generators, increasing within one, blocks reserved once", "[atomic][id_generator]") {
    std::string connect = test_connect_string(), path = unique_path("ids") + "/orders";
    std::mutex m;
    std::vector<std::int64_t> all;
    int out_of_order = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            zkr::client c(test_options(connect));
            zkr::id_generator ids(c, path, 50);
            std::vector<std::int64_t> mine;
            for (int n = 0; n < 300; ++n) mine.push_back(ids.next());
            std::lock_guard lock(m);
            for (std::size_t i = 1; i < mine.size(); ++i) out_of_order += mine[i] <= mine[i - 1] ? 1 : 0;
            all.insert(all.end(), mine.begin(), mine.end());
        });
    }
    for (auto& t : threads) t.join();
    CHECK(out_of_order == 0);
    std::set<std::int64_t> distinct(all.begin(), all.end());
    CHECK(distinct.size() == 1200);
    CHECK(*distinct.begin() >= 1);
    zkr::client c(test_options(connect));
    // 300 ids in blocks of 50: 6 blocks each, nothing reserved twice or left unaccounted.
    CHECK(zkr::atomic_long(c, path).get().post == 4 * 6 * 50);

    // A reservation whose reply is lost is not made twice.
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client pc(test_options(proxy.address(), 10000ms));
    zkr::id_generator ids(pc, path, 10);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    auto first = ids.next();
    CHECK(proxy.replies_lost() == 1);
    CHECK(first == 1201);
    CHECK(ids.reserved() == 9);
    CHECK(zkr::atomic_long(c, path).get().post == 1210);
}

TEST_CASE("atomic long: objects of one client never race each other", "[atomic]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-one-client");
    zkr::client c(test_options(connect));
    // Two attempts are enough when nobody else writes: one with the stale version the other
    // object left, one after reading. Racing each other, the object that just won (its version
    // fresh, one round trip) wins again and again against the one that must read first.
    zkr::atomic_long a(c, path, zkr::atomic_options{.max_attempts = 2}), b(c, path, zkr::atomic_options{.max_attempts = 2});
    std::atomic<int> failed{0};
    auto run = [&](zkr::atomic_long& counter) {
        for (int i = 0; i < 300; ++i) failed += counter.increment().succeeded ? 0 : 1;
    };
    std::thread ta([&] { run(a); }), tb([&] { run(b); });
    ta.join();
    tb.join();
    CHECK(failed == 0);
    CHECK(a.get().post == 600);
}

TEST_CASE("atomic long: force_set whose reply is lost does not undo a change made before its resend", "[atomic]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-force-lost-reply");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address(), 10000ms)), other(test_options(first_server(connect)));
    zkr::atomic_long counter(c, path);
    counter.force_set(7);
    proxy.refuse_connections(true);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    auto pending = std::async(std::launch::async, [&] { counter.force_set(0); });
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    auto r = zkr::atomic_long(other, path).add(5);  // after the set, before its resend
    CHECK((r.succeeded && r.pre == 0 && r.post == 5));
    proxy.refuse_connections(false);
    pending.get();
    CHECK(zkr::atomic_long(other, path).get().post == 5);  // the resend did not set 0 again
}

TEST_CASE("atomic long and count-down latch: a change the retry policy gives up on is outcome_unknown, and counted once",
          "[atomic][count_down_latch]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-gave-up");
    zkr::testkit::proxy proxy(first_server(connect));
    auto options = test_options(proxy.address(), 10000ms);
    options.retry_policy = std::make_shared<zkr::retry::retry_n_times>(0, 10ms);  // never resent
    zkr::client c(options), other(test_options(first_server(connect)));
    zkr::atomic_long counter(c, path);
    REQUIRE(counter.add(10).post == 10);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    try {
        counter.increment();
        FAIL("a change whose answer was lost was reported settled");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::outcome_unknown);
        CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("retry policy"));
    }
    CHECK(eventually([&] { return c.is_connected(); }, 15s));
    CHECK(zkr::atomic_long(other, path).get().post == 11);  // applied once
    auto r = counter.increment();  // a fresh record: the next change is its own
    CHECK((r.succeeded && r.pre == 11 && r.post == 12));

    zkr::count_down_latch latch(c, path + "-latch");
    REQUIRE(latch.try_set_count(3));
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    try {
        latch.count_down();
        FAIL("a count-down whose answer was lost was reported settled");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::outcome_unknown);
    }
    CHECK(eventually([&] { return c.is_connected(); }, 15s));
    CHECK(zkr::count_down_latch(other, path + "-latch").count() == 2);
    latch.remove();
}

TEST_CASE("atomic long: writers of several clients all get their turn (none starves)", "[atomic]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-fair");
    constexpr int writers = 4;
    std::atomic<bool> stop{false};
    std::atomic<int> ready{0};
    std::array<std::atomic<int>, writers> made{};  // read while the writers run
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
        threads.emplace_back([&, w] {
            zkr::client c(test_options(connect));
            zkr::atomic_long counter(c, path);
            counter.get();
            ++ready;
            while (ready < writers) std::this_thread::yield();
            // Each loops without pause: a writer with a fresh version would otherwise win every race.
            while (!stop) made[w] += counter.increment().succeeded ? 1 : 0;
        });
    }
    REQUIRE(eventually([&] { return ready == writers; }));
    // Until every writer has made 5 (or 60 s: then the check below says who starved), not a fixed
    // window that a loaded machine can fill with fewer.
    eventually([&] {
        for (int w = 0; w < writers; ++w)
            if (made[w] < 5) return false;
        return true;
    }, 60s);
    stop = true;
    for (auto& t : threads) t.join();
    INFO("increments per writer: " << made[0].load() << " " << made[1].load() << " " << made[2].load() << " " << made[3].load());
    for (int w = 0; w < writers; ++w) CHECK(made[w] >= 5);
    zkr::client c(test_options(connect));
    CHECK(zkr::atomic_long(c, path).get().post == made[0].load() + made[1].load() + made[2].load() + made[3].load());
}

// Curator's PromotedToLock: a change that lost max_attempts races takes the lock and tries again.
namespace {
// A counter promoted to `lock_path` after 1 lost race, with one change made (its version kept),
// and another client that holds the lock.
struct promoted_counter {
    std::string connect = test_connect_string(), path, lock_path = path + "-lock";
    zkr::client c{test_options(connect)}, other{test_options(connect)};
    zkr::atomic_long counter;
    zkr::mutex holder{other, lock_path};
    promoted_counter(const std::string& name, std::chrono::milliseconds lock_timeout)
        : path(unique_path(name)),
          counter(c, path, zkr::atomic_options{.max_attempts = 1, .promote_to_lock = zkr::promoted_lock{lock_path, lock_timeout, 5}}) {
        REQUIRE(counter.increment().post == 1);
        CHECK(zkr::test::queue_length(other, lock_path) == 0);  // not promoted while nobody races
    }
    // Another client writes without a writer record (as a Curator writer would): the counter's
    // kept version is stale, so its next change loses its first race for sure.
    void write_behind(std::uint8_t value) { other.set_data(path, bytes({0, 0, 0, 0, 0, 0, 0, value})); }
};
}  // namespace

TEST_CASE("atomic long promoted to a lock: a change that lost its races waits for the lock and is applied under it",
          "[atomic][promoted]") {
    promoted_counter t("atomic-promoted", 20s);
    t.write_behind(100);
    t.holder.lock();
    auto change = std::async(std::launch::async, [&] { return t.counter.increment(); });
    // Its one optimistic try lost: it queues for the lock behind the holder, and waits.
    REQUIRE(eventually([&] { return zkr::test::queue_length(t.other, t.lock_path) == 2; }));
    CHECK(zkr::test::holds_throughout([&] { return change.wait_for(0ms) == std::future_status::timeout; }, 300ms));
    t.write_behind(200);  // the holder writes: the waiter reads afresh once it has the lock
    t.holder.unlock();
    auto r = zkr::test::get_within(change, 20s, "the promoted increment");
    CHECK(r.succeeded);
    CHECK(r.pre == 200);
    CHECK(r.post == 201);
    CHECK(r.attempts == 2);  // the lost race, then one under the lock
    CHECK(zkr::atomic_long(t.other, t.path).get().post == 201);
    CHECK(eventually([&] { return zkr::test::queue_length(t.other, t.lock_path) == 0; }));  // released
}

TEST_CASE("atomic long promoted to a lock: the lock not had within lock_timeout gives the change up, its node gone",
          "[atomic][promoted]") {
    promoted_counter t("atomic-promoted-timeout", 300ms);
    t.write_behind(100);
    t.holder.lock();
    auto r = t.counter.increment();
    CHECK_FALSE(r.succeeded);
    CHECK(r.attempts == 1);
    CHECK(r.post == 100);
    CHECK(zkr::atomic_long(t.other, t.path).get().post == 100);  // not applied
    CHECK(eventually([&] { return zkr::test::queue_length(t.other, t.lock_path) == 1; }));  // the holder's node alone
    t.holder.unlock();
}

TEST_CASE("atomic long promoted to a lock: a Curator InterProcessMutex holding the lock path makes an async change wait",
          "[atomic][promoted][interop][async]") {
    // The promoted lock is Curator's layout: Curator writers promoted to the same path queue on it
    // with zkr's. Here Curator holds it; zkr's async change, its one optimistic try lost, waits.
    promoted_counter t("atomic-promoted-curator", 20s);
    t.write_behind(100);
    zkr::test::curator_session curator(t.connect);
    curator.mutex_create("m", t.lock_path);
    REQUIRE(curator.mutex_acquire("m", 10s));
    auto change = t.counter.async_increment(boost::asio::use_future);
    REQUIRE(eventually([&] { return zkr::test::queue_length(t.other, t.lock_path) == 2; }));
    CHECK(zkr::test::holds_throughout([&] { return change.wait_for(0ms) == std::future_status::timeout; }, 300ms));
    t.write_behind(200);
    curator.mutex_release("m");
    auto r = zkr::test::get_within(change, 20s, "the promoted increment");
    CHECK(r.succeeded);
    CHECK(r.pre == 200);
    CHECK(r.post == 201);
    CHECK(r.attempts == 2);
    CHECK(eventually([&] { return zkr::test::queue_length(t.other, t.lock_path) == 0; }));  // released
}

TEST_CASE("atomic long promoted to a lock: the lock lost with its session mid-change, the change is applied once and never over the next holder's write",
          "[atomic][promoted]") {
    // The counter's client reaches the server through a proxy; the lock's other client does not.
    std::string connect = test_connect_string(), path = unique_path("atomic-promoted-lost"), lock_path = path + "-lock";
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address(), 10000ms)), other(test_options(first_server(connect)));
    zkr::atomic_long counter(c, path, zkr::atomic_options{.max_attempts = 1, .promote_to_lock = zkr::promoted_lock{lock_path, 20s, 5}});
    REQUIRE(counter.increment().post == 1);
    zkr::mutex holder(other, lock_path);
    other.set_data(path, bytes({0, 0, 0, 0, 0, 0, 0, 100}));  // c's next change loses its race for sure
    holder.lock();
    auto old = zkr::testkit::credentials_of(c);
    auto change = std::async(std::launch::async, [&] { return counter.increment(); });
    REQUIRE(eventually([&] { return zkr::test::queue_length(other, lock_path) == 2; }));  // queued for the lock
    // Under the lock, its write is applied and the answer lost; it cannot reconnect, and its
    // session (its lock node with it) is closed on the server.
    proxy.refuse_connections(true);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    holder.unlock();
    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }, 20s));
    zkr::testkit::close_session(connect, old);
    // The next holder takes the lock the change lost, and writes.
    REQUIRE(holder.try_lock_for(10s));
    CHECK(zkr::atomic_long(other, path).get().post == 101);  // the change: applied once
    other.set_data(path, bytes({0, 0, 0, 0, 0, 0, 0, 200}));
    proxy.refuse_connections(false);
    try {
        auto r = zkr::test::get_within(change, 30s, "the promoted increment");
        FAIL("a change lost with its session was reported settled: pre " << r.pre << ", post " << r.post);
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::outcome_unknown);
    }
    CHECK(zkr::atomic_long(other, path).get().post == 200);  // never applied again over the holder's write
    CHECK(c.session_id() != old.id);
    holder.unlock();
    CHECK(eventually([&] { return zkr::test::queue_length(other, lock_path) == 0; }));  // nothing of the lost lock left
    auto r = counter.increment();  // the object goes on, on its new session
    CHECK((r.succeeded && r.pre == 200 && r.post == 201));
}

TEST_CASE("atomic long promoted to a lock: a lock path that is the counter's, under it or broken is refused, naming it",
          "[atomic][promoted]") {
    zkr::client c(test_options(test_connect_string()));
    auto with_lock = [](std::string lock, std::chrono::milliseconds timeout = 1s, int attempts = 1) {
        return zkr::atomic_options{.max_attempts = 1, .promote_to_lock = zkr::promoted_lock{std::move(lock), timeout, attempts}};
    };
    CHECK_THROWS_WITH(zkr::atomic_long(c, "/counters/a", with_lock("/counters/a")), Catch::Contains("lock_path") && Catch::Contains("under it"));
    CHECK_THROWS_WITH(zkr::atomic_long(c, "/counters/a", with_lock("/counters/a/lock")), Catch::Contains("lock_path"));
    CHECK_THROWS_WITH(zkr::atomic_long(c, "/counters/a", with_lock("no-slash")), Catch::Contains("lock_path"));
    CHECK_THROWS_WITH(zkr::atomic_long(c, "/counters/a", with_lock("/locks/a", -1ms)), Catch::Contains("lock_timeout"));
    CHECK_THROWS_WITH(zkr::atomic_long(c, "/counters/a", with_lock("/locks/a", 1s, 0)), Catch::Contains("promoted_lock::max_attempts"));
    CHECK_NOTHROW(zkr::atomic_long(c, "/counters/a", with_lock("/counters/ab")));  // a sibling sharing a prefix is fine
}

TEST_CASE("atomic long and int: the async forms give the blocking calls' results, on the client's executor", "[atomic][async]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-async");
    zkr::client c(test_options(connect));
    zkr::atomic_long counter(c, path);
    auto r = counter.async_increment(boost::asio::use_future).get();
    CHECK((r.succeeded && r.pre == 0 && r.post == 1 && r.attempts == 1));
    CHECK(counter.async_add(41, boost::asio::use_future).get().post == 42);
    CHECK(counter.async_subtract(2, boost::asio::use_future).get().post == 40);
    CHECK(counter.async_decrement(boost::asio::use_future).get().post == 39);
    auto cas = counter.async_compare_and_set(7, 8, boost::asio::use_future).get();
    CHECK((!cas.succeeded && cas.pre == 39 && cas.post == 39));
    CHECK(counter.async_compare_and_set(39, 100, boost::asio::use_future).get().succeeded);
    counter.async_force_set(-5, boost::asio::use_future).get();
    CHECK(counter.async_get(boost::asio::use_future).get().post == -5);
    CHECK(counter.get().post == -5);  // the blocking face reads what the async one wrote

    // A callback runs on the client's executor, never on the C client's threads.
    auto executor = counter.get_executor();
    std::promise<bool> on_executor;
    counter.async_increment([&](zkr::error_code ec, zkr::atomic_result<std::int64_t> res) {
        auto* io = executor.target<boost::asio::io_context::executor_type>();
        on_executor.set_value(!ec && res.post == -4 && io && io->running_in_this_thread());
    });
    auto on = on_executor.get_future();
    REQUIRE(on.wait_for(10s) == std::future_status::ready);
    CHECK(on.get());

    // atomic_int: 32-bit values, wrapping as Java's int does.
    zkr::atomic_int small(c, path + "-int");
    small.async_force_set(std::numeric_limits<std::int32_t>::max(), boost::asio::use_future).get();
    auto wrapped = small.async_increment(boost::asio::use_future).get();
    CHECK((wrapped.pre == std::numeric_limits<std::int32_t>::max() && wrapped.post == std::numeric_limits<std::int32_t>::min()));
    CHECK(small.get().post == std::numeric_limits<std::int32_t>::min());

    // A node that holds no counter: the same error as the blocking call's.
    zkr::atomic_long(c, path + "-bad").force_set(1);
    c.set_data(path + "-bad", "abc");
    auto bad = zkr::atomic_long(c, path + "-bad").async_increment(boost::asio::use_future);
    try {
        bad.get();
        FAIL("an increment of a node holding 3 bytes succeeded");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::bad_arguments);
    }
}

TEST_CASE("atomic long: async increments started at once are applied once each, in order, the object gone before they end",
          "[atomic][async]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-async-many");
    zkr::client c(test_options(connect)), other(test_options(connect));
    std::vector<std::future<zkr::atomic_result<std::int64_t>>> results;
    {
        zkr::atomic_long a(c, path), b(c, path);
        for (int i = 0; i < 100; ++i) results.push_back((i % 2 ? a : b).async_increment(boost::asio::use_future));
    }  // both objects gone: their operations go on
    zkr::atomic_long rival(other, path);
    for (int i = 0; i < 50; ++i) REQUIRE(rival.increment().succeeded);
    std::vector<std::int64_t> posts;
    for (auto& f : results) {
        REQUIRE(f.wait_for(30s) == std::future_status::ready);
        auto r = f.get();
        CHECK(r.succeeded);
        CHECK(r.post == r.pre + 1);
        posts.push_back(r.post);
    }
    // One at a time per client and path, in the order started: each saw a larger value than the last.
    CHECK(std::is_sorted(posts.begin(), posts.end()));
    CHECK(std::set<std::int64_t>(posts.begin(), posts.end()).size() == 100);
    CHECK(rival.get().post == 150);
    // The gone objects' records leave the counter (the rival's is its only child).
    CHECK(eventually([&] { return c.get_children(path).children.size() == 1; }));
}

TEST_CASE("atomic long: an async increment whose reply is lost is applied once", "[atomic][async]") {
    std::string connect = test_connect_string(), path = unique_path("atomic-async-lost");
    zkr::testkit::proxy proxy(first_server(connect));
    zkr::client c(test_options(proxy.address(), 10000ms)), observer(test_options(first_server(connect)));
    zkr::atomic_long counter(c, path);
    REQUIRE(counter.async_add(41, boost::asio::use_future).get().post == 41);
    proxy.lose_next_reply({zkr::test::zk_op::multi});
    auto r = counter.async_increment(boost::asio::use_future).get();
    CHECK(proxy.replies_lost() == 1);
    CHECK((r.succeeded && r.pre == 41 && r.post == 42));
    CHECK(zkr::atomic_long(observer, path).get().post == 42);
}

TEST_CASE("id generator: async_next hands out a block's ids in the order asked, one reservation at a time", "[atomic][id_generator][async]") {
    std::string connect = test_connect_string(), path = unique_path("ids-async") + "/orders";
    zkr::client c(test_options(connect));
    std::vector<std::future<std::int64_t>> ids;
    {
        zkr::id_generator gen(c, path, 10);
        for (int i = 0; i < 35; ++i) ids.push_back(gen.async_next(boost::asio::use_future));
        CHECK(gen.next() == 36);  // behind the 35 asked before it
    }  // gone: the calls still complete
    for (int i = 0; i < 35; ++i) {
        REQUIRE(ids[i].wait_for(30s) == std::future_status::ready);
        CHECK(ids[i].get() == i + 1);
    }
    CHECK(zkr::atomic_long(c, path).get().post == 40);  // four blocks of 10, none twice

    // A callback: its id from a new block.
    zkr::id_generator gen(c, path, 3);
    std::promise<std::int64_t> got;
    gen.async_next([&](zkr::error_code ec, std::int64_t id) { got.set_value(ec ? -1 : id); });
    auto f = got.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(f.get() == 41);
}

TEST_CASE("atomic long: many async changes queued when the client closes all complete (client_closed), none on a deep stack",
          "[atomic][async]") {
    // The queued operations end one after another, inline, once the client is closed: they drain
    // in a loop, not one stack frame each (100,000 frames would overflow a thread's stack).
    std::string connect = test_connect_string(), path = unique_path("atomic-async-close");
    auto c = std::make_unique<zkr::client>(test_options(connect));
    zkr::atomic_long counter(*c, path);
    REQUIRE(counter.increment().succeeded);
    std::atomic<int> closed{0}, applied{0}, unknown{0}, other{0};
    std::promise<void> all_done;
    constexpr int n = 100000;
    std::atomic<int> left{n};
    for (int i = 0; i < n; ++i) {
        counter.async_increment([&](zkr::error_code ec, zkr::atomic_result<std::int64_t>) {
            (ec == errc::client_closed ? closed : ec == errc::outcome_unknown ? unknown : ec ? other : applied)++;
            if (--left == 0) all_done.set_value();
        });
    }
    c->close();
    auto done = all_done.get_future();
    REQUIRE(done.wait_for(60s) == std::future_status::ready);
    CHECK(closed + applied + unknown == n);
    CHECK(unknown <= 1);  // the one whose write was on its way
    CHECK(other == 0);
    CHECK(closed > n / 2);  // most were still queued
}
