// zkr::testkit against real ZooKeeper servers: the ensemble (start, stop, kill, freeze, leader,
// four-letter words, the watchdog, the command line), the proxy (forwarding, counting, a lost reply,
// partition, delay), the session tools and the chroot helper, and bad input. The ensemble and proxy
// checks use the ZooKeeper C client directly, so that they test the kit and not zkr.
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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/use_future.hpp>

#include "testkit/process.hpp"
#include "support/child_process.hpp"
#include "support/servers.hpp"
#include "support/session_tools.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

using namespace std::chrono_literals;
using zkr::testkit::proxy;
using zkr::testkit::ensemble;

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

std::string selftest_path(const char* what) {
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

TEST_CASE("zkr::testkit::ensemble: standalone server starts and answers four-letter words", "[testkit]") {
    const auto t0 = std::chrono::steady_clock::now();
    zkr::testkit::ensemble cluster(zkr::test::own_servers(1));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    WARN("standalone start took " << ms.count() << " ms");
    CHECK(ms < 30s);  // generous: a JVM on a busy 2-core machine
    REQUIRE(cluster.size() == 1);
    REQUIRE(cluster.connect_string() == cluster.address(0));
    CHECK(cluster.four_letter_word(0, "ruok") == "imok");
    CHECK(cluster.four_letter_word(0, "srvr").find("Mode: standalone") != std::string::npos);
    CHECK(cluster.leader() == 0);
    CHECK(cluster.data_watch_count(0) == 0);

    session s(cluster.connect_string(), 4000);
    const std::string path = selftest_path("watched");
    REQUIRE(exists(s.get(), path, 1) == ZNONODE);  // leaves an exists watch
    CHECK(cluster.data_watch_count(0) == 1);
}

TEST_CASE("zkr::testkit::proxy: forwards, counts, and loses a create reply after the server applied it", "[testkit]") {
    const std::string upstream = first_host(zkr::test::test_connect_string());
    zkr::testkit::proxy proxy(upstream);
    session direct(upstream, 4000);
    session s(proxy.address(), 4000);
    REQUIRE(proxy.active_connections() == 1);
    const auto session_id = zoo_client_id(s.get())->client_id;
    const int disconnects_at_start = s.disconnects();

    const std::string a = selftest_path("a");
    REQUIRE(create(s.get(), a) == ZOK);
    CHECK(proxy.requests_seen(zkr::test::zk_op::create) + proxy.requests_seen(zkr::test::zk_op::create2) == 1);
    REQUIRE(exists(direct.get(), a) == ZOK);

    // Lost reply: the server creates the node, the client hears connection loss.
    const std::string b = selftest_path("b");
    proxy.lose_next_reply({zkr::test::zk_op::create, zkr::test::zk_op::create2});
    CHECK(exists(s.get(), a) == ZOK);  // other ops are not affected
    CHECK(create(s.get(), b) == ZCONNECTIONLOSS);
    CHECK(proxy.replies_lost() == 1);
    CHECK(exists(direct.get(), b) == ZOK);
    // Same session afterwards: the client reconnects through the proxy and finds its node.
    CHECK(retry_while_disconnected([&] { return exists(s.get(), b); }) == ZOK);
    CHECK(zoo_client_id(s.get())->client_id == session_id);
    // Session events reach the watcher on the C client's completion thread, while a synchronous
    // call returns from its IO thread: the call above can succeed before the watcher hears of
    // the disconnection and the reconnection (a rehearsal under load read CONNECTING here).
    CHECK(zkr::test::eventually([&] { return s.disconnects() == disconnects_at_start + 1 && s.state() == ZOO_CONNECTED_STATE; }));
    CHECK(proxy.replies_lost() == 1);  // one-shot

    // drop_all_connections: connection loss, then reconnect with the same session.
    const int before = s.disconnects();
    proxy.drop_connections();
    CHECK(retry_while_disconnected([&] { return exists(s.get(), a); }) == ZOK);
    CHECK(zkr::test::eventually([&] { return s.disconnects() == before + 1 && s.state() == ZOO_CONNECTED_STATE; }));
    CHECK(zoo_client_id(s.get())->client_id == session_id);

    // refuse_connections: the client cannot get back until it is switched off.
    proxy.refuse_connections(true);
    proxy.drop_connections();
    CHECK(exists(s.get(), a) == ZCONNECTIONLOSS);
    std::this_thread::sleep_for(300ms);
    CHECK(proxy.active_connections() == 0);
    proxy.refuse_connections(false);
    CHECK(retry_while_disconnected([&] { return exists(s.get(), a); }) == ZOK);

    // A large value crosses the proxy in many partial reads and writes.
    const std::string big_path = selftest_path("big");
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

TEST_CASE("zkr::testkit::proxy: a held reply waits for the client's next request, the connection stays open", "[testkit]") {
    const std::string upstream = first_host(zkr::test::test_connect_string());
    zkr::testkit::proxy proxy(upstream);
    session direct(upstream, 4000);
    session s(proxy.address(), 10000);
    const std::string path = selftest_path("held");

    proxy.hold_next_reply({zkr::test::zk_op::create, zkr::test::zk_op::create2}, path);
    std::promise<int> created;
    auto on_created = [](int rc, const char*, const void* p) {
        static_cast<std::promise<int>*>(const_cast<void*>(p))->set_value(rc);
    };
    REQUIRE(zoo_acreate(s.get(), path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, on_created, &created) == ZOK);
    auto reply = created.get_future();
    // The server applied it; its answer is held (the C client sends no ping while it waits).
    REQUIRE(zkr::test::eventually([&] { return exists(direct.get(), path) == ZOK; }));
    REQUIRE(zkr::test::eventually([&] { return proxy.replies_held() == 1; }));
    CHECK(reply.wait_for(500ms) == std::future_status::timeout);
    // Any request releases it, in order: the create's answer first.
    CHECK(exists(s.get(), path) == ZOK);
    REQUIRE(reply.wait_for(5s) == std::future_status::ready);
    CHECK(reply.get() == ZOK);
    CHECK(proxy.connections_accepted() == 1);
    CHECK(zoo_delete(direct.get(), path.c_str(), -1) == ZOK);
}

TEST_CASE("zkr::testkit::proxy: passes non-ZooKeeper bytes and shuts down while partitioned", "[testkit]") {
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
        zkr::testkit::proxy proxy(upstream);
        int fd = raw_connect(proxy.port());
        REQUIRE(::send(fd, "ruok", 4, MSG_NOSIGNAL) == 4);  // four-letter word: not length-framed
        CHECK(read_all(fd) == "imok");
        ::close(fd);

        proxy.partition(true);
        int held = raw_connect(proxy.port());
        REQUIRE(::send(held, "ruok", 4, MSG_NOSIGNAL) == 4);
        pollfd p{held, POLLIN, 0};
        CHECK(::poll(&p, 1, 300) == 0);  // silence
        // The proxy is destroyed with the held connection open.
        ::close(held);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
}

TEST_CASE("zkr::testkit::proxy: a partition makes the client time out, its connections stay open", "[testkit]") {
    const std::string upstream = first_host(zkr::test::test_connect_string());
    zkr::testkit::proxy proxy(upstream);
    session s(proxy.address(), 1500);
    REQUIRE(exists(s.get(), "/") == ZOK);

    proxy.partition(true);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = exists(s.get(), "/");
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK((rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT));
    CHECK(waited < 5s);
    CHECK(proxy.active_connections() >= 1);  // sockets stay open while partitioned
    proxy.partition(false);
}

TEST_CASE("zkr::testkit::proxy: hold_requests holds what the client sends and lets what the server sends through",
          "[testkit]") {
    const std::string connect = zkr::test::test_connect_string();
    zkr::testkit::proxy proxy(first_host(connect));
    zkr::client held(zkr::test::test_options(proxy.address())), other(zkr::test::test_options(connect));
    const std::string path = selftest_path("held-requests"), written = path + "-written";
    other.create(path, "0");
    auto watched = held.exists(path, zkr::set_watch);

    proxy.hold_requests(true);
    auto write = held.async_create(written, "", zkr::create_mode::persistent, boost::asio::use_future);
    // What the server sends still comes: another client's change fires the held client's watch.
    other.set_data(path, "1");
    auto event = watched.watch.wait(10s);
    REQUIRE(event);
    CHECK(event->type == zkr::event_type::changed);
    // What the client sent did not reach the server.
    CHECK(write.wait_for(500ms) == std::future_status::timeout);
    CHECK_FALSE(other.exists(written).exists);
    // Let go: it follows, intact, on the same connection.
    proxy.hold_requests(false);
    REQUIRE(write.wait_for(10s) == std::future_status::ready);
    CHECK(write.get().path == written);
    CHECK(other.exists(written).exists);
    CHECK(proxy.connections_accepted() == 1);
}

TEST_CASE("zkr::testkit::ensemble: 3-server ensemble elects a new leader when the leader dies", "[testkit]") {
    const auto t0 = std::chrono::steady_clock::now();
    zkr::testkit::ensemble cluster(zkr::test::own_servers(3));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    WARN("3-server ensemble start took " << ms.count() << " ms");
    CHECK(ms < 60s);
    REQUIRE(cluster.size() == 3);

    const int old_leader = cluster.leader();
    REQUIRE(old_leader >= 0);
    REQUIRE(old_leader <= 2);

    session s(cluster.connect_string(), 4000);
    const std::string eph = selftest_path("eph");
    REQUIRE(create(s.get(), eph, ZOO_EPHEMERAL) == ZOK);

    cluster.kill(old_leader);
    const auto t1 = std::chrono::steady_clock::now();
    const int new_leader = cluster.wait_for_leader(15s);
    const auto el = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t1);
    WARN("new leader " << new_leader << " after " << el.count() << " ms (old " << old_leader << ")");
    CHECK(new_leader != old_leader);
    CHECK(cluster.four_letter_word(old_leader, "ruok").empty());

    // The session survives the election.
    CHECK(retry_while_disconnected([&] { return exists(s.get(), eph); }) == ZOK);

    cluster.start(old_leader);
    CHECK(cluster.four_letter_word(old_leader, "srvr").find("Mode: follower") != std::string::npos);
    CHECK(cluster.leader() == new_leader);

    // Pause / resume a follower.
    const int follower = new_leader == 0 ? 1 : 0;
    cluster.freeze(follower);
    CHECK(cluster.four_letter_word(follower, "ruok").empty());
    cluster.thaw(follower);
    // A follower that missed the leader's pings rejoins first; it answers again once it has.
    std::string answer;
    for (auto deadline = std::chrono::steady_clock::now() + 15s; std::chrono::steady_clock::now() < deadline;) {
        answer = cluster.four_letter_word(follower, "ruok");
        if (answer == "imok") break;
        std::this_thread::sleep_for(100ms);
    }
    CHECK(answer == "imok");
}

namespace {

using zkr::test::eventually;

// Sets an environment variable for the scope, then puts the old value back.
class scoped_env {
public:
    scoped_env(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        ::setenv(name, value.c_str(), 1);
    }
    ~scoped_env() {
        if (old_) ::setenv(name_, old_->c_str(), 1);
        else ::unsetenv(name_);
    }

private:
    const char* name_;
    std::optional<std::string> old_;
};

// Whether any process runs a ZooKeeper server of `dir`. Processes start and end while /proc is
// walked (this suite's own among them): one gone before its cmdline is read is simply not one.
bool java_runs_in(const std::string& dir) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        auto text = zkr::testkit::detail::read_proc_file(static_cast<pid_t>(std::stol(name)), "cmdline");
        if (text && text->find(dir + "/") != std::string::npos && text->find("QuorumPeerMain") != std::string::npos) return true;
    }
    return false;
}

