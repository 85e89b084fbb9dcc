// How zklock ends: its exit codes (sysexits(3) style) and the exception that carries one to main.
#pragma once

#include <stdexcept>
#include <string>

namespace zklock {

/// zklock's own exit codes. `run` otherwise exits with its command's status (128 + N when the
/// command died of signal N), so a command's own codes pass through unchanged.
enum class exit_code : int {
    success = 0,
    refused = 1,          ///< release-stale without --yes: it listed what it would remove, removed nothing
    usage = 64,           ///< EX_USAGE: bad arguments, lock path or connect string
    unavailable = 69,     ///< EX_UNAVAILABLE: the ensemble could not be reached, or the connection was lost
    lock_lost = 70,       ///< run: the lock (or lease) was lost while the command ran (the command was signalled)
    internal = 71,        ///< EX_OSERR: an operating-system or unexpected error
    timed_out = 75,       ///< EX_TEMPFAIL: the lock (or lease) was not acquired within --timeout (0: not free at once)
    no_permission = 77,   ///< EX_NOPERM: ZooKeeper refused our credentials or access to the path
    cannot_execute = 126, ///< run: the command exists but could not be executed
    not_found = 127,      ///< run: the command was not found
};

constexpr int to_int(exit_code code) noexcept { return static_cast<int>(code); }

/// The exit status for death by a signal (the shells' convention).
constexpr int signal_exit_status(int signal_number) noexcept { return 128 + signal_number; }

/// The table `zklock --help` and tools/zklock/README.md show.
const char* exit_code_table() noexcept;

/// Thrown to end zklock: main prints "zklock: <what()>" on stderr and exits with `code`.
class failure : public std::runtime_error {
public:
    failure(exit_code code, const std::string& message) : std::runtime_error(message), code_(to_int(code)) {}
    /// For codes outside the enum (128 + signal).
    failure(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
    int code() const noexcept { return code_; }

private:
    int code_;
};

}  // namespace zklock
