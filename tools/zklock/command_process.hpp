// The command `zklock run` runs: started without a shell, with the lock's environment and the
// signal mask zklock was started with; signalled and reaped by its pid, never a recycled one.
#pragma once

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

class command_process {
public:
    /// Starts `program` with `argv` and our environment plus `extra_environment` (replacing
    /// variables of the same names). Throws zklock::failure when it cannot be started.
    command_process(const std::string& program, const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& extra_environment);
    /// Kills and reaps it if it still runs (zklock is failing: it may no longer hold the lock).
    ~command_process();
    command_process(const command_process&) = delete;
    command_process& operator=(const command_process&) = delete;

    pid_t pid() const noexcept { return pid_; }
    bool running() const noexcept { return !wait_status_; }

    /// Sends `signal_number` while it has not been reaped.
    void signal(int signal_number) noexcept;
    /// Reaps it if it has exited; true once it has.
    bool try_reap() noexcept;
    /// Its exit code, or 128 + N when it died of signal N. Only once reaped.
    int exit_status() const noexcept;
    /// "exited with status 3", "was killed by SIGKILL".
    std::string describe_exit() const;

private:
    pid_t pid_ = -1;
    std::optional<int> wait_status_;
};

}  // namespace zklock
