#include "session.hpp"

#include "duration.hpp"
#include "signals.hpp"

#include <zkr/log.hpp>
#include <zkr/retry.hpp>

#include <iostream>
#include <stdexcept>

namespace zklock {

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

}  // namespace

std::unique_ptr<zkr::client> connect(event_loop& loop, const connection_options& c, std::chrono::milliseconds timeout,
                                     std::optional<std::chrono::milliseconds> give_up_after) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string doing = "connecting to " + c.connect;
    auto client = make_client(c, give_up_after);
    auto connected = std::make_shared<outcome<no_value>>();
    client->async_wait_connected(loop.completion(connected));
    auto woke = loop.run_until([&] { return connected->done; }, deadline);
    if (woke == event_loop::wake::done) {
        if (connected->error) fail_with(connected->error, doing);
        return client;
    }
    if (woke == event_loop::wake::signal) fail_interrupted(loop, doing);
    throw failure(exit_code::unavailable,
                  "cannot reach the ZooKeeper ensemble at " + c.connect + ": no session within " + format_duration(timeout));
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
