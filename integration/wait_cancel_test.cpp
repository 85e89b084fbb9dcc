// Every wait honours per-operation cancellation and completes where its handler asks: the
// client's waits for a connection and a state, a watch's wait, a hold's wait for its loss.
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/path.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <future>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::errc;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

template <class Future>
zkr::error_code error_of(Future& f) {
    return zkr::test::error_of(f, 10s);
}

}  // namespace

TEST_CASE("async_wait_connected and async_next_state end with their cancellation", "[client][cancel]") {
    // Nothing listens there: no connection, no state change comes.
    zkr::client c(test_options("127.0.0.1:1"));
    asio::cancellation_signal connected_cancel, state_cancel;
    auto connected = c.async_wait_connected(asio::bind_cancellation_slot(connected_cancel.slot(), asio::use_future));
    auto state = c.async_next_state(asio::bind_cancellation_slot(state_cancel.slot(), asio::use_future));
    CHECK(connected.wait_for(200ms) == std::future_status::timeout);
    connected_cancel.emit(asio::cancellation_type::terminal);
    CHECK(error_of(connected) == errc::cancelled);
    CHECK(state.wait_for(10ms) == std::future_status::timeout);
    state_cancel.emit(asio::cancellation_type::partial);
    CHECK(error_of(state) == errc::cancelled);
    // Another wait, not cancelled, still ends with the client.
    auto other = c.async_wait_connected(asio::use_future);
    c.close();
    CHECK(error_of(other) == errc::client_closed);
}

TEST_CASE("a hold's async_wait_lost ends with its cancellation and the hold stays", "[async_hold][cancel]") {
    std::string path = unique_path("wait-lost-cancel");
    zkr::client c(test_options(test_connect_string()));
    zkr::mutex m(c, path);
    zkr::lock_hold hold = m.async_lock(asio::use_future).get();
    asio::cancellation_signal cancel;
    auto lost = hold.async_wait_lost(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
    CHECK(lost.wait_for(50ms) == std::future_status::timeout);
    cancel.emit(asio::cancellation_type::terminal);
    CHECK(error_of(lost) == errc::cancelled);
    CHECK(hold.state() == zkr::lock_state::held);
    hold.unlock();

    // The blocking side's wait too.
    m.lock();
    asio::cancellation_signal cancel_blocking;
    auto lost_blocking = m.async_wait_lost(asio::bind_cancellation_slot(cancel_blocking.slot(), asio::use_future));
    cancel_blocking.emit(asio::cancellation_type::terminal);
    CHECK(error_of(lost_blocking) == errc::cancelled);
    CHECK(m.state() == zkr::lock_state::held);
    m.unlock();
}

TEST_CASE("a watch's async operations carry the client's executor", "[client][cancel]") {
    std::string path = unique_path("watch-executor");
    zkr::client c(test_options(test_connect_string()));
    c.create_parents(zkr::parent_path(path));  // not left to another test: it may run first, or alone
    c.create(path);
    auto w = c.exists(path, zkr::set_watch).watch;
    REQUIRE(w.valid());
    CHECK(w.get_executor() == c.get_executor());
    CHECK_FALSE(zkr::watch().get_executor());
    // A deferred wait completes on the executor the initiation names, with no executor of its own.
    std::promise<std::thread::id> ran_on;
    auto deferred = w.async_wait(asio::deferred);
    std::move(deferred)([&](zkr::error_code, zkr::watch_event) { ran_on.set_value(std::this_thread::get_id()); });
    c.set_data(path, "x");
    auto future = ran_on.get_future();
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    std::promise<std::thread::id> executor_thread;
    asio::post(c.get_executor(), [&] { executor_thread.set_value(std::this_thread::get_id()); });
    CHECK(future.get() == executor_thread.get_future().get());
}
