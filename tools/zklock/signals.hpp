// The signals zklock handles itself, and signal names on the command line.
#pragma once

#include <csignal>
#include <optional>
#include <string>
#include <string_view>

namespace zklock {

/// SIGINT, SIGTERM, SIGHUP and SIGCHLD: blocked in every thread from the start of main (before
/// zkr starts any), so they reach zklock only through its event loop's signalfd and never kill
/// it while it has a lock node to remove.
const sigset_t& handled_signals();

/// Blocks handled_signals() in the calling thread (and the threads it starts later), and
/// remembers the mask zklock was started with for the command it runs.
void block_handled_signals();

/// The signal mask zklock was started with: what its command gets.
const sigset_t& original_signal_mask();

/// "TERM", "SIGTERM", "term" or "15" -> 15; std::nullopt for anything else.
std::optional<int> parse_signal(std::string_view text);

/// "SIGTERM" (or "signal 42").
std::string signal_name(int signal_number);

}  // namespace zklock
