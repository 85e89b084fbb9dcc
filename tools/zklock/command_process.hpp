// The command `zklock run` runs: started without a shell, with the lock's environment and the
// signal mask zklock was started with, in a process group of its own that a watchdog process
// ends if zklock dies while it runs; signalled as a group, reaped by its pid, never a recycled one.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace zklock {

/// Remembers the descriptors zklock was started with (call first thing in main): the command
/// inherits those, and none of the ones zkr and the ZooKeeper client open later.
void remember_inherited_descriptors();

/// The program `name` names: itself when it has a '/', else the first executable in $PATH.
/// Throws zklock::failure (not_found 127, cannot_execute 126) naming it: checked before the
/// lock is taken, so a typo costs no wait.
std::string find_program(const std::string& name);

struct command_spec {
    std::string program;                                           ///< from find_program
    std::vector<std::string> argv;                                 ///< [0] as given
    std::vector<std::pair<std::string, std::string>> environment;  ///< set on top of ours
    /// If zklock ends while the command runs (kill -9, a crash), the watchdog sends its group
    /// this, then SIGKILL after `grace`.
    int end_signal = 15;
    std::chrono::milliseconds grace{10'000};
    std::string description;  ///< the command, shortened, for the watchdog's message
    std::string lock_path;    ///< for the watchdog's message
};

class command_process {
public:
    /// Starts the watchdog, then the command in the watchdog's process group. Throws
    /// zklock::failure when either cannot be started.
    explicit command_process(const command_spec& spec);
    /// If it still runs (zklock is failing: it may no longer hold the lock), SIGKILL to its
    /// group; reaps it and the watchdog; gives the terminal back.
    ~command_process();
    command_process(const command_process&) = delete;
    command_process& operator=(const command_process&) = delete;

    pid_t pid() const noexcept { return pid_; }
    bool running() const noexcept { return !wait_status_; }

    /// Sends `signal_number` to the command's process group while the command has not been
    /// reaped: the command and whatever it started there (the watchdog blocks it).
    void signal(int signal_number) noexcept;
    /// Reaps it if it has exited; true once it has. A stop of the command by job control
    /// (Ctrl-Z, or reading the terminal from the background) is acted on here: see job_stopped.
    bool try_reap() noexcept;
    /// Zklock was asked to stop (SIGTSTP): stops the command's group, then itself, as a job
    /// does; once continued, continues the group.
    void stop_with_command() noexcept;
    /// Its exit code, or 128 + N when it died of signal N. Only once reaped.
    int exit_status() const noexcept;
    /// "exited with status 3", "was killed by SIGKILL".
    std::string describe_exit() const;
    /// Once it has been reaped: the watchdog has nothing left to guard, and goes. What the
    /// command left running in its group runs on. Called by the destructor too.
    void dismiss_watchdog() noexcept;

private:
    void job_stopped(int signal_number) noexcept;
    void stop_zklock_too(int signal_number) noexcept;
    bool terminal_is_with(pid_t group) const noexcept;
    void give_terminal_to(pid_t group) noexcept;

    pid_t pid_ = -1;
    pid_t group_ = -1;       ///< the watchdog's pid: it leads the group
    int watchdog_pipe_ = -1; ///< our end; the watchdog sees end-of-file when zklock is gone
    int terminal_ = -1;      ///< /dev/tty, when zklock has a controlling terminal
    bool terminal_handed_over_ = false;
    std::optional<int> wait_status_;
};

}  // namespace zklock
