// zkr::multi_lock against a real server: opposite orders that finish, one deadline for all the
// parts with nothing left behind, mixed parts, the async form with one guard covering every
// part, and one loss report per hold.
#include "support/background_lock.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/path.hpp"
#include "zkr/client.hpp"
#include "zkr/multi_lock.hpp"
#include "zkr/testkit/proxy.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using zkr::lock_state;
using zkr::test::background_lock;
using zkr::test::eventually;
using zkr::test::lock_side;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

TEST_CASE("multi-lock: two callers naming the same paths in opposite orders both finish", "[multi_lock]") {
    // Curator's InterProcessMultiLock takes them in the caller's order: A holds /a and waits for
    // /b while B holds /b and waits for /a, until their timeouts.
    std::string a = unique_path("multi-a"), b = unique_path("multi-b");
    zkr::client c1(test_options(test_connect_string()));
    zkr::client c2(test_options(test_connect_string()));
    zkr::multi_lock ab(c1, std::vector<std::string>{a, b});
    zkr::multi_lock ba(c2, std::vector<std::string>{b, a});
    CHECK(ab.parts().front().path == ba.parts().front().path);  // one canonical order
    std::atomic<int> inside{0}, overlap{0};
    auto worker = [&](zkr::multi_lock& m) {
        for (int i = 0; i < 15; ++i) {
            if (!m.try_lock_for(20s)) return false;
            if (++inside > 1) ++overlap;
            --inside;
            m.unlock();
        }
        return true;
    };
    auto f1 = std::async(std::launch::async, worker, std::ref(ab));
    auto f2 = std::async(std::launch::async, worker, std::ref(ba));
    REQUIRE(f1.wait_for(120s) == std::future_status::ready);
    REQUIRE(f2.wait_for(120s) == std::future_status::ready);
    CHECK(f1.get());
    CHECK(f2.get());
    CHECK(overlap.load() == 0);
    CHECK(eventually([&] { return queue_length(c1, a) == 0 && queue_length(c1, b) == 0; }));
}

TEST_CASE("multi-lock: one deadline for all the parts, and what was taken is released at once", "[multi_lock]") {
    std::string a = unique_path("multi-deadline-a"), b = unique_path("multi-deadline-b");
    zkr::client c(test_options(test_connect_string()));
    background_lock holder(test_connect_string(), b);  // /b is taken by someone else
    REQUIRE(eventually([&] { return holder.acquired.load(); }));
    zkr::multi_lock both(c, std::vector<std::string>{a, b});
    auto before = std::chrono::steady_clock::now();
    CHECK_FALSE(both.try_lock_for(600ms));
    auto took = std::chrono::steady_clock::now() - before;
    CHECK(took >= 600ms);
    CHECK(took < 5s);  // one deadline, not one per part
    // Nothing of ours is left on either path: /a was released when /b could not be had.
    CHECK(queue_length(c, a) == 0);  // a reaped container counts as empty
    CHECK(queue_length(c, b) == 1);
    CHECK(both.state() == lock_state::not_held);
    CHECK_FALSE(both.try_lock());
    holder.release();
    REQUIRE(both.try_lock_for(10s));
    CHECK(both.state() == lock_state::held);
    both.unlock();
}

TEST_CASE("multi-lock: mixed parts: a write lock on one path, a read lock on another", "[multi_lock]") {
    std::string x = unique_path("multi-x"), y = unique_path("multi-y");
    zkr::client c(test_options(test_connect_string()));
    zkr::multi_lock m(c, std::vector<zkr::lock_part>{{x, zkr::lock_mode::write}, {y, zkr::lock_mode::read}});
    m.lock();
    background_lock reader(test_connect_string(), y, lock_side::read);
    background_lock writer(test_connect_string(), x, lock_side::write);
    REQUIRE(eventually([&] { return reader.acquired.load(); }));  // readers share /y
    CHECK(writer.acquired.load() == false);
    REQUIRE(eventually([&] { return queue_length(c, x) == 2; }));
    CHECK_FALSE(writer.acquired.load());
    m.unlock();
    REQUIRE(eventually([&] { return writer.acquired.load(); }));
    CHECK_THROWS_AS(zkr::multi_lock(c, std::vector<zkr::lock_part>{{x}, {x, zkr::lock_mode::read}}), std::invalid_argument);
    CHECK_THROWS_AS(zkr::multi_lock(c, std::vector<std::string>{}), std::invalid_argument);
}

