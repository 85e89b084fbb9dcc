// Input the server cannot take is refused before anything is sent, with a clear error, and
// deadlines too far off saturate instead of overflowing (issue 19, items 5, 7, 8 and 9a).
#include "support/background_lock.hpp"
#include "support/session_tools.hpp"
#include "support/zk_cluster.hpp"
#include "client_impl.hpp"
#include "zkr/client.hpp"
#include "zkr/log.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using steady = std::chrono::steady_clock;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::lock_side;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// Runs `attempt` (a timed lock call that unlocks what it gets) on a thread of its own while
// another client holds the lock on `holder_side`; releases the holder once the attempt is queued
// behind it. The attempt must then get the lock, however far off its deadline.
template <class Attempt>
void gets_the_lock_when_released(const std::string& path, lock_side holder_side, Attempt attempt) {
    zkr::test::background_lock holder(test_connect_string(), path, holder_side);
    REQUIRE(eventually([&] { return holder.acquired.load(); }));
    zkr::client c(test_options(test_connect_string()));
    c.wait_connected(10s);
    auto started = steady::now();
    auto result = std::async(std::launch::async, [&] { return attempt(c); });
    // Queued behind the holder, and still waiting a moment later (not answered "not acquired").
    bool queued = eventually([&] { return queue_length(c, path) == 2; }, 10s);
    CHECK(queued);
    CHECK(result.wait_for(300ms) == std::future_status::timeout);
    holder.release();
    REQUIRE(result.wait_for(30s) == std::future_status::ready);
    CHECK(result.get());
    INFO("returned after " << std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - started).count()
                           << " ms");
    CHECK(queue_length(c, path) == 0);
}

}  // namespace

// ------------------------------------------------------------------ item 5: deadlines saturate

TEST_CASE("a timeout too long to represent waits, and gets the lock when the holder releases", "[input_limits]") {
    std::string path = unique_path("huge-timeout");
    SECTION("try_lock_for(steady_clock::duration::max())") {
        gets_the_lock_when_released(path, lock_side::exclusive, [&](zkr::client& c) {
            zkr::mutex m(c, path);
            bool got = m.try_lock_for(steady::duration::max());
            if (got) m.unlock();
            return got;
        });
    }
    SECTION("try_lock_for(hours::max())") {
        gets_the_lock_when_released(path, lock_side::exclusive, [&](zkr::client& c) {
            zkr::mutex m(c, path);
            bool got = m.try_lock_for(std::chrono::hours::max());
            if (got) m.unlock();
            return got;
        });
    }
    SECTION("try_lock_for(milliseconds::max(), ec)") {
        gets_the_lock_when_released(path, lock_side::exclusive, [&](zkr::client& c) {
            zkr::mutex m(c, path);
            zkr::error_code ec;
            bool got = m.try_lock_for(std::chrono::milliseconds::max(), ec);
            if (got) m.unlock();
            return got && !ec;
        });
    }
    SECTION("try_lock_until(steady_clock::time_point::max())") {
        gets_the_lock_when_released(path, lock_side::exclusive, [&](zkr::client& c) {
            zkr::mutex m(c, path);
            bool got = m.try_lock_until(steady::time_point::max());
            if (got) m.unlock();
            return got;
        });
    }
    SECTION("try_lock_until(system_clock::time_point::max())") {
        gets_the_lock_when_released(path, lock_side::exclusive, [&](zkr::client& c) {
            zkr::mutex m(c, path);
            bool got = m.try_lock_until(std::chrono::system_clock::time_point::max());
            if (got) m.unlock();
            return got;
        });
    }
    SECTION("try_lock_until of a coarse time point at its maximum") {
        gets_the_lock_when_released(path, lock_side::exclusive, [&](zkr::client& c) {
            zkr::mutex m(c, path);
            bool got = m.try_lock_until(std::chrono::time_point<steady, std::chrono::hours>::max());
            if (got) m.unlock();
            return got;
        });
    }
    SECTION("shared_mutex: try_lock_shared_for(duration::max()) behind a writer") {
        gets_the_lock_when_released(path, lock_side::write, [&](zkr::client& c) {
            zkr::shared_mutex m(c, path);
            bool got = m.try_lock_shared_for(steady::duration::max());
            if (got) m.unlock_shared();
            return got;
        });
    }
    SECTION("shared_mutex: try_lock_for(hours::max()) behind a reader") {
        gets_the_lock_when_released(path, lock_side::read, [&](zkr::client& c) {
            zkr::shared_mutex m(c, path);
            bool got = m.try_lock_for(std::chrono::hours::max());
            if (got) m.unlock();
            return got;
        });
    }
    SECTION("shared_mutex: try_lock_shared_until(system_clock::time_point::max()) behind a writer") {
        gets_the_lock_when_released(path, lock_side::write, [&](zkr::client& c) {
            zkr::shared_mutex m(c, path);
            bool got = m.try_lock_shared_until(std::chrono::system_clock::time_point::max());
            if (got) m.unlock_shared();
            return got;
        });
    }
}

TEST_CASE("wait_connected and watch::wait_for with a timeout too long to represent wait", "[input_limits]") {
    SECTION("wait_connected(milliseconds::max()) waits until the client is closed") {
        zkr::client_options o;
        o.connect = "127.0.0.1:1";  // nothing listens there
        zkr::client c(o);
        auto waiting = std::async(std::launch::async, [&] {
            try {
                c.wait_connected(std::chrono::milliseconds::max());
            } catch (const zkr::system_error& e) {
                return e.code();
            }
            return zkr::error_code{};
        });
        CHECK(waiting.wait_for(500ms) == std::future_status::timeout);  // still waiting, not timed out at once
        c.close();
        REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
        CHECK(waiting.get() == errc::client_closed);
    }
    SECTION("watch::wait_for(milliseconds::max()) waits until the watch fires") {
        zkr::client c(test_options(test_connect_string()));
        std::string path = unique_path("huge-watch-wait");
        auto w = c.exists(path, zkr::set_watch).watch;
        auto waiting = std::async(std::launch::async, [&] { return w.wait_for(std::chrono::milliseconds::max()); });
        CHECK(waiting.wait_for(500ms) == std::future_status::timeout);
        c.create_parents(path);
        REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
        auto event = waiting.get();
        REQUIRE(event.has_value());
        CHECK(event->type == zkr::event_type::created);
    }
}

// ------------------------------------------------------------------ item 8: other input

TEST_CASE("a connect string with a semicolon or an empty host is refused at construction", "[input_limits]") {
    zkr::client_options o;
    o.connect = "127.0.0.1:2181;127.0.0.1:2182";
    CHECK_THROWS_WITH(zkr::client(o), Contains("zkr::client_options::connect") && Contains("';'"));
    o.connect = "[]:2181";
    CHECK_THROWS_WITH(zkr::client(o), Contains("zkr::client_options::connect") && Contains("no host"));
}
