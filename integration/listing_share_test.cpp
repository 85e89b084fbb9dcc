// One listing per client per change (issue 23): waiters of one client that need a listing of
// the same lock path while one is in flight share the next one, and that one is always sent
// after what made them ask — so sharing never hides a change. Counted on the wire by a proxy that
// holds the client's traffic still while the waiters queue; nothing here depends on timing.
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/retry.hpp"
#include "zkr/shared_mutex.hpp"

#include <catch2/catch.hpp>

#include <mutex>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::testkit::proxy;
using zkr::test::first_server;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;
namespace zk_op = zkr::test::zk_op;

namespace {

// Listings of the lock path itself (a waiter's watches are set with getChildren of nodes in it).
std::size_t listings_seen(const zkr::testkit::proxy& proxy, const std::string& path) {
    return proxy.requests_seen(zk_op::get_children, path) + proxy.requests_seen(zk_op::get_children2, path);
}

// Returns once the proxy has seen whatever `c`'s waiters sent on the second listing's answer (a
// third listing too, were there one). The nodes exist before the second listing is sent (it goes
// once the first is answered), so first wait for it on the wire. A request sent after it is
// answered after it, and its completion runs after that listing's, in which the waiters send
// their next steps; a second request, sent after those, reaches the proxy after them.
void settle_listings(zkr::client& c, const zkr::testkit::proxy& proxy, const std::string& path, std::size_t before) {
    REQUIRE(eventually([&] { return listings_seen(proxy, path) - before >= 2; }));
    c.exists("/");
    c.exists("/");
}

// Waiters queued with async_lock; each releases as soon as it is granted, and the order of the
// grants is kept (fencing tokens: the nodes' czxids, in the order they were created).
struct granted_waiters {
    std::mutex mutex;
    std::vector<std::int64_t> tokens;
    std::vector<std::string> errors;

    template <class Lockable>
    void queue(Lockable& lockable) {
        lockable.async_lock([this](zkr::error_code ec, zkr::lock_hold hold) {
            std::lock_guard lock(mutex);
            if (ec) {
                errors.push_back(ec.message());
                return;
            }
            tokens.push_back(hold.fencing_token());
            hold.async_unlock([](zkr::error_code) {});
        });
    }
    std::size_t count() {
        std::lock_guard lock(mutex);
        return tokens.size() + errors.size();
    }
};

// A lock path held by a client of its own, and a client whose traffic goes through a proxy, with
// a zkr::mutex on that path: the proxied client's waiters queue behind the holder.
struct held_behind_proxy {
    std::string path;
    zkr::client holder_client;
    zkr::mutex holder;
    zkr::testkit::proxy proxy;
    zkr::client c;
    zkr::mutex m;

    explicit held_behind_proxy(const std::string& name, zkr::retry::policy_ptr retry = zkr::retry::default_policy())
        : path(unique_path(name)),
          holder_client(test_options(test_connect_string())),
          holder(holder_client, path),
          proxy(first_server(test_connect_string())),
          c(proxied_options(proxy, std::move(retry))),
          m(c, path) {
        holder.lock();
        c.wait_connected(10s);
    }
    static zkr::client_options proxied_options(const zkr::testkit::proxy& proxy, zkr::retry::policy_ptr retry) {
        auto options = test_options(proxy.address());
        options.retry_policy = std::move(retry);
        return options;
    }
    std::size_t creates() const { return proxy.requests_seen(zk_op::create) + proxy.requests_seen(zk_op::create2); }
};

}  // namespace

TEST_CASE("waiters of one client share a listing: two hundred queued while one is in flight cost two listings, and are served in order",
          "[listing_share]") {
    const int waiters = 200;
    held_behind_proxy q("listing-share");
    auto& [path, holder_client, holder, proxy, c, m] = q;
    auto listings_before = listings_seen(proxy, path);
    auto creates_before = q.creates();

    // Nothing this client sends is answered until every waiter has asked: the first listing is
    // in flight all along, and every other waiter's must wait for the one after it.
    proxy.partition(true);
    granted_waiters w;
    for (int i = 0; i < waiters; ++i) w.queue(m);
    proxy.partition(false);

    REQUIRE(eventually([&] { return queue_length(holder_client, path) == waiters + 1; }, 30s));
    settle_listings(c, proxy, path, listings_before);
    CHECK(listings_seen(proxy, path) - listings_before == 2);
    CHECK(q.creates() - creates_before == waiters);

    holder.unlock();
    REQUIRE(eventually([&] { return w.count() == waiters; }, 60s));
    std::lock_guard lock(w.mutex);
    CHECK(w.errors.empty());
    CHECK(std::is_sorted(w.tokens.begin(), w.tokens.end()));  // FIFO: in the order they queued
    CHECK(eventually([&] { return queue_length(holder_client, path) == 0; }));
}