std::string fresh_parent(const char* what) {
    auto dir = std::filesystem::temp_directory_path() / ("zkr-testkit-test-" + std::string(what) + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

}  // namespace

TEST_CASE("zkr::testkit::ensemble: a standalone server stops, starts and restarts with its data, and is gone with "
          "the ensemble",
          "[testkit]") {
    std::string dir;
    {
        zkr::testkit::ensemble zk(zkr::test::own_servers(1));
        dir = zk.directory();
        REQUIRE(std::filesystem::exists(zk.server_log(0)));
        {
            session s(zk.connect_string(), 4000);
            REQUIRE(create(s.get(), "/kept") == ZOK);
        }
        zk.stop(0);
        CHECK_FALSE(zk.running(0));
        CHECK(zk.four_letter_word(0, "ruok", 500ms).empty());
        CHECK(zk.leader() == -1);
        zk.start(0);
        CHECK(zk.running(0));
        zk.restart(0);
        zk.kill(0);
        CHECK_FALSE(zk.running(0));
        zk.start(0);
        session s(zk.connect_string(), 4000);
        CHECK(exists(s.get(), "/kept") == ZOK);  // the data outlives stops, kills and restarts
        zk.freeze(0);
        CHECK(zk.frozen(0));
        CHECK(zk.running(0));
        CHECK(zk.leader() == -1);  // a frozen server is not asked
        zk.thaw(0);
        CHECK_FALSE(zk.frozen(0));
        CHECK(zk.wait_for_leader(10s) == 0);
    }
    CHECK_FALSE(std::filesystem::exists(dir));
    CHECK_FALSE(java_runs_in(dir));
}

// The JVM options the server of `dir` runs with that name a class-data-sharing archive.
std::string cds_option_of(const std::string& dir) {
    std::ifstream pid_file(dir + "/s0/pid");
    pid_t pid = 0;
    pid_file >> pid;
    auto cmdline = zkr::testkit::detail::read_proc_file(pid, "cmdline");
    if (!cmdline) return "(no process)";
    std::string found;
    std::stringstream args(*cmdline);
    for (std::string arg; std::getline(args, arg, '\0');)
        if (arg.find("Archive") != std::string::npos) found += arg;
    return found;
}

TEST_CASE("zkr::testkit::ensemble: servers start from a class-data-sharing archive once one stopped normally, and a "
          "killed one leaves none",
          "[testkit]") {
    const auto cache = std::filesystem::path(fresh_parent("cds"));
    ::setenv("ZKR_TESTKIT_CDS_DIR", cache.c_str(), 1);  // one process per test case: ours alone
    std::shared_ptr<void> unset(nullptr, [](void*) { ::unsetenv("ZKR_TESTKIT_CDS_DIR"); });
    auto archives = [&] {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(cache)) names.push_back(e.path().filename().string());
        return names;
    };
    {
        // No archive yet: the server is to write one as it exits; killed, it writes none.
        zkr::testkit::ensemble zk(zkr::test::own_servers(1));
        CHECK_THAT(cds_option_of(zk.directory()), Catch::StartsWith("-XX:ArchiveClassesAtExit=" + cache.string() + "/zookeeper-"));
        zk.kill(0);
        CHECK(archives().empty());  // neither an archive nor its half-written dump
        zk.start(0);
        CHECK_THAT(cds_option_of(zk.directory()), Catch::StartsWith("-XX:ArchiveClassesAtExit="));
        zk.stop(0);  // a normal exit: the archive is put in place
        auto names = archives();
        REQUIRE(names.size() == 1);
        CHECK_THAT(names[0], Catch::StartsWith("zookeeper-") && Catch::EndsWith(".jsa"));
        zk.start(0);
        CHECK(cds_option_of(zk.directory()) == "-XX:SharedArchiveFile=" + (cache / names[0]).string());
    }
    // Another ensemble (another process would do the same) starts from it at once, and serves.
    zkr::testkit::ensemble zk(zkr::test::own_servers(1));
    CHECK_THAT(cds_option_of(zk.directory()), Catch::StartsWith("-XX:SharedArchiveFile="));
    CHECK(zk.four_letter_word(0, "ruok") == "imok");
    // Turned off: nothing of it on the command line.
    auto options = zkr::test::own_servers(1);
    options.class_data_sharing = false;
    zkr::testkit::ensemble plain(options);
    CHECK(cds_option_of(plain.directory()).empty());
    std::filesystem::remove_all(cache);
}

