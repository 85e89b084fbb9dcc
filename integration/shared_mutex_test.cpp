// zkr::shared_mutex against real ZooKeeper servers.
#include "support/background_lock.hpp"
#include "support/child_process.hpp"
#include "support/curator_driver.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/path.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <future>
#include <random>
#include <shared_mutex>
#include <sstream>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::get_within;
using zkr::test::holds_throughout;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// A contender on its own thread and client, taking the write (true) or read (false) side.
struct contender : zkr::test::background_lock {
    contender(const std::string& connect, const std::string& path, bool write)
        : background_lock(connect, path, write ? zkr::test::lock_side::write : zkr::test::lock_side::read) {}
};

// Who is inside, checked on every entry.
struct occupancy {
    std::atomic<int> readers{0}, writers{0}, max_readers{0};
    std::atomic<int> violations{0};
    void enter_read() {
        int r = ++readers;
        int m = max_readers.load();
        while (r > m && !max_readers.compare_exchange_weak(m, r)) {}
        if (writers.load() != 0) ++violations;
    }
    void leave_read() { --readers; }
    void enter_write() {
        if (++writers != 1 || readers.load() != 0) ++violations;
    }
    void leave_write() { --writers; }
};

}  // namespace

TEST_CASE("readers share, writers exclude", "[shared_mutex]") {
    std::string path = unique_path("rw-basic");
    zkr::client a(test_options(test_connect_string()));
    zkr::client b(test_options(test_connect_string()));
    zkr::shared_mutex ra(a, path), rb(b, path);

    ra.lock_shared();
    CHECK(rb.try_lock_shared());  // a second reader gets in at once
    rb.unlock_shared();
    CHECK_FALSE(rb.try_lock());    // no writer while a reader holds
    CHECK(rb.try_lock_shared());
    // Read through b, the last writer: on an ensemble a's server may not have b's node yet
    // (ZooKeeper orders reads per client), while b's create came after a's on every server.
    auto queue = rb.participants();
    REQUIRE(queue.size() == 2);
    CHECK(queue[0].reader);
    CHECK(queue[0].holds);
    CHECK(queue[1].holds);
    rb.unlock_shared();
    ra.unlock_shared();
    REQUIRE(eventually([&] { return queue_length(a, path) == 0; }));

    {
        std::unique_lock writer(ra);  // std::unique_lock takes the write side
        CHECK_FALSE(rb.try_lock_shared());
        CHECK_FALSE(rb.try_lock());
        CHECK(ra.write_lock().hold_count() == 1);
    }
    REQUIRE(eventually([&] { return queue_length(a, path) == 0; }));
    {
        std::shared_lock reader(rb);  // std::shared_lock takes the read side
        CHECK(rb.read_lock().is_held_by_current_thread());
        CHECK_FALSE(rb.write_lock().is_held_by_current_thread());
    }
}

