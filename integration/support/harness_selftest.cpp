// Self-test of the integration harness (zk_cluster, fault_proxy) against real ZooKeeper servers,
// using the ZooKeeper C client directly. Catch2 v2; the main comes from elsewhere.
#ifndef THREADED  // the C client's target defines it too
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "fault_proxy.hpp"
#include "zk_cluster.hpp"

using namespace std::chrono_literals;
using zkr::test::fault_proxy;
using zkr::test::zk_cluster;

namespace {

// A C-client session with its connection state observable from the test thread.
class session {
public:
    session(const std::string& hosts, int timeout_ms) {
        static std::once_flag quiet;
        std::call_once(quiet, [] {
            // The C client logs every injected connection loss at ERROR level; keep the output
            // readable unless ZKR_TEST_ZKLOG is set.
            if (std::getenv("ZKR_TEST_ZKLOG") == nullptr) {
                static FILE* devnull = std::fopen("/dev/null", "w");
                if (devnull != nullptr) zoo_set_log_stream(devnull);
            }
            zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
        });
        zh_ = zookeeper_init(hosts.c_str(), &session::on_event, timeout_ms, nullptr, this, 0);
        if (zh_ == nullptr) throw std::runtime_error("zookeeper_init failed for " + hosts);
        if (!wait_for_state(ZOO_CONNECTED_STATE, 10s)) {
            zookeeper_close(zh_);
            throw std::runtime_error("no connection to " + hosts);
        }
    }
    ~session() {
        if (zh_ != nullptr) zookeeper_close(zh_);
    }
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    zhandle_t* get() const { return zh_; }

    bool wait_for_state(int state, std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(m_);
        return cv_.wait_for(lock, timeout, [&] { return state_ == state; });
    }
    int state() {
        std::lock_guard<std::mutex> lock(m_);
        return state_;
    }
    int disconnects() {
        std::lock_guard<std::mutex> lock(m_);
        return disconnects_;
    }

private:
    static void on_event(zhandle_t*, int type, int state, const char*, void* ctx) {
        if (type != ZOO_SESSION_EVENT) return;
        auto* self = static_cast<session*>(ctx);
        std::lock_guard<std::mutex> lock(self->m_);
        if (self->state_ == ZOO_CONNECTED_STATE && state != ZOO_CONNECTED_STATE) ++self->disconnects_;
        self->state_ = state;
        self->cv_.notify_all();
    }

    zhandle_t* zh_ = nullptr;
    std::mutex m_;
    std::condition_variable cv_;
    int state_ = 0;
    int disconnects_ = 0;
};

std::string first_host(const std::string& connect) { return connect.substr(0, connect.find(',')); }

std::string unique_path(const char* what) {
    static std::atomic<int> n{0};
    return "/zkr-selftest-" + std::to_string(::getpid()) + "-" + what + "-" + std::to_string(n++);
}

int create(zhandle_t* zh, const std::string& path, int flags = 0) {
    return zoo_create(zh, path.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, flags, nullptr, 0);
}

int exists(zhandle_t* zh, const std::string& path, int watch = 0) {
    Stat st{};
    return zoo_exists(zh, path.c_str(), watch, &st);
}

// Retries an operation until it stops failing with connection loss (the client reconnects).
template <class F>
int retry_while_disconnected(F op, std::chrono::milliseconds timeout = 15s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int rc;
    while ((rc = op()) == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
        if (std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::sleep_for(50ms);
    }
    return rc;
}

}  // namespace

TEST_CASE("zk_cluster: standalone server starts and answers four-letter words", "[harness]") {
    const auto t0 = std::chrono::steady_clock::now();
    zk_cluster cluster(1);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    WARN("standalone start took " << ms.count() << " ms");
    CHECK(ms < 30s);  // generous: a JVM on a busy 2-core machine
    REQUIRE(cluster.size() == 1);
    REQUIRE(cluster.connect_string() == cluster.server_address(1));
    CHECK(cluster.four_letter_word(1, "ruok") == "imok");
    CHECK(cluster.four_letter_word(1, "srvr").find("Mode: standalone") != std::string::npos);
    CHECK(cluster.leader() == 1);
    CHECK(cluster.watch_count(1) == 0);

    session s(cluster.connect_string(), 4000);
    const std::string path = unique_path("watched");
    REQUIRE(exists(s.get(), path, 1) == ZNONODE);  // leaves an exists watch
    CHECK(cluster.watch_count(1) == 1);
}

TEST_CASE("fault_proxy: forwards, counts, and loses a create reply after the server applied it", "[harness]") {
    const std::string upstream = first_host(zkr::test::test_connect_string());
    fault_proxy proxy(upstream);
    session direct(upstream, 4000);
    session s(proxy.address(), 4000);
    REQUIRE(proxy.active_connections() == 1);

    const std::string a = unique_path("a");
    REQUIRE(create(s.get(), a) == ZOK);
    CHECK(proxy.requests_seen(zkr::test::zk_op::create) + proxy.requests_seen(zkr::test::zk_op::create2) == 1);
    REQUIRE(exists(direct.get(), a) == ZOK);

    // Lost reply: the server creates the node, the client hears connection loss.
    const std::string b = unique_path("b");
    proxy.lose_next_reply({zkr::test::zk_op::create, zkr::test::zk_op::create2});
    CHECK(exists(s.get(), a) == ZOK);  // other ops are not affected
    CHECK(create(s.get(), b) == ZCONNECTIONLOSS);
    CHECK(proxy.replies_lost() == 1);
    CHECK(exists(direct.get(), b) == ZOK);
    // Same session afterwards: the client reconnects through the proxy and finds its node.
    CHECK(retry_while_disconnected([&] { return exists(s.get(), b); }) == ZOK);
    CHECK(s.state() == ZOO_CONNECTED_STATE);
    CHECK(proxy.replies_lost() == 1);  // one-shot

    // drop_all_connections: connection loss, then reconnect with the same session.
    const int before = s.disconnects();
    proxy.drop_all_connections();
    CHECK(retry_while_disconnected([&] { return exists(s.get(), a); }) == ZOK);
    CHECK(s.disconnects() == before + 1);

    // refuse_connections: the client cannot get back until it is switched off.
    proxy.refuse_connections(true);
    proxy.drop_all_connections();
    CHECK(exists(s.get(), a) == ZCONNECTIONLOSS);
    std::this_thread::sleep_for(300ms);
    CHECK(proxy.active_connections() == 0);
    proxy.refuse_connections(false);
    CHECK(retry_while_disconnected([&] { return exists(s.get(), a); }) == ZOK);

    // A large value crosses the proxy in many partial reads and writes.
    const std::string big_path = unique_path("big");
    std::string big(900 * 1024, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
    REQUIRE(zoo_create(s.get(), big_path.c_str(), big.data(), static_cast<int>(big.size()), &ZOO_OPEN_ACL_UNSAFE,
                       0, nullptr, 0) == ZOK);
    std::string back(big.size() + 16, '\0');
    int back_len = static_cast<int>(back.size());
    REQUIRE(zoo_get(s.get(), big_path.c_str(), 0, back.data(), &back_len, nullptr) == ZOK);
    back.resize(static_cast<std::size_t>(back_len));
    CHECK(back == big);

    for (const auto& p : {a, b, big_path}) CHECK(zoo_delete(direct.get(), p.c_str(), -1) == ZOK);
}

TEST_CASE("fault_proxy: passes non-ZooKeeper bytes and shuts down while blackholed", "[harness]") {
    const std::string upstream = first_host(zkr::test::test_connect_string());
    auto raw_connect = [](int port) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(static_cast<uint16_t>(port));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
        return fd;
    };
    auto read_all = [](int fd) {
        std::string got;
        char buf[512];
        while (true) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 3000) <= 0) break;
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, static_cast<std::size_t>(n));
        }
        return got;
    };
    const auto t0 = std::chrono::steady_clock::now();
    {
        fault_proxy proxy(upstream);
        int fd = raw_connect(proxy.port());
        REQUIRE(::send(fd, "ruok", 4, MSG_NOSIGNAL) == 4);  // four-letter word: not length-framed
        CHECK(read_all(fd) == "imok");
        ::close(fd);

        proxy.blackhole(true);
        int held = raw_connect(proxy.port());
        REQUIRE(::send(held, "ruok", 4, MSG_NOSIGNAL) == 4);
        pollfd p{held, POLLIN, 0};
        CHECK(::poll(&p, 1, 300) == 0);  // silence
        // The proxy is destroyed with the held connection open.
        ::close(held);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
}

