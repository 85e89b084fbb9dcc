#include "session.hpp"

#include "signals.hpp"

#include <zkr/log.hpp>
#include <zkr/retry.hpp>

#include <boost/asio/post.hpp>

#include <exception>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace zklock {
namespace asio = boost::asio;

void configure_logging(const connection_options& c) {
    zkr::log::set_threshold(c.verbose ? zkr::log::level::warning : zkr::log::level::error);
    zkr::log::set_sink([](zkr::log::level, std::string_view message) { std::cerr << "zklock: " << message << std::endl; });
}

namespace {

std::unique_ptr<zkr::client> make_client(const connection_options& c, std::optional<std::chrono::milliseconds> give_up_after) {
    zkr::client_options o;
    o.connect = c.connect;
    o.session_timeout = c.session_timeout;
    o.auth = c.auth;
    if (give_up_after) o.retry_policy = std::make_shared<zkr::retry::within>(zkr::retry::default_policy(), *give_up_after);
    try {
        return std::make_unique<zkr::client>(std::move(o));
    } catch (const std::invalid_argument& e) {
        throw failure(exit_code::usage, std::string(e.what()));
    }
}

// What the library said, without the error code's own text that system_error appends
// ("...: timed out connecting to ZooKeeper [zkr:3]").
std::string library_message(const zkr::system_error& e) {
    std::string text = e.what();
    std::string appended = ": " + e.code().what();
    if (text.size() > appended.size() && text.compare(text.size() - appended.size(), appended.size(), appended) == 0)
        text.erase(text.size() - appended.size());
    return text;
}

// The library's blocking wait_connected says why no session came: host names that do not
// resolve (DNS), nobody listening. It runs on a thread of its own, so that a signal still
// reaches the loop meanwhile; closing the client ends it early.
void wait_for_session(event_loop& loop, zkr::client& client, const connection_options& c, std::chrono::milliseconds timeout) {
    std::string doing = "connecting to " + c.connect;
    auto connected = std::make_shared<outcome<std::string>>();  // the value: why not
    std::thread waiter([&client, timeout, connected, executor = loop.context().get_executor()] {
        zkr::error_code ec;
        std::string why;
        try {
            client.wait_connected(timeout);
        } catch (const zkr::system_error& e) {
            ec = e.code();
            why = library_message(e);
        } catch (const std::exception& e) {
            ec = make_error_code(zkr::errc::system_error);
            why = e.what();
        }
        asio::post(executor, [connected, ec, why] {
            connected->error = ec;
            connected->value = why;
            connected->done = true;
        });
    });
    if (loop.run_until([&] { return connected->done; }) == event_loop::wake::signal) {
        client.close();
        waiter.join();
        fail_interrupted(loop, doing);
    }
    waiter.join();
    if (connected->error == zkr::errc::connect_timeout)
        throw failure(exit_code::unavailable, "cannot reach the ZooKeeper ensemble: " + connected->value);
    if (connected->error) fail_with(connected->error, doing);
}

// zkr does not create the connect string's chroot, and under a missing one every path reads as
// missing: a lock nobody holds, a queue that never fills. Said once, here, for every command.
void check_chroot(event_loop& loop, zkr::client& client, const connection_options& c, steady_time deadline) {
    auto slash = c.connect.find('/');
    if (slash == std::string::npos || c.connect.size() == slash + 1) return;
    std::string chroot = c.connect.substr(slash);
    auto found = std::make_shared<outcome<zkr::exists_result>>();
    client.async_exists("/", loop.completion(found));  // "/" is the chroot itself
    auto& root = await(loop, found, deadline, "looking for the chroot " + chroot);
    if (root.error) fail_with(root.error, "looking for the chroot " + chroot);
    if (!root.value.exists)
        throw failure(exit_code::usage, "the chroot \"" + chroot + "\" of the connect string " + c.connect +
                                            " does not exist on the ZooKeeper server: create it first (zklock does not)");
}

}  // namespace

std::unique_ptr<zkr::client> connect(event_loop& loop, const connection_options& c, std::chrono::milliseconds timeout,
                                     std::optional<std::chrono::milliseconds> give_up_after) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto client = make_client(c, give_up_after);
    wait_for_session(loop, *client, c, timeout);
    check_chroot(loop, *client, c, deadline);
    return client;
}

exit_code exit_code_for(const zkr::error_code& ec) {
    using zkr::errc;
    if (ec == errc::no_auth || ec == errc::auth_failed || ec == errc::invalid_acl) return exit_code::no_permission;
    if (ec == errc::invalid_path || ec == errc::bad_arguments || ec == errc::chroot_missing) return exit_code::usage;
    if (zkr::is_connection_trouble(ec) || ec == errc::connect_timeout || ec == errc::client_closed ||
        ec == errc::attempts_exhausted)
        return exit_code::unavailable;
    return exit_code::internal;
}

void fail_with(const zkr::error_code& ec, const std::string& doing) {
    throw failure(exit_code_for(ec), doing + ": " + ec.message());
}

void fail_interrupted(event_loop& loop, const std::string& doing) {
    int number = loop.take_signal().value_or(received_signal{SIGINT}).number;
    throw failure(signal_exit_status(number), doing + ": interrupted by " + signal_name(number));
}

}  // namespace zklock
