// A user's lock-loss test on an installed zkr::testkit (find_package(zkr COMPONENTS testkit) or
// pkg-config zkr-testkit), with a plain main(): a 3-server ensemble; a zkr::mutex holder
// partitioned by a proxy goes uncertain, then lost, and another client takes the lock; a session
// expired from outside; the ZooKeeper leader killed while the holders keep their sessions.
#include <zkr/testkit.hpp>
#include <zkr/zkr.hpp>

#include <boost/asio/use_future.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

int failures = 0;

void expect(bool ok, const char* what, int line) {
    if (ok) return;
    ++failures;
    std::cerr << "line " << line << ": expected " << what << "\n";
}
#define EXPECT(condition) expect((condition), #condition, __LINE__)

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 30s) {
    for (auto until = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(10ms))
        if (condition()) return true;
    return condition();
}

zkr::client_options options(const std::string& connect, std::chrono::milliseconds session) {
    zkr::client_options o;
    o.connect = connect;
    o.session_timeout = session;
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    // --link-check: loaded and linked, nothing run (the second build of it, by pkg-config).
    if (argc > 1 && std::string(argv[1]) == "--link-check") {
        zkr::testkit::proxy p("127.0.0.1:2181");
        std::cout << "zkr " << zkr::version() << ", a zkr::testkit::proxy on " << p.address() << "\n";
        return 0;
    }
    auto t0 = std::chrono::steady_clock::now();
    zkr::testkit::ensemble zk(3);
    std::cout << "3 servers serving after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
              << " ms: " << zk.connect_string() << "\n";

    {  // A holder partitioned: uncertain, then lost; another client takes the lock.
        zkr::testkit::proxy link(zk.address(0));
        zkr::client holder(options(link.address(), 2s)), other(options(zk.connect_string(), 4s));
        zkr::mutex a(holder, "/orders/lock"), b(other, "/orders/lock");
        auto hold = a.async_lock(boost::asio::use_future).get();
        EXPECT(hold.state() == zkr::lock_state::held);
        link.partition(true);
        EXPECT(eventually([&] { return hold.state() == zkr::lock_state::uncertain; }));
        EXPECT(eventually([&] { return hold.state() == zkr::lock_state::lost; }));
        EXPECT(b.try_lock_for(30s));
        b.unlock();
        link.partition(false);
    }
    {  // A session expired from outside: its hold is lost by the time expire_session returns.
        zkr::client c(options(zk.connect_string(), 4s));
        zkr::mutex m(c, "/orders/expiry");
        auto hold = m.async_lock(boost::asio::use_future).get();
        const auto old = c.session_id();
        EXPECT(zkr::testkit::expire_session(c) == old);
        EXPECT(hold.state() == zkr::lock_state::lost);
    }
    {  // The ZooKeeper leader killed: every holder keeps its session and its lock.
        zkr::client c1(options(zk.connect_string(), 10s)), c2(options(zk.connect_string(), 10s));
        zkr::mutex m1(c1, "/orders/a"), m2(c2, "/orders/b");
        auto h1 = m1.async_lock(boost::asio::use_future).get();
        auto h2 = m2.async_lock(boost::asio::use_future).get();
        const auto s1 = c1.session_id(), s2 = c2.session_id();
        const int leader = zk.leader();
        zk.kill(leader);
        zk.wait_for_leader(30s);
        EXPECT(eventually([&] { return h1.state() == zkr::lock_state::held && h2.state() == zkr::lock_state::held; }));
        EXPECT(c1.session_id() == s1 && c2.session_id() == s2);
        zk.start(leader);
    }
    if (failures) {
        std::cerr << failures << " check(s) failed\n";
        return 1;
    }
    std::cout << "zkr::testkit consumer: every check passed\n";
    return 0;
}
