// zkr and Curator 5.4 (Debian's libcurator-recipes-java) on the same lock paths.
#include "support/child_process.hpp"
#include "support/curator_driver.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using zkr::test::child_process;
using zkr::test::eventually;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;


TEST_CASE("Curator and zkr share one mutex: the counter stays exact", "[interop][mutex]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("interop-mutex"), counter = path + "-counter";
    zkr::client c(test_options(connect));
    c.create_parents(counter);
    c.set_data(counter, "0");

    constexpr int curator_threads = 2, curator_n = 50, zkr_threads = 2, zkr_n = 50;
    child_process java(zkr::test::curator_command("increment " + connect + " " + path + " " + counter + " " + std::to_string(curator_n) +
                               " " + std::to_string(curator_threads)));
    std::vector<std::thread> threads;
    for (int t = 0; t < zkr_threads; ++t) {
        threads.emplace_back([&] {
            zkr::mutex m(c, path);
            for (int i = 0; i < zkr_n; ++i) {
                std::lock_guard guard(m);
                int value = std::stoi(c.get_data(counter).data);
                c.set_data(counter, std::to_string(value + 1));
            }
        });
    }
    for (auto& t : threads) t.join();
    auto line = java.read_line(60s);
    REQUIRE(line);
    CHECK(line->rfind("done", 0) == 0);
    CHECK(java.wait() == 0);
    // Another session's last writes: on an ensemble our server may be a moment behind.
    CHECK(eventually([&] { return std::stoi(c.get_data(counter).data) == curator_threads * curator_n + zkr_threads * zkr_n; },
                     2s));
}

TEST_CASE("Curator and zkr see each other in one queue", "[interop][mutex]") {
    std::string connect = test_connect_string();
    std::string path = unique_path("interop-queue");
    zkr::client c(test_options(connect));
    zkr::mutex m(c, path);

    // Curator holds; zkr queues behind it and sees it as the holder.
    child_process holder(zkr::test::curator_command("hold " + connect + " " + path));
    auto acquired = holder.read_line();
    REQUIRE(acquired);
    REQUIRE(acquired->rfind("acquired ", 0) == 0);
    std::string curator_node = acquired->substr(9);
    CHECK_FALSE(m.try_lock());
    auto queue = m.participants();
    REQUIRE(queue.size() == 1);
    CHECK(queue[0].holds);
    CHECK(path + "/" + queue[0].node == curator_node);
    CHECK_FALSE(queue[0].owner.is_zkr());  // Curator writes its IP address

    std::promise<void> release;
    auto waiting = std::async(std::launch::async, [&] {
        // FIFO behind Curator's node. Bounded waits: a failed check must not leave this future's
        // destructor waiting for ever.
        if (!m.try_lock_for(60s)) return std::string{};
        auto node = m.node_path();
        release.get_future().wait_for(60s);
        m.unlock();
        return node;
    });
    REQUIRE(eventually([&] { return m.participants().size() == 2; }));
    holder.write_line("release");
    REQUIRE(holder.read_line() == std::optional<std::string>("released"));
    CHECK(holder.wait() == 0);
    REQUIRE(eventually([&] { return m.is_acquired_in_this_process(); }));

    // Now zkr holds; Curator queues behind it, and sees zkr's node first.
    child_process next(zkr::test::curator_command("wait-hold " + connect + " " + path));
    auto queued = next.read_line();
    REQUIRE(queued);
    REQUIRE(queued->rfind("queued ", 0) == 0);
    // Read through zkr's client, whose server may be a moment behind Curator's create.
    REQUIRE(eventually([&] { queue = m.participants(); return queue.size() == 2; }));
    CHECK(queue[0].holds);
    CHECK(queue[0].owner.is_zkr());
    CHECK(path + "/" + queue[1].node == queued->substr(7));
    release.set_value();
    CHECK(zkr::test::get_within(waiting, 10s, "zkr's hold") == path + "/" + queue[0].node);
    auto next_acquired = next.read_line();
    REQUIRE(next_acquired);
    CHECK(*next_acquired == "acquired " + queued->substr(7));
    next.write_line("release");
    CHECK(next.read_line() == std::optional<std::string>("released"));
    CHECK(next.wait() == 0);
}