TEST_CASE("randomized: 8 clients x 100 operations, 10% writes, invariants hold", "[shared_mutex]") {
    std::string path = unique_path("rw-random");
    occupancy inside;
    std::vector<std::thread> threads;
    std::atomic<int> reads{0}, writes{0};
    for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&, i] {
            zkr::client c(test_options(test_connect_string()));
            zkr::shared_mutex rw(c, path);
            std::mt19937 random(static_cast<unsigned>(i * 7919 + 1));
            for (int n = 0; n < 100; ++n) {
                if (random() % 10 == 0) {
                    std::unique_lock lock(rw);
                    inside.enter_write();
                    std::this_thread::sleep_for(1ms);
                    inside.leave_write();
                    ++writes;
                } else {
                    std::shared_lock lock(rw);
                    inside.enter_read();
                    std::this_thread::sleep_for(1ms);
                    inside.leave_read();
                    ++reads;
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(inside.violations.load() == 0);
    CHECK(reads + writes == 800);
    CHECK(writes > 0);
    CHECK(inside.max_readers.load() > 1);  // readers really ran together
}

TEST_CASE("fair: a waiting writer holds back later readers and those behind it enter together", "[shared_mutex]") {
    std::string connect = test_connect_string(), path = unique_path("rw-fifo");
    zkr::client c(test_options(connect));
    zkr::shared_mutex first_reader(c, path);
    first_reader.lock_shared();

    contender writer(connect, path, true);
    REQUIRE(eventually([&] { return queue_length(c, path) == 2; }));
    contender late1(connect, path, false), late2(connect, path, false);
    REQUIRE(eventually([&] { return queue_length(c, path) == 4; }));
    // A reader holds, but a writer waits before the late readers: nobody else gets in.
    CHECK(holds_throughout([&] { return !writer.acquired.load() && !late1.acquired.load() && !late2.acquired.load(); }, 300ms));

    first_reader.unlock_shared();
    REQUIRE(eventually([&] { return writer.acquired.load(); }));
    CHECK(holds_throughout([&] { return !late1.acquired.load() && !late2.acquired.load(); }, 200ms));
    writer.release();
    CHECK(eventually([&] { return late1.acquired.load() && late2.acquired.load(); }));
}

TEST_CASE("wake-ups: a writer's release wakes only the readers right behind it", "[shared_mutex]") {
    std::string connect = test_connect_string(), path = unique_path("rw-wakeups");
    zkr::client c(test_options(connect));
    zkr::shared_mutex holder(c, path);
    holder.lock();
    std::vector<std::unique_ptr<contender>> readers;
    for (int i = 0; i < 3; ++i) {
        readers.push_back(std::make_unique<contender>(connect, path, false));
        REQUIRE(eventually([&] { return queue_length(c, path) == static_cast<std::size_t>(i + 2); }));
    }
    contender writer(connect, path, true);
    REQUIRE(eventually([&] { return queue_length(c, path) == 5; }));

    holder.unlock();
    for (auto& r : readers) REQUIRE(eventually([&] { return r->acquired.load(); }));
    // Each reader woke once; the writer behind them did not.
    CHECK(holds_throughout([&] {
        return readers[0]->wakeups() == 1 && readers[1]->wakeups() == 1 && readers[2]->wakeups() == 1 && writer.wakeups() == 0;
    }, 200ms));

    // Readers leaving: only the one right before the writer wakes it.
    readers[0]->release();
    readers[1]->release();
    CHECK(holds_throughout([&] { return writer.wakeups() == 0 && !writer.acquired.load(); }, 200ms));
    readers[2]->release();
    REQUIRE(eventually([&] { return writer.acquired.load(); }));
    CHECK(writer.wakeups() == 1);
}

TEST_CASE("downgrade keeps its place against a queued writer", "[shared_mutex]") {
    std::string connect = test_connect_string(), path = unique_path("rw-downgrade");
    zkr::client c(test_options(connect));
    zkr::shared_mutex rw(c, path);
    rw.lock();
    contender queued_writer(connect, path, true);
    REQUIRE(eventually([&] { return queue_length(c, path) == 2; }));

    rw.lock_shared();  // downgrade: granted at once to the write holder
    CHECK(rw.read_lock().hold_count() == 1);
    rw.unlock();       // keep reading; the writer must not slip in beside us
    CHECK(holds_throughout([&] { return !queued_writer.acquired.load(); }, 500ms));
    CHECK(rw.read_lock().state() == zkr::lock_state::held);
    rw.unlock_shared();
    CHECK(eventually([&] { return queued_writer.acquired.load(); }));
    queued_writer.release();
    CHECK(eventually([&] { return queue_length(c, path) == 0; }));
}

TEST_CASE("downgrade with nobody queued frees the write node at once", "[shared_mutex]") {
    std::string connect = test_connect_string(), path = unique_path("rw-downgrade-free");
    zkr::client c(test_options(connect));
    zkr::shared_mutex rw(c, path);
    rw.lock();
    rw.lock_shared();
    rw.unlock();
    REQUIRE(eventually([&] { return queue_length(c, path) == 1; }));  // only our read node
    zkr::client other(test_options(connect));
    zkr::shared_mutex reader(other, path);
    CHECK(reader.try_lock_shared());  // another reader shares with our downgraded hold
    reader.unlock_shared();
    rw.unlock_shared();
}

TEST_CASE("upgrade is refused at once with upgrade_refused", "[shared_mutex]") {
    std::string path = unique_path("rw-upgrade");
    zkr::client c(test_options(test_connect_string()));
    zkr::shared_mutex rw(c, path);
    rw.lock_shared();
    auto start = std::chrono::steady_clock::now();
    try {
        rw.lock();
        FAIL("upgrade should be refused");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::upgrade_refused);
        CHECK_THAT(e.what(), Catch::Matchers::Contains("release the read lock"));
    }
    CHECK_THROWS_AS(rw.try_lock_for(1s), zkr::system_error);
    zkr::error_code ec;
    CHECK_FALSE(rw.try_lock_for(1s, ec));
    CHECK(ec == errc::upgrade_refused);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
    CHECK(rw.read_lock().hold_count() == 1);
    CHECK(queue_length(c, path) == 1);  // nothing was created for the refused attempts
    // An async writer is an owner of its own, not the thread: it queues behind the thread's read
    // hold like anyone else's, and gets in once that is released.
    auto f = rw.async_lock(asio::use_future);
    CHECK(f.wait_for(300ms) == std::future_status::timeout);
    CHECK(queue_length(c, path) == 2);
    rw.unlock_shared();
    auto w = get_within(f, 10s, "the async writer");
    CHECK(w.state() == zkr::lock_state::held);
}

TEST_CASE("kazoo #649: a reader between two writers is not blocked by the later one", "[shared_mutex]") {
    std::string connect = test_connect_string(), path = unique_path("rw-649");
    zkr::client c(test_options(connect));
    zkr::shared_mutex first(c, path);
    first.lock();
    contender reader(connect, path, false);
    REQUIRE(eventually([&] { return queue_length(c, path) == 2; }));
    contender second_writer(connect, path, true);
    REQUIRE(eventually([&] { return queue_length(c, path) == 3; }));
    first.unlock();
    REQUIRE(eventually([&] { return reader.acquired.load(); }));
    CHECK_FALSE(second_writer.acquired.load());
    reader.release();
    CHECK(eventually([&] { return second_writer.acquired.load(); }));
}

TEST_CASE("a writer's session expires: readers get in, the writer is told", "[shared_mutex][fault]") {
    std::string connect = test_connect_string(), path = unique_path("rw-expire");
    zkr::client wc(test_options(connect));
    zkr::shared_mutex writer(wc, path);
    writer.lock();
    contender r1(connect, path, false), r2(connect, path, false);
    REQUIRE(eventually([&] { return queue_length(wc, path) == 3; }));
    auto lost = writer.write_lock().async_wait_lost(asio::use_future);
    zkr::testkit::expire_session(wc, connect);
    CHECK(eventually([&] { return r1.acquired.load() && r2.acquired.load(); }, 15s));
    // The writer's client learns of the expiry when it next reaches the server; until then it
    // says uncertain, never held.
    CHECK(writer.write_lock().state() != zkr::lock_state::held);
    CHECK(eventually([&] { return writer.write_lock().state() == zkr::lock_state::lost; }, 15s));
    try {
        get_within(lost, 15s, "async_wait_lost");
        FAIL("expected lock_lost");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == errc::lock_lost);
    }
    writer.unlock();  // harmless
}

