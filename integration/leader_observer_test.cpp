// zkr::leader_observer against a real server: it follows the leader of a latch or selector
// election without a node of its own, through joins, hand-overs, an empty or missing path and
// its own session's loss.
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/leader_latch.hpp"
#include "zkr/leader_observer.hpp"
#include "zkr/leader_selector.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <future>
#include <mutex>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

std::string id_of(const std::optional<zkr::election_participant>& p) { return p ? p->id : std::string("(none)"); }

struct change_log {
    std::mutex mutex;
    std::vector<std::string> ids;
    zkr::subscription sub;
    explicit change_log(zkr::leader_observer& o) {
        sub = o.on_change([this](const std::optional<zkr::election_participant>& p) {
            std::lock_guard lock(mutex);
            ids.push_back(id_of(p));
        });
    }
    std::vector<std::string> snapshot() {
        std::lock_guard lock(mutex);
        return ids;
    }
};

}  // namespace

TEST_CASE("leader observer: follows a latch election from a missing path to hand-overs, creating nothing", "[leader_observer]") {
    std::string path = unique_path("observed");
    zkr::client oc(test_options(test_connect_string()));
    zkr::leader_observer observer(oc, path);
    change_log log(observer);
    REQUIRE(eventually([&] { return observer.ready(); }));
    CHECK_FALSE(observer.leader());
    auto first_change = observer.async_next_change(asio::use_future);

    zkr::client ca(test_options(test_connect_string()));
    zkr::client cb(test_options(test_connect_string()));
    zkr::leader_latch a(ca, path, "a");
    zkr::leader_latch b(cb, path, "b");
    a.start();
    REQUIRE(first_change.wait_for(10s) == std::future_status::ready);
    CHECK(id_of(first_change.get()) == "a");
    b.start();
    REQUIRE(eventually([&] { return queue_length(oc, path) == 2; }));
    CHECK(id_of(observer.leader()) == "a");
    a.close();
    REQUIRE(eventually([&] { return id_of(observer.leader()) == "b"; }));
    b.close();
    REQUIRE(eventually([&] { return !observer.leader(); }));
    CHECK(eventually([&] { return log.snapshot() == std::vector<std::string>{"a", "b", "(none)"}; }));
    // It never made a node of its own.
    CHECK(queue_length(oc, path) == 0);
}

TEST_CASE("leader observer: follows a selector election", "[leader_observer]") {
    std::string path = unique_path("observed-selector");
    zkr::client oc(test_options(test_connect_string()));
    zkr::client sc(test_options(test_connect_string()));
    zkr::leader_observer observer(oc, path, zkr::election_recipe::selector);
    std::promise<void> release;
    auto released = release.get_future().share();
    zkr::leader_selector s(sc, path, "worker-1", [released](std::stop_token stop) {
        while (!stop.stop_requested() && released.wait_for(10ms) != std::future_status::ready) {}
    }, {.auto_requeue = false});
    s.start();
    REQUIRE(eventually([&] { return id_of(observer.leader()) == "worker-1"; }));
    release.set_value();
    REQUIRE(eventually([&] { return !observer.leader(); }));
}

TEST_CASE("leader observer: reads the election again after its own session is lost", "[leader_observer]") {
    std::string path = unique_path("observed-expired");
    zkr::client oc(test_options(test_connect_string()));
    zkr::client lc(test_options(test_connect_string()));
    zkr::leader_observer observer(oc, path);
    zkr::leader_latch a(lc, path, "a");
    a.start();
    REQUIRE(eventually([&] { return id_of(observer.leader()) == "a"; }));
    zkr::testkit::expire_session(oc, test_connect_string());
    // While its session was away, the leader changed; the observer sees it.
    a.close();
    zkr::leader_latch b(lc, path, "b");
    b.start();
    REQUIRE(b.wait_leadership(10s));
    REQUIRE(eventually([&] { return id_of(observer.leader()) == "b"; }));
}

TEST_CASE("leader observer: a wait ends with its cancellation and with close", "[leader_observer][cancel]") {
    std::string path = unique_path("observed-cancel");
    zkr::client oc(test_options(test_connect_string()));
    zkr::leader_observer observer(oc, path);
    asio::cancellation_signal cancel;
    auto cancelled = observer.async_next_change(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
    auto closed = observer.async_next_change(asio::use_future);
    cancel.emit(asio::cancellation_type::terminal);
    REQUIRE(cancelled.wait_for(10s) == std::future_status::ready);
    CHECK_THROWS_AS(cancelled.get(), zkr::system_error);
    observer.close();
    REQUIRE(closed.wait_for(10s) == std::future_status::ready);
    CHECK_THROWS_AS(closed.get(), zkr::system_error);
}