// The ticket rule. B's create is sent after A's listing: were B answered by that listing (sent
// before it asked), it would not find its node there and would queue again with a second node.
TEST_CASE("a listing asked for while one is in flight is answered by the next one, which shows what changed since",
          "[listing_share]") {
    std::string path = unique_path("listing-ticket");
    zkr::client holder_client(test_options(test_connect_string()));
    zkr::shared_mutex holder(holder_client, path);
    holder.lock();

    zkr::testkit::proxy proxy(first_server(test_connect_string()));
    zkr::client c(test_options(proxy.address()));
    c.wait_connected(10s);
    zkr::shared_mutex rw(c, path);
    auto creates_before = proxy.requests_seen(zk_op::create) + proxy.requests_seen(zk_op::create2);
    auto listings_before = listings_seen(proxy, path);

    proxy.partition(true);
    granted_waiters w;
    w.queue(rw.write_lock());  // A: its create, then the listing in flight
    w.queue(rw.read_lock());  // B: its create after A's listing; its own listing waits for the next
    w.queue(rw.write_lock());  // C: shares B's
    proxy.partition(false);

    REQUIRE(eventually([&] { return queue_length(holder_client, path) == 4; }));
    settle_listings(c, proxy, path, listings_before);
    CHECK(proxy.requests_seen(zk_op::create) + proxy.requests_seen(zk_op::create2) - creates_before == 3);
    CHECK(listings_seen(proxy, path) - listings_before == 2);
    holder.unlock();
    REQUIRE(eventually([&] { return w.count() == 3; }));
    std::lock_guard lock(w.mutex);
    CHECK(w.errors.empty());
    CHECK(eventually([&] { return queue_length(holder_client, path) == 0; }));
}

// A shared listing lost between request and reply: the waiters it was to answer are all answered
// by its retry, and none of them fails, queues twice or is served out of turn.
TEST_CASE("a listing shared by waiters of one client whose reply is lost is retried for all of them",
          "[listing_share]") {
    held_behind_proxy q("listing-lost");
    auto& [path, holder_client, holder, proxy, c, m] = q;
    auto creates_before = q.creates();
    auto listings_before = listings_seen(proxy, path);

    proxy.partition(true);
    granted_waiters w;
    w.queue(m);  // A: its create, then the first listing
    w.queue(m);  // B and C: their creates, then one listing for both, sent once A's is answered
    w.queue(m);
    // Not A's listing, which answers A alone, but the next: the one B and C share.
    proxy.lose_next_reply({zk_op::get_children, zk_op::get_children2}, 1, path);
    proxy.partition(false);

    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    REQUIRE(eventually([&] { return queue_length(holder_client, path) == 4; }));
    // Every create was answered before the lost reply: no create was in doubt, none sent twice.
    CHECK(q.creates() - creates_before == 3);
    // A's, the lost one, and its retry (after the retry policy's sleep).
    CHECK(eventually([&] { return listings_seen(proxy, path) - listings_before == 3; }));
    holder.unlock();
    REQUIRE(eventually([&] { return w.count() == 3; }, 30s));
    std::lock_guard lock(w.mutex);
    CHECK(w.errors.empty());
    CHECK(w.tokens.size() == 3);
    CHECK(std::is_sorted(w.tokens.begin(), w.tokens.end()));
    CHECK(eventually([&] { return queue_length(holder_client, path) == 0; }));
}

// The same loss with no retries: the outcome (connection loss) reaches every waiter the listing
// was to answer, and each one's node is deleted; the waiter before them is untouched.
TEST_CASE("a listing shared by waiters of one client that fails answers all of them with its error, leaving no node",
          "[listing_share]") {
    held_behind_proxy q("listing-failed", std::make_shared<zkr::retry::retry_n_times>(0, 10ms));
    auto& [path, holder_client, holder, proxy, c, m] = q;

    proxy.partition(true);
    granted_waiters w;
    w.queue(m);  // A: its listing is answered, and its watches are sent before the shared listing
    w.queue(m);  // B and C: share the listing whose reply is lost
    w.queue(m);
    proxy.lose_next_reply({zk_op::get_children, zk_op::get_children2}, 1, path);
    proxy.partition(false);

    REQUIRE(eventually([&] { return proxy.replies_lost() == 1; }));
    REQUIRE(eventually([&] { return w.count() == 2; }));
    {
        std::lock_guard lock(w.mutex);
        CHECK(w.tokens.empty());
        REQUIRE(w.errors.size() == 2);
        for (auto& e : w.errors) CHECK(e == zkr::make_error_code(zkr::errc::connection_loss).message());
    }
    CHECK(eventually([&] { return queue_length(holder_client, path) == 2; }));  // the holder and A
    holder.unlock();
    REQUIRE(eventually([&] { return w.count() == 3; }));
    std::lock_guard lock(w.mutex);
    CHECK(w.tokens.size() == 1);
    CHECK(eventually([&] { return queue_length(holder_client, path) == 0; }));
}
