// Internal: the server processes of zkr::testkit — starting one, telling whether it still runs
// (by pid and by a marker on its command line, so a reused pid is never taken for it), signalling
// it and waiting for it to go.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace zkr::testkit::detail {

/// Starts `argv` in a session of its own (terminal signals aimed at the test do not reach it),
/// in `cwd`, stdin from /dev/null, stdout and stderr appended to `log`, no other descriptor of
/// ours. Throws std::runtime_error naming the program when it cannot be started.
pid_t spawn(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log);

/// Starts `argv` with `stdin_fd` as its standard input (nothing else of ours), in a session of
/// its own; /dev/null for its output.
pid_t spawn_with_input(const std::vector<std::string>& argv, int stdin_fd);

/// The whole of /proc/PID/NAME, or nullopt when it cannot be read: no such process, or it ended
/// while being read (never throws, whenever the process goes).
std::optional<std::string> read_proc_file(pid_t pid, const char* name);
/// When `pid` started (whole 1/CLK_TCK ticks, so to a hundredth of a second), nullopt when there
/// is no such process: tells a process from a later one that took its pid over.
std::optional<std::chrono::system_clock::time_point> process_start_time(pid_t pid);
/// The state letter of /proc/PID/stat (R, S, D, T, Z, ...), 0 when there is no such process.
char process_state(pid_t pid);
/// Whether `pid` runs (a stopped one too, not a zombie) and its command line contains `marker`
/// (or is empty: the process is between two programs, as when the java launcher execs again).
bool process_runs(pid_t pid, const std::string& marker);
/// Collects `pid`'s exit status if it is our child and has ended (never blocks).
void reap(pid_t pid);
/// How a child of this process that is ending did ("exit status 1", "killed by signal 9"),
/// reaping it: waits up to `timeout` for it to become reapable (a process read as gone may still
/// be on its way out). Empty if it is not ours, has not ended by then, or was reaped already.
std::string reap_and_describe(pid_t pid, std::chrono::milliseconds timeout);
/// Waits until `pid` no longer runs as `marker` (reaping it), up to `timeout`; false if it still does.
bool wait_gone(pid_t pid, const std::string& marker, std::chrono::milliseconds timeout);
/// Waits until `pid` is stopped (SIGSTOP taken), up to `timeout`.
bool wait_stopped(pid_t pid, std::chrono::milliseconds timeout);

/// The absolute path of `program` (a path, or a name looked up on the PATH), "" if not found or
/// not executable.
std::string find_program(const std::string& program);

}  // namespace zkr::testkit::detail
