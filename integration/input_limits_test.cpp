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

// A raw ZooKeeper C handle, to ask the server itself what it makes of a path.
class raw_handle {
public:
    explicit raw_handle(const std::string& connect) {
        zh_ = zookeeper_init(connect.c_str(), &watcher, 10000, nullptr, this, 0);
        REQUIRE(zh_);
        std::unique_lock lock(mutex_);
        REQUIRE(cv_.wait_for(lock, 10s, [&] { return state_ == ZOO_CONNECTED_STATE; }));
    }
    ~raw_handle() { zookeeper_close(zh_); }
    int create(const std::string& path) {
        return zoo_create(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
    }

private:
    static void watcher(zhandle_t*, int type, int state, const char*, void* context) {
        if (type != ZOO_SESSION_EVENT) return;
        auto* self = static_cast<raw_handle*>(context);
        std::lock_guard lock(self->mutex_);
        self->state_ = state;
        self->cv_.notify_all();
    }
    zhandle_t* zh_ = nullptr;
    std::mutex mutex_;
    std::condition_variable cv_;
    int state_ = 0;
};

std::string what_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(nothing thrown)";
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

TEST_CASE("paths the server would refuse are refused up front as invalid_path, shown escaped", "[input_limits]") {
    zkr::client c(test_options(test_connect_string()));
    std::string base = unique_path("utf8");
    c.create_parents(base);
    raw_handle raw(test_connect_string());

    struct bad {
        std::string name;
        const char* shown;
    };
    for (const auto& [name, shown] : {bad{"a\xff", "\\xff"}, bad{"a\xc3", "\\xc3"}, bad{"\xed\xa0\x80", "\\xed"},
                                      bad{"a\xc2\x85", "U+0085"}, bad{"a\xee\x80\x80", "U+E000"},
                                      bad{"a\xef\xbf\xb0", "U+FFF0"}, bad{"a\xf0\x9f\x98\x80", "U+1F600"}}) {
        std::string path = base + "/" + name;
        INFO(path);
        // The server itself refuses them (ZBADARGUMENTS): the rule here is not stricter than its.
        CHECK(raw.create(path) == ZBADARGUMENTS);
        zkr::error_code ec;
        c.create(path, "", zkr::create_mode::persistent, ec);
        CHECK(ec == errc::invalid_path);
        c.set_data(path, "", zkr::any_version, ec);
        CHECK(ec == errc::invalid_path);
        std::string what = what_of([&] { c.create(path); });
        CHECK_THAT(what, Contains(shown));
        what = what_of([&] { zkr::mutex m(c, path); });
        CHECK_THAT(what, Contains(shown));
    }
    // Next to the refused ranges: the server takes them, and so does zkr.
    for (std::string name : {"a~", "a\xc2\xa0", "a\xed\x9f\xbf", "a\xef\xa4\x80", "a\xef\xbf\xaf", "\xe6\x97\xa5"}) {
        INFO(name);
        CHECK(c.create(base + "/" + name).path == base + "/" + name);
    }
}

TEST_CASE("a NUL in a path is shown escaped in every message that quotes the path", "[input_limits]") {
    zkr::client c(test_options(test_connect_string()));
    const std::string nul = std::string("/locks/a\0b", 10);
    CHECK_THAT(what_of([&] { c.create(nul); }), Contains("/locks/a\\0b"));
    CHECK_THAT(what_of([&] { c.get_data(nul); }), Contains("/locks/a\\0b"));
    CHECK_THAT(what_of([&] { zkr::mutex m(c, nul); }), Contains("/locks/a\\0b") && Contains("NUL"));
    CHECK_THAT(what_of([&] { zkr::shared_mutex m(c, nul); }), Contains("/locks/a\\0b") && Contains("NUL"));
}

TEST_CASE("locks under /zookeeper are refused while plain reads there stay allowed", "[input_limits]") {
    zkr::client c(test_options(test_connect_string()));
    for (const char* path : {"/zookeeper", "/zookeeper/locks", "/zookeeper/quota/x"}) {
        INFO(path);
        CHECK_THROWS_AS(zkr::mutex(c, path), std::invalid_argument);
        CHECK_THAT(what_of([&] { zkr::mutex m(c, path); }), Contains("/zookeeper") && Contains("server's own"));
        CHECK_THROWS_AS(zkr::shared_mutex(c, path), std::invalid_argument);
    }
    CHECK_NOTHROW(zkr::mutex(c, "/zookeeperx/lock"));
    CHECK_NOTHROW(zkr::mutex(c, "/locks/zookeeper"));
    CHECK(c.exists("/zookeeper").exists);
    CHECK_NOTHROW(c.get_children("/zookeeper"));
    // Under a chroot the full path counts.
    zkr::client_options o = test_options(test_connect_string() + "/zookeeper");
    zkr::client chrooted(o);
    CHECK_THROWS_WITH(zkr::mutex(chrooted, "/locks/x"), Contains("/zookeeper/locks/x"));
    zkr::client_options app = test_options(test_connect_string() + "/app");
    zkr::client in_app(app);
    CHECK_NOTHROW(zkr::mutex(in_app, "/zookeeper/x"));  // that is /app/zookeeper/x
}

TEST_CASE("a connect string with a semicolon or an empty host is refused at construction", "[input_limits]") {
    zkr::client_options o;
    o.connect = "127.0.0.1:2181;127.0.0.1:2182";
    CHECK_THROWS_WITH(zkr::client(o), Contains("zkr::client_options::connect") && Contains("';'"));
    o.connect = "[]:2181";
    CHECK_THROWS_WITH(zkr::client(o), Contains("zkr::client_options::connect") && Contains("no host"));
}
