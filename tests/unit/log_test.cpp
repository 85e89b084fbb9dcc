#include "zk_log_bridge.hpp"
#include "zkr/log.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace log_test {

namespace {

struct captured {
    std::mutex mutex;
    std::vector<std::pair<zkr::log::level, std::string>> lines;
    std::vector<std::pair<zkr::log::level, std::string>> snapshot() {
        std::lock_guard lock(mutex);
        return lines;
    }
};

}  // namespace

TEST_CASE("the log queue is bounded behind a slow sink, and says what it dropped", "[log]") {
    captured got;
    zkr::log::set_sink([&](zkr::log::level l, std::string_view m) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard lock(got.mutex);
        got.lines.emplace_back(l, std::string(m));
    });
    constexpr int written = 20000;
    for (int i = 0; i < written; ++i) zkr::log::write(zkr::log::level::error, "line " + std::to_string(i));
    zkr::log::flush();
    zkr::log::set_sink({});
    auto lines = got.snapshot();
    std::uint64_t delivered = 0, dropped = 0;
    for (auto& [l, m] : lines) {
        if (m.rfind("line ", 0) == 0) ++delivered;
        else if (m.find("dropped") != std::string::npos) dropped += std::stoull(m.substr(m.find("dropped ") + 8));
    }
    CHECK(dropped > 0);
    CHECK(delivered + dropped == written);  // every line either reached the sink or was counted
    CHECK(delivered < written);
}

TEST_CASE("C client lines: reformatted, levels mapped, repeats held back with a count", "[log]") {
    captured got;
    zkr::log::set_sink([&](zkr::log::level l, std::string_view m) {
        std::lock_guard lock(got.mutex);
        got.lines.emplace_back(l, std::string(m));
    });
    // What the C client prints about a refused connection, many times a second in an outage.
    for (int i = 0; i < 200; ++i) {
        zkr::detail::forward_c_client_log(
            "2026-11-23 12:00:10,486:12508(0x7ffa13c1c6c0):ZOO_ERROR@handle_socket_error_msg@1001: Socket "
            "[127.0.0.1:2181] zk retcode=-4, errno=111(Connection refused): server refused to accept the client\n");
    }
    // An error that is not about the connection keeps its level.
    zkr::detail::forward_c_client_log("2026-11-23 12:00:10,486:12508(0x7f):ZOO_ERROR@deserialize_response@2: bad reply\n");
    zkr::log::flush();
    zkr::log::set_sink({});
    auto lines = got.snapshot();
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].first == zkr::log::level::warning);
    CHECK(lines[0].second.rfind("zookeeper C client: Socket [127.0.0.1:2181]", 0) == 0);
    CHECK(lines[0].second.find("2026-11-23") == std::string::npos);  // no C client prefix
    CHECK(lines[0].second.find("handle_socket_error_msg@1001") != std::string::npos);
    CHECK(lines[1].first == zkr::log::level::error);
    CHECK(lines[1].second.find("bad reply") != std::string::npos);
}

}  // namespace log_test
