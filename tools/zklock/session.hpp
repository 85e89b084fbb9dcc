// zklock's ZooKeeper session: the client built from the command line, waiting for zkr's
// operations with a deadline, and zkr's errors turned into exit codes.
#pragma once

#include "event_loop.hpp"
#include "exit_codes.hpp"
#include "options.hpp"

#include <zkr/client.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace zklock {

/// Sends zkr's log to stderr ("zklock: ..."): errors only, or warnings too with --verbose.
void configure_logging(const connection_options& c);

/// A connected client for `c`, its retries bounded by `give_up_after` when given. Throws
/// exit_code::unavailable with the library's reason (naming the hosts, and DNS when they do not
/// resolve) when no session comes within `timeout`; a malformed connect string, or a chroot that
/// does not exist on the server, is a usage failure naming it.
std::unique_ptr<zkr::client> connect(event_loop& loop, const connection_options& c, std::chrono::milliseconds timeout,
                                     std::optional<std::chrono::milliseconds> give_up_after = std::nullopt);

/// The exit code for a zkr error: 69 for connection trouble, 77 for permissions, ...
exit_code exit_code_for(const zkr::error_code& ec);

/// Turns a zkr error into the failure zklock exits with; `doing` says what failed
/// ("listing /locks/x").
[[noreturn]] void fail_with(const zkr::error_code& ec, const std::string& doing);

/// Throws the failure for the signal the loop woke with (exit 128 + N), naming what it ended.
[[noreturn]] void fail_interrupted(event_loop& loop, const std::string& doing);

/// Runs the loop until `out` completes and returns it (its error included); throws
/// exit_code::unavailable when `deadline` passes first, or for a signal.
template <class Value>
outcome<Value>& await(event_loop& loop, const std::shared_ptr<outcome<Value>>& out, steady_time deadline,
                      const std::string& doing) {
    switch (loop.run_until([&] { return out->done; }, deadline)) {
        case event_loop::wake::done: return *out;
        case event_loop::wake::signal: fail_interrupted(loop, doing);
        case event_loop::wake::deadline: break;
    }
    throw failure(exit_code::unavailable, doing + ": no answer from the ensemble in time");
}

}  // namespace zklock