TEST_CASE("multi-lock: the async form's hold, one guard covering every part, one loss report", "[multi_lock]") {
    std::string a = unique_path("multi-guard-a"), b = unique_path("multi-guard-b");
    std::string data = unique_path("multi-guarded");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(zkr::parent_path(data));  // not left to another test: it may run first, or alone
    c.create(data, "0");
    zkr::multi_lock both(c, std::vector<std::string>{a, b});
    std::atomic<int> lost{0};
    auto sub = both.on_lost([&] { ++lost; });

    zkr::multi_hold h = both.async_lock(asio::use_future).get();
    REQUIRE(h.owns_lock());
    REQUIRE(h.holds().size() == 2);
    CHECK(h.state() == lock_state::held);
    c.multi({h.guard(), zkr::op::set_data{data, "1"}});
    auto guard = h.guard();
    CHECK(guard.also.size() == 1);
    // Someone deletes one part's node: the whole guard fails, the hold is lost.
    zkr::client op(test_options(test_connect_string()));
    op.remove(h.holds()[1].node_path());
    REQUIRE(eventually([&] { return h.state() == lock_state::lost; }));
    zkr::error_code ec;
    auto results = c.multi({guard, zkr::op::set_data{data, "2"}}, ec);
    CHECK(ec == errc::lock_lost);
    CHECK(c.get_data(data).data == "1");
    h.unlock();

    // The blocking form: both parts' sessions go together, reported once.
    both.lock();
    CHECK(both.state() == lock_state::held);
    auto blocking_guard = both.guard();
    CHECK(blocking_guard.also.size() == 1);
    int before = lost.load();
    zkr::testkit::expire_session(c, test_connect_string());
    REQUIRE(eventually([&] { return both.state() == lock_state::lost; }));
    REQUIRE(eventually([&] { return lost.load() == before + 1; }));
    std::promise<void> drained;
    asio::post(c.get_executor(), [&] { drained.set_value(); });
    drained.get_future().wait();
    CHECK(lost.load() == before + 1);
    both.unlock();
}

TEST_CASE("multi-lock: a cancelled async_lock releases the parts it took before its handler runs", "[multi_lock][cancel]") {
    std::string a = unique_path("multi-cancel-a"), b = unique_path("multi-cancel-b");
    zkr::client c(test_options(test_connect_string()));
    zkr::testkit::proxy slow(test_connect_string());
    zkr::client other(test_options(slow.address()));
    zkr::mutex holder(other, b);
    holder.lock();
    // The holder's client is slow from here on, so its release lands late every run (CI, stop
    // 54: a loaded machine did the same once, and the try below found the holder still there).
    slow.set_delay(std::chrono::milliseconds(200));
    zkr::multi_lock both(c, std::vector<std::string>{b, a});  // taken as a, then b
    asio::cancellation_signal cancel;
    auto f = both.async_lock(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
    // It holds a and waits on b.
    REQUIRE(eventually([&] { return queue_length(c, a) == 1 && queue_length(c, b) == 2; }));
    asio::post(c.get_executor(), [&] { cancel.emit(asio::cancellation_type::terminal); });
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    try {
        f.get();
        FAIL("a cancelled multi-lock acquisition completed without an error");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::cancelled);
    }
    // Both its nodes are gone: the deletes were sent before the handler ran, so this client's
    // next requests see them done.
    CHECK(queue_length(c, a) == 0);
    CHECK(queue_length(c, b) == 1);
    // The holder's unlock returns once its delete is sent, on its own client: wait until this
    // client sees it, or the try below can list b before the delete lands.
    holder.unlock();
    REQUIRE(eventually([&] { return queue_length(c, b) == 0; }));
    CHECK(both.try_lock());
    both.unlock();
}