TEST_CASE("zkr::testkit::ensemble: bad input is refused naming what was wrong, and a failed start leaves nothing",
          "[testkit]") {
    zkr::testkit::ensemble zk(zkr::test::own_servers(1));
    CHECK_THROWS_WITH(zk.kill(1), Catch::Contains("kill(1): no such server (the ensemble has 1, from 0)"));
    CHECK_THROWS_AS(zk.address(-1), std::out_of_range);
    CHECK_THROWS_WITH(zk.four_letter_word(0, "RUOK"), Catch::Contains("not a four-letter word"));
    zk.stop(0);
    CHECK_THROWS_WITH(zk.freeze(0), Catch::Contains("freeze(0): the server is not running"));
    CHECK_THROWS_WITH(zk.thaw(0), Catch::Contains("thaw(0): the server is not running"));
    CHECK_THROWS_WITH(zk.kill(0), Catch::Contains("kill(0): the server is not running"));

    auto options = zkr::test::own_servers(1);
    options.parent_directory = fresh_parent("bad");
    options.servers = 0;
    CHECK_THROWS_WITH(zkr::testkit::ensemble(options), Catch::Contains("0 servers"));
    options.servers = 1;
    options.java = "/nonexistent/java";
    CHECK_THROWS_WITH(zkr::testkit::ensemble(options), Catch::Contains("no Java runtime") && Catch::Contains("default-jre-headless"));
    options.java.clear();
    options.class_path = "/nonexistent/zookeeper.jar";
    CHECK_THROWS_WITH(zkr::testkit::ensemble(options), Catch::Contains("/nonexistent/zookeeper.jar") && Catch::Contains("does not exist"));
    // A server that cannot start (an unknown setting makes ZooKeeper exit): its log is in the
    // message, and nothing is left running or on disk.
    options.class_path.clear();
    options.server_config["clientPort"] = "not-a-port";
    options.start_timeout = 20s;
    // How it ended too: a server that exits at once with nothing in its log says it by its status.
    CHECK_THROWS_WITH(zkr::testkit::ensemble(options), Catch::Contains("server 0 exited (pid ") && Catch::Contains(", exit status ") &&
                                                           Catch::Contains("server.log"));
    CHECK(std::filesystem::is_empty(options.parent_directory));
    CHECK_FALSE(java_runs_in(options.parent_directory));
    std::filesystem::remove_all(options.parent_directory);

    CHECK_THROWS_AS(zkr::testkit::proxy("no-port-here"), std::invalid_argument);
    CHECK_THROWS_WITH(zkr::testkit::proxy("no-such-host.invalid:2181"), Catch::Contains("cannot resolve \"no-such-host.invalid:2181\""));
}

