// Input the server cannot take is refused before anything is sent, with a clear error, and
// deadlines too far off saturate instead of overflowing (issue 19, items 5, 7, 8 and 9a).
#include "support/background_lock.hpp"
#include "support/session_tools.hpp"
#include "support/zk_cluster.hpp"
#include "client_impl.hpp"
#include "zkr/client.hpp"
#include "zkr/log.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using steady = std::chrono::steady_clock;
using zkr::errc;
using zkr::test::eventually;
using zkr::test::lock_side;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

// ------------------------------------------------------------------ item 8: other input

TEST_CASE("a connect string with a semicolon or an empty host is refused at construction", "[input_limits]") {
    zkr::client_options o;
    o.connect = "127.0.0.1:2181;127.0.0.1:2182";
    CHECK_THROWS_WITH(zkr::client(o), Contains("zkr::client_options::connect") && Contains("';'"));
    o.connect = "[]:2181";
    CHECK_THROWS_WITH(zkr::client(o), Contains("zkr::client_options::connect") && Contains("no host"));
}
