// A child process with a line protocol on its stdin/stdout (the Curator driver, for one).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <sys/types.h>

namespace zkr::test {

class child_process {
public:
    /// Runs `command` with /bin/sh -c; its stderr goes to ours.
    explicit child_process(const std::string& command);
    ~child_process();  // closes stdin, then kills it if it has not exited within 5 s
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    /// The next line of its stdout, or nullopt on end of file or after `timeout`.
    std::optional<std::string> read_line(std::chrono::milliseconds timeout = std::chrono::seconds(30));
    void write_line(const std::string& line);
    /// Closes its stdin (end of file: "finish now").
    void close_input();
    /// Waits for it to exit; returns its exit code (-1 if it did not exit in time or was signalled).
    int wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
    /// Waits for it to exit; its raw wait status (WIFSIGNALED...), nullopt if it did not exit in
    /// time. Tests never waitpid() a child_process themselves: its destructor would then signal
    /// a pid that may be another process's by now.
    std::optional<int> wait_status(std::chrono::milliseconds timeout = std::chrono::seconds(60));
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
    int in_ = -1, out_ = -1;
    std::string buffer_;
    bool exited_ = false;
    bool status_reaped_elsewhere_ = false;
    int status_ = 0;
};

}  // namespace zkr::test