TEST_CASE("zkr::testkit::ensemble: ZKR_TESTKIT_CONNECT makes it that ensemble, and server control is refused", "[testkit]") {
    const std::string connect = zkr::test::test_connect_string();
    scoped_env external("ZKR_TESTKIT_CONNECT", connect);
    zkr::testkit::ensemble zk;
    CHECK(zk.external());
    CHECK(zk.connect_string() == connect);
    CHECK(zk.address(0) == first_host(connect));
    CHECK(zk.directory().empty());
    CHECK(zk.four_letter_word(0, "ruok") == "imok");
    CHECK_THROWS_WITH(zk.kill(0), Catch::Contains("external (ZKR_TESTKIT_CONNECT="));
    CHECK_THROWS_AS(zk.stop(0), std::logic_error);
    CHECK_THROWS_AS(zk.freeze(0), std::logic_error);
    // The session tools and the proxy work on it all the same.
    zkr::testkit::proxy p(zk.address(0));
    zkr::client c(zkr::test::test_options(p.address()));
    c.wait_connected(10s);
    auto old = c.session_id();
    CHECK(zkr::testkit::expire_session(c) == old);
}

TEST_CASE("zkr::testkit::ensemble: a test process killed outright leaves no server and no directory behind",
          "[testkit]") {
    zkr::test::child_process owner(std::string("exec ") + ZKR_TESTKIT_OWNER_BIN + " 3");
    auto dir_line = owner.read_line(60s);
    REQUIRE(dir_line);
    REQUIRE(dir_line->rfind("dir ", 0) == 0);
    const std::string dir = dir_line->substr(4);
    std::vector<pid_t> servers;
    for (int i = 0; i < 3; ++i) {
        auto line = owner.read_line(10s);
        REQUIRE(line);
        servers.push_back(static_cast<pid_t>(std::stol(line->substr(line->rfind(' ') + 1))));
    }
    REQUIRE(java_runs_in(dir));
    ::kill(owner.pid(), SIGKILL);
    CHECK(owner.wait(10s) == -1);  // killed, no exit code
    CHECK(eventually([&] { return !java_runs_in(dir) && !std::filesystem::exists(dir); }, 20s));
}