namespace {

// The Curator driver's rw-mix protocol, zkr's side: STATE_PATH holds "readers writers".
std::pair<int, int> parse_state(const std::string& s) {
    std::istringstream in(s);
    int r = 0, w = 0;
    in >> r >> w;
    return {r, w};
}

}  // namespace

TEST_CASE("Curator and zkr on one read/write lock, both ways, invariants hold", "[shared_mutex][interop]") {
    std::string connect = test_connect_string(), path = unique_path("rw-interop"), state = path + "-state";
    zkr::client c(test_options(connect));
    c.create_parents(state);
    c.set_data(state, "0 0");

    SECTION("a Curator reader and a zkr reader share; a Curator writer waits for both, and a later zkr reader waits for it") {
        zkr::shared_mutex rw(c, path);
        rw.lock_shared();
        zkr::test::child_process reader(zkr::test::curator_command("rw-hold " + connect + " " + path + " read"));
        REQUIRE(reader.read_line().value_or("").rfind("queued ", 0) == 0);
        REQUIRE(reader.read_line().value_or("").rfind("acquired ", 0) == 0);  // shares with zkr's reader
        zkr::test::child_process writer(zkr::test::curator_command("rw-hold " + connect + " " + path + " write"));
        REQUIRE(writer.read_line().value_or("").rfind("queued ", 0) == 0);
        contender late(connect, path, false);
        REQUIRE(eventually([&] { return queue_length(c, path) == 4; }));
        CHECK(holds_throughout([&] { return !late.acquired.load(); }, 300ms));  // fair across implementations
        reader.write_line("release");
        CHECK(reader.read_line() == std::optional<std::string>("released"));
        rw.unlock_shared();
        auto acquired = writer.read_line();
        REQUIRE(acquired);
        CHECK(acquired->rfind("acquired ", 0) == 0);
        CHECK_FALSE(late.acquired.load());
        writer.write_line("release");
        CHECK(writer.read_line() == std::optional<std::string>("released"));
        CHECK(eventually([&] { return late.acquired.load(); }));
        CHECK(reader.wait() == 0);
        CHECK(writer.wait() == 0);
    }
    SECTION("mixed load: Curator's rw-mix beside zkr's, no reader ever sees a writer") {
        zkr::test::child_process java(zkr::test::curator_command("rw-mix " + connect + " " + path + " " + state + " 150 20 7"));
        std::atomic<int> violations{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 3; ++t) {
            threads.emplace_back([&, t] {
                zkr::client own(test_options(connect));
                zkr::shared_mutex rw(own, path);
                std::mt19937 random(static_cast<unsigned>(t + 100));
                for (int n = 0; n < 60; ++n) {
                    if (random() % 5 == 0) {
                        std::unique_lock lock(rw);
                        auto d = own.get_data(state);
                        if (parse_state(d.data) != std::make_pair(0, 0)) ++violations;
                        zkr::error_code ec;
                        auto st = own.set_data(state, "0 1", d.stat.version, ec);
                        if (ec) ++violations;  // someone wrote meanwhile: exclusion broken
                        std::this_thread::sleep_for(2ms);
                        own.set_data(state, "0 0", st.version, ec);
                        if (ec) ++violations;
                    } else {
                        std::shared_lock lock(rw);
                        for (;;) {  // readers race each other: compare-and-set
                            auto d = own.get_data(state);
                            auto [r, w] = parse_state(d.data);
                            if (w != 0) ++violations;
                            zkr::error_code ec;
                            own.set_data(state, std::to_string(r + 1) + " " + std::to_string(w), d.stat.version, ec);
                            if (!ec) break;
                        }
                        std::this_thread::sleep_for(2ms);
                        for (;;) {
                            auto d = own.get_data(state);
                            auto [r, w] = parse_state(d.data);
                            zkr::error_code ec;
                            own.set_data(state, std::to_string(r - 1) + " " + std::to_string(w), d.stat.version, ec);
                            if (!ec) break;
                        }
                    }
                }
            });
        }
        for (auto& t : threads) t.join();
        auto done = java.read_line(120s);
        REQUIRE(done);
        CHECK(done->rfind("done ", 0) == 0);
        CHECK(java.wait() == 0);
        CHECK(violations.load() == 0);
        CHECK(eventually([&] { return c.get_data(state).data == "0 0"; }, 2s));  // others' last writes
    }
}