TEST_CASE("fault_proxy: blackhole makes the client time out", "[harness]") {
    const std::string upstream = first_host(zkr::test::test_connect_string());
    fault_proxy proxy(upstream);
    session s(proxy.address(), 1500);
    REQUIRE(exists(s.get(), "/") == ZOK);

    proxy.blackhole(true);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = exists(s.get(), "/");
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK((rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT));
    CHECK(waited < 5s);
    CHECK(proxy.active_connections() >= 1);  // sockets stay open while blackholed
    proxy.blackhole(false);
}

TEST_CASE("zk_cluster: 3-server ensemble elects a new leader when the leader dies", "[harness]") {
    const auto t0 = std::chrono::steady_clock::now();
    zk_cluster cluster(3);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    WARN("3-server ensemble start took " << ms.count() << " ms");
    CHECK(ms < 60s);
    REQUIRE(cluster.size() == 3);

    const int old_leader = cluster.leader();
    REQUIRE(old_leader >= 1);
    REQUIRE(old_leader <= 3);

    session s(cluster.connect_string(), 4000);
    const std::string eph = unique_path("eph");
    REQUIRE(create(s.get(), eph, ZOO_EPHEMERAL) == ZOK);

    cluster.kill_server(old_leader);
    const auto t1 = std::chrono::steady_clock::now();
    const int new_leader = cluster.wait_for_leader(15s);
    const auto el = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t1);
    WARN("new leader " << new_leader << " after " << el.count() << " ms (old " << old_leader << ")");
    CHECK(new_leader != old_leader);
    CHECK(cluster.four_letter_word(old_leader, "ruok").empty());

    // The session survives the election.
    CHECK(retry_while_disconnected([&] { return exists(s.get(), eph); }) == ZOK);

    cluster.start_server(old_leader);
    CHECK(cluster.four_letter_word(old_leader, "srvr").find("Mode: follower") != std::string::npos);
    CHECK(cluster.leader() == new_leader);

    // Pause / resume a follower.
    const int follower = new_leader == 1 ? 2 : 1;
    cluster.pause_server(follower);
    CHECK(cluster.four_letter_word(follower, "ruok").empty());
    cluster.resume_server(follower);
    // A follower that missed the leader's pings rejoins first; it answers again once it has.
    std::string answer;
    for (auto deadline = std::chrono::steady_clock::now() + 15s; std::chrono::steady_clock::now() < deadline;) {
        answer = cluster.four_letter_word(follower, "ruok");
        if (answer == "imok") break;
        std::this_thread::sleep_for(100ms);
    }
    CHECK(answer == "imok");
}