TEST_CASE("zkr::testkit: the zkr-testkit command starts servers that outlive it, controls and destroys them",
          "[testkit]") {
    const std::string dir = fresh_parent("cli") + "/zk";
    auto run = [](const std::string& args) {
        zkr::test::child_process p(std::string("exec ") + ZKR_TESTKIT_CLI_BIN + " " + args + " 2>/dev/null");
        std::string out;
        while (auto line = p.read_line(60s)) out += *line + "\n";
        return std::make_pair(p.wait(60s), out);
    };
    auto [started, connect] = run("start " + dir + " 3");
    REQUIRE(started == 0);
    connect.pop_back();
    CHECK(std::count(connect.begin(), connect.end(), ',') == 2);
    {
        auto zk = zkr::testkit::ensemble::attach(dir);
        CHECK(zk.connect_string() == connect);
        CHECK(zk.leader() >= 0);
    }  // attached: not stopped
    auto [leader_rc, leader] = run("leader " + dir);
    REQUIRE(leader_rc == 0);
    const int l = std::stoi(leader);
    CHECK(run("kill-server " + dir + " " + std::to_string(l)).first == 0);
    CHECK(run("start-server " + dir + " " + std::to_string(l)).first == 0);
    CHECK(run("4lw " + dir + " " + std::to_string(l) + " ruok").second == "imok\n");
    CHECK(run("freeze-server " + dir + " 9").first == 1);  // out of range: an error, not a crash
    CHECK(run("destroy " + dir).first == 0);
    CHECK_FALSE(std::filesystem::exists(dir));
    CHECK_FALSE(java_runs_in(dir));
    std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST_CASE("zkr::testkit::proxy: a delay holds every byte that long each way, in order, and zero sends what is held",
          "[testkit]") {
    // Before the session: its close may still answer the requests below (ZCLOSING).
    std::atomic<int> done{0}, failed{0};
    struct context {
        std::atomic<int>* done;
        std::atomic<int>* failed;
    };
    context ctx{&done, &failed};
    const std::string upstream = first_host(zkr::test::test_connect_string());
    zkr::testkit::proxy p(upstream);
    session s(p.address(), 8000);
    REQUIRE(exists(s.get(), "/") == ZOK);
    p.set_delay(100ms);
    auto t0 = std::chrono::steady_clock::now();
    CHECK(exists(s.get(), "/") == ZOK);
    auto round_trip = std::chrono::steady_clock::now() - t0;
    CHECK(round_trip >= 200ms);  // 100 ms each way
    // Many requests in flight, held: each answered, none lost, no connection dropped (the proxy
    // kept the stream whole and in order: the C client checks every reply's xid against its
    // requests and drops the connection at the first out of place).
    const std::string path = selftest_path("delayed");
    REQUIRE(create(s.get(), path) == ZOK);
    const int disconnects = s.disconnects();
    p.set_delay(std::chrono::hours(1));  // held until released below
    for (int i = 0; i < 200; ++i) {
        REQUIRE(zoo_aexists(s.get(), path.c_str(), 0,
                            [](int rc, const Stat*, const void* data) {
                                auto* c = static_cast<const context*>(data);
                                if (rc != ZOK) ++*c->failed;
                                ++*c->done;
                            },
                            &ctx) == ZOK);
    }
    CHECK(zkr::test::holds_throughout([&] { return done.load() == 0; }, 300ms));
    p.set_delay(0ms);  // what is held goes out at once, in order
    CHECK(eventually([&] { return done.load() == 200; }, 10s));
    CHECK(failed.load() == 0);
    CHECK(s.disconnects() == disconnects);
    CHECK(zoo_delete(s.get(), path.c_str(), -1) == ZOK);
}

TEST_CASE("zkr::testkit::expire_session: the client sees its session expire, its holds are lost, it goes on with a "
          "new one",
          "[testkit]") {
    const std::string connect = zkr::test::test_connect_string();
    zkr::client c(zkr::test::test_options(connect));
    zkr::mutex m(c, zkr::test::unique_path("testkit-expire"));
    auto hold = m.async_lock(boost::asio::use_future).get();
    auto old = c.session_id();
    CHECK(zkr::testkit::expire_session(c) == old);
    CHECK(c.session_id() != old);
    CHECK(hold.state() == zkr::lock_state::lost);  // lost by the time it returns
    c.wait_connected(10s);
    CHECK(c.session_count() == 2);
    // A client with no session yet: refused, naming why.
    zkr::client_options o = zkr::test::test_options("127.0.0.1:1");
    zkr::client nowhere(o);
    CHECK_THROWS_WITH(zkr::testkit::expire_session(nowhere), Catch::Contains("has no session"));
}

TEST_CASE("zkr::testkit::session_keeper and close_session: a session kept alive while its client is cut off, then "
          "closed from outside",
          "[testkit]") {
    const std::string connect = zkr::test::test_connect_string();
    zkr::testkit::proxy p(first_host(connect));
    zkr::client c(zkr::test::test_options(p.address(), 2000ms));
    zkr::mutex m(c, zkr::test::unique_path("testkit-keeper"));
    auto hold = m.async_lock(boost::asio::use_future).get();
    auto credentials = zkr::testkit::credentials_of(c);
    zkr::client observer(zkr::test::test_options(connect));
    {
        // Cut off first: a client that can still reach the server takes its session back from
        // the keeper, and the two move it to and fro (the server closes the other connection
        // each time a handle joins it).
        p.partition(true);
        zkr::testkit::session_keeper keeper(connect, credentials);
        // Past the client's own session timeout: the node stays, kept by the keeper.
        CHECK(zkr::test::holds_throughout([&] { return observer.exists(hold.node_path()).exists; }, 3s));
    }  // the keeper closes the session: the node goes
    CHECK(eventually([&] { return !observer.exists(hold.node_path()).exists; }, 10s));
    CHECK_THROWS_WITH(zkr::testkit::close_session(connect, credentials, 5s), Catch::Contains("is gone already"));
    p.partition(false);
    CHECK(eventually([&] { return hold.state() == zkr::lock_state::lost; }, 20s));
}

TEST_CASE("zkr::testkit::unique_chroot: each call gets a root of its own, made, under which a client works",
          "[testkit]") {
    const std::string connect = zkr::test::test_connect_string();
    auto a = zkr::testkit::unique_chroot(connect, "orders");
    auto b = zkr::testkit::unique_chroot(connect, "orders");
    CHECK(a != b);
    CHECK(a.rfind(connect + "/zkr-testkit/orders-", 0) == 0);
    {
        zkr::client in_a(zkr::test::test_options(a));
        in_a.create("/node", "x", zkr::create_mode::persistent);
        CHECK(in_a.exists("/node").exists);
    }
    zkr::client plain(zkr::test::test_options(connect));
    CHECK(plain.exists(a.substr(connect.size()) + "/node").exists);
    CHECK_FALSE(plain.exists(b.substr(connect.size()) + "/node").exists);
    CHECK_THROWS_AS(zkr::testkit::unique_chroot(a), std::invalid_argument);
    CHECK_THROWS_AS(zkr::testkit::unique_chroot(connect, "a/b"), std::invalid_argument);
}

TEST_CASE("zkr::testkit: zkr-testkit start with ZKR_TESTKIT_OWNER_PID stops its servers once that process ends",
          "[testkit]") {
    const std::string dir = fresh_parent("owner") + "/zk";
    zkr::test::child_process owner("exec cat");  // lives until its input ends
    {
        zkr::test::child_process start("ZKR_TESTKIT_OWNER_PID=" + std::to_string(owner.pid()) + " exec " +
                                       ZKR_TESTKIT_CLI_BIN + " start " + dir + " 1 2>/dev/null");
        REQUIRE(start.read_line(60s));
        REQUIRE(start.wait(10s) == 0);
    }
    REQUIRE(java_runs_in(dir));
    CHECK(zkr::test::holds_throughout([&] { return java_runs_in(dir); }, 1500ms));  // while the owner lives
    owner.close_input();
    REQUIRE(owner.wait(10s) == 0);
    CHECK(eventually([&] { return !java_runs_in(dir) && !std::filesystem::exists(dir); }, 20s));
    std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST_CASE("zkr::testkit::ensemble: keep_directory keeps the servers' directory and logs, with nothing running",
          "[testkit]") {
    auto options = zkr::test::own_servers(1);
    options.parent_directory = fresh_parent("keep");
    options.keep_directory = true;
    std::string dir;
    {
        zkr::testkit::ensemble zk(options);
        dir = zk.directory();
    }
    CHECK(std::filesystem::exists(dir + "/s0/server.log"));
    CHECK(std::filesystem::exists(dir + "/s0/zoo.cfg"));
    CHECK_FALSE(java_runs_in(dir));
    // The watchdog, told to keep it, did not remove it either.
    CHECK(zkr::test::holds_throughout([&] { return std::filesystem::exists(dir); }, 500ms));
    std::filesystem::remove_all(options.parent_directory);
}

TEST_CASE("zkr::testkit: zkr-testkit touches no directory that holds no ensemble, and an earlier start's watchdog "
          "leaves a later start alone",
          "[testkit]") {
    const std::string parent = fresh_parent("foreign");
    auto run = [](const std::string& command) {
        zkr::test::child_process p("exec " + command + " >/dev/null 2>&1");
        return p.wait(60s);
    };
    const std::string cli = ZKR_TESTKIT_CLI_BIN;
    // Someone's files: neither start nor destroy touches them.
    const std::string foreign = parent + "/mine";
    std::filesystem::create_directories(foreign);
    std::ofstream(foreign + "/precious") << "x";
    CHECK(run(cli + " start " + foreign + " 1") == 1);
    CHECK(run(cli + " destroy " + foreign) == 1);
    CHECK(std::filesystem::exists(foreign + "/precious"));
    // A start tied to an owner, destroyed; a second start in the same directory; the first
    // owner ends: its watchdog must not take the second start's servers with it.
    const std::string dir = parent + "/zk";
    zkr::test::child_process owner("exec cat");
    REQUIRE(run("env ZKR_TESTKIT_OWNER_PID=" + std::to_string(owner.pid()) + " " + cli + " start " + dir + " 1") == 0);
    REQUIRE(run(cli + " destroy " + dir) == 0);
    REQUIRE(run(cli + " start " + dir + " 1") == 0);
    owner.close_input();
    REQUIRE(owner.wait(10s) == 0);
    CHECK(zkr::test::holds_throughout([&] { return java_runs_in(dir); }, 2500ms));  // the watchdog looks every second
    CHECK(run(cli + " destroy " + dir) == 0);
    std::filesystem::remove_all(parent);
}

TEST_CASE("zkr::testkit::proxy: a partition holds what a delay held, even when the delay is set to zero", "[testkit]") {
    const std::string upstream = first_host(zkr::test::test_connect_string());
    zkr::testkit::proxy p(upstream);
    session s(p.address(), 8000);
    REQUIRE(exists(s.get(), "/") == ZOK);
    std::atomic<int> done{0};
    p.set_delay(std::chrono::hours(1));
    REQUIRE(zoo_aexists(s.get(), "/", 0, [](int, const Stat*, const void* data) { ++*static_cast<std::atomic<int>*>(const_cast<void*>(data)); },
                        &done) == ZOK);
    p.partition(true);
    p.set_delay(0ms);
    CHECK(zkr::test::holds_throughout([&] { return done.load() == 0; }, 500ms));  // nothing crosses a partition
    p.partition(false);
    CHECK(eventually([&] { return done.load() == 1; }, 10s));
}
