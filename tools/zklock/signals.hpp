// The signals zklock handles itself, and signal names on the command line.
#pragma once

#include <csignal>
#include <optional>
#include <string>
#include <string_view>

namespace zklock {

/// What zklock reads from its event loop's signalfd instead of dying of it: every catchable
/// signal whose default action ends a process (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
/// SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT, the real-time signals), plus
/// SIGTSTP (job control) and SIGCHLD. Not these: SIGPIPE (its own stderr closed) and the ones
/// that report zklock's own fault or limit (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS,
/// SIGABRT, SIGXCPU, SIGXFSZ): they end zklock, and the watchdog of `run` ends its command.
const sigset_t& handled_signals();

/// Blocks handled_signals() and SIGTTOU in the calling thread (and the threads it starts later,
/// so call it before zkr starts any), and remembers the mask zklock was started with for the
/// command it runs. SIGTTOU stays blocked, never read: zklock may write to its terminal, or take
/// it back from its command, while its process group is in the background.
void block_handled_signals();

/// The signal mask zklock was started with: what its command gets.
const sigset_t& original_signal_mask();

/// Stops zklock with `signal_number` (SIGTSTP, SIGTTIN, SIGTTOU: their default action) as a
/// job is stopped, and returns once it is continued. It does not stop in an orphaned process
/// group (the kernel drops these signals there: nobody could continue it).
void stop_self(int signal_number);

/// SIGINT, SIGTERM or SIGHUP: the signals that end `tree` and `watch` quietly (exit status 0).
bool is_interruption(int signal_number);

/// "TERM", "SIGTERM", "term", "15", "RTMIN+2" -> the number; std::nullopt for anything else.
std::optional<int> parse_signal(std::string_view text);

/// "SIGTERM", "SIGRTMIN+2" (or "signal 42").
std::string signal_name(int signal_number);

}  // namespace zklock
