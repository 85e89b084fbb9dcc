// Testing a service's lock-loss handling with zkr::testkit and Catch2 (docs/testing-your-service.md):
// real ZooKeeper servers, a proxy that cuts one instance off, a session expired from outside, the
// ZooKeeper leader killed. Every wait has a deadline. Catch's main comes from Catch2::Catch2WithMain
// (examples/CMakeLists.txt).
#include "seller.hpp"

#include <zkr/testkit.hpp>

#include <catch2/catch.hpp>

#include <functional>
#include <thread>

using namespace std::chrono_literals;

namespace {

// Polls `condition` until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 20s) {
    for (auto until = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(10ms))
        if (condition()) return true;
    return condition();
}

zkr::client_options options(const std::string& connect, std::chrono::milliseconds session = 4s) {
    zkr::client_options o;
    o.connect = connect;
    o.session_timeout = session;
    return o;
}

}  // namespace

TEST_CASE("a seller cut off from ZooKeeper stops selling at once, and another takes over") {
    zkr::testkit::ensemble zk(3);
    const auto root = zkr::testkit::unique_chroot(zk.connect_string(), "seller");
    const auto chroot = root.substr(zk.connect_string().size());
    zkr::testkit::proxy link(zk.address(0));  // seller a reaches ZooKeeper through this
    zkr::client ca(options(link.address() + chroot, 2s)), cb(options(root));
    cb.create("/stock", "10", zkr::create_mode::persistent);
    seller a(ca, "/stock"), b(cb, "/stock");
    REQUIRE(a.start(10s));
    REQUIRE(a.sell());

    link.partition(true);
    // The moment a cannot be sure, it stops: no sale while the lock is uncertain.
    REQUIRE(eventually([&] { return a.standing() == zkr::lock_state::uncertain; }));
    CHECK_FALSE(a.sell());
    // Its session expires on the server: b gets the lock and sells; a learns it lost the lock.
    REQUIRE(b.start(20s));
    CHECK(b.sell());
    CHECK(eventually([&] { return a.standing() == zkr::lock_state::lost && a.losses() == 1; }));
    link.partition(false);
    CHECK_FALSE(a.sell());
    CHECK(cb.get_data("/stock").data == "8");
}

TEST_CASE("a seller whose session expires is told, and its next write is refused") {
    zkr::testkit::ensemble zk(1);
    zkr::client c(options(zkr::testkit::unique_chroot(zk.connect_string(), "expiry")));
    c.create("/stock", "5", zkr::create_mode::persistent);
    seller s(c, "/stock");
    REQUIRE(s.start(10s));
    zkr::testkit::expire_session(c);  // returns once the client has seen it
    CHECK(s.standing() == zkr::lock_state::lost);
    CHECK(eventually([&] { return s.losses() == 1; }));
    CHECK_FALSE(s.sell());
}

TEST_CASE("a seller keeps its lock and goes on selling when the ZooKeeper leader dies") {
    zkr::testkit::ensemble zk(3);
    zkr::client c(options(zkr::testkit::unique_chroot(zk.connect_string(), "failover"), 10s));
    c.create("/stock", "5", zkr::create_mode::persistent);
    seller s(c, "/stock");
    REQUIRE(s.start(10s));
    const auto session = c.session_id();
    zk.kill(zk.leader());
    zk.wait_for_leader(30s);
    CHECK(eventually([&] { return s.sell(); }));  // once connected again, on the same session
    CHECK(c.session_id() == session);
    CHECK(s.losses() == 0);
}
