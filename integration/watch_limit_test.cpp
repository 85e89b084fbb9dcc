// The watches a reconnection sets again go to the server in one request (libzookeeper_mt 3.8);
// over the server's jute.maxbuffer it drops the connection, and the client reconnects and sends
// it again, for ever (measured: 10,000 waiters on one client, docs/operations.md). zkr refuses the
// watch that would take that request over client_options::max_request_size instead.
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::eventually;
using zkr::testkit::proxy;
using zkr::test::first_server;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

// Paths of one length (the base, "/", a padded number): each takes 4 + its length in the request.
std::string watched_path(const std::string& base, int i) {
    std::string n = std::to_string(i);
    return base + "/" + std::string(200 - n.size(), 'w') + n;
}

}  // namespace

TEST_CASE("a watch a reconnection could not set again is refused with too_many_watches, and the client still reconnects",
          "[watch_limit]") {
    std::string base = unique_path("watch-limit");
    zkr::testkit::proxy proxy(first_server(test_connect_string()));
    zkr::client c(test_options(proxy.address()));
    c.wait_connected(10s);
    const auto limit = zkr::client_options{}.max_request_size;
    const std::size_t per_watch = 4 + watched_path(base, 0).size();
    // The SetWatches request: its header, the relative zxid, three lists' lengths, then the paths.
    const int fits = static_cast<int>((limit - (8 + 8 + 12)) / per_watch);

    int accepted = 0;
    zkr::error_code ec;
    for (int i = 0; i < fits + 100 && !ec; ++i) {
        c.exists(watched_path(base, i), zkr::set_watch, ec);  // missing: an exists watch each
        if (!ec) ++accepted;
    }
    CHECK(ec == errc::too_many_watches);
    CHECK(accepted == fits);

    // Every connection is cut: the client reconnects and sets them all again in one request the
    // server takes, and they still fire.
    proxy.drop_connections();
    REQUIRE(eventually([&] { return proxy.connections_accepted() >= 2 && c.is_connected(); }, 15s));
    zkr::client other(test_options(test_connect_string()));
    other.create_parents(base);
    other.create(watched_path(base, 0), "");
    // Its watch fired and is gone: there is room for one more.
    REQUIRE(eventually([&] {
        zkr::error_code again;
        c.exists(watched_path(base, fits + 1), zkr::set_watch, again);
        return !again;
    }));
    CHECK(c.is_connected());
    auto accepted_connections = proxy.connections_accepted();
    CHECK(c.exists("/").exists);
    CHECK(proxy.connections_accepted() == accepted_connections);  // no reconnection loop
}

TEST_CASE("a lock waiter whose watch is refused fails with too_many_watches and leaves no node", "[watch_limit]") {
    std::string path = unique_path("watch-limit-lock");
    zkr::client holder_client(test_options(test_connect_string()));
    zkr::mutex holder(holder_client, path);
    holder.lock();

    auto options = test_options(test_connect_string());
    options.max_request_size = 4096;  // the least allowed: room for about 18 of the watches below
    zkr::client c(options);
    // Fill the client's room for watches.
    zkr::error_code ec;
    for (int i = 0; i < 100 && !ec; ++i) c.exists(watched_path(path + "-other", i), zkr::set_watch, ec);
    REQUIRE(ec == errc::too_many_watches);

    zkr::mutex waiter(c, path);
    try {
        waiter.try_lock_for(10s);
        FAIL("try_lock_for returned instead of failing with too_many_watches");
    } catch (const zkr::system_error& e) {
        CHECK(e.code() == errc::too_many_watches);
    }
    CHECK(eventually([&] { return queue_length(holder_client, path) == 1; }));  // the holder's alone
    holder.unlock();
}
