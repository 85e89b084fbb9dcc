#include "command_process.hpp"

#include "exit_codes.hpp"
#include "signals.hpp"

#include "duration.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char** environ;

namespace zklock {
namespace {

std::set<int> inherited_descriptors;

std::set<int> open_descriptors() {
    std::set<int> out;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
        int own = ::dirfd(dir);
        while (dirent* entry = ::readdir(dir)) {
            if (entry->d_name[0] == '.') continue;
            int fd = std::atoi(entry->d_name);
            if (fd != own) out.insert(fd);
        }
        ::closedir(dir);
    }
    return out;
}

// zkr's and the ZooKeeper client's descriptors (its socket, its wake-up pipe) are none of the
// command's business: close-on-exec for every descriptor zklock did not start with.
void keep_own_descriptors_from_command() {
    for (int fd : open_descriptors()) {
        if (inherited_descriptors.count(fd) == 0) ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
    }
}

bool is_executable_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Our environment with `extra` set (same-named variables replaced), as "NAME=value" strings.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& extra) {
    std::vector<std::string> out;
    for (char** entry = environ; entry && *entry; ++entry) {
        std::string_view variable(*entry);
        std::string_view name = variable.substr(0, variable.find('='));
        bool replaced = false;
        for (const auto& [extra_name, value] : extra) replaced = replaced || name == extra_name;
        if (!replaced) out.emplace_back(variable);
    }
    for (const auto& [name, value] : extra) out.push_back(name + "=" + value);
    return out;
}

std::vector<char*> as_argv(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

// The watchdog, in the child of a fork() of a multithreaded process: async-signal-safe calls
// only (no allocation, no locks). It leads the command's process group, so the group exists,
// and its number cannot be reused, as long as it lives; it blocks every signal but SIGKILL, so
// what zklock sends the group does not end it. It waits for end of file on its pipe: zklock
// holds the only write end, so that comes when zklock is gone, however it went.
[[noreturn]] void run_watchdog(int read_end, int write_end, const std::string& message, int end_signal,
                               std::chrono::milliseconds grace) noexcept {
    ::close(write_end);
    ::setpgid(0, 0);
    ::prctl(PR_SET_NAME, "zklock-watchdog");  // for ps -o comm and top; its arguments stay zklock's
    // The pipe on 3, /dev/null on stdin and stdout (a reader waiting for zklock's end of file
    // must not wait for ours), stderr kept for the one line; nothing else of zklock's held open.
    if (read_end != 3) {
        ::dup2(read_end, 3);
        ::close(read_end);
    }
    int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
        ::dup2(null_fd, STDIN_FILENO);
        ::dup2(null_fd, STDOUT_FILENO);
    }
    if (::close_range(4, ~0U, 0) != 0) {
        rlimit limit{};
        rlim_t highest = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY ? limit.rlim_cur : 65536;
        for (rlim_t fd = 4; fd < highest && fd < 65536; ++fd) ::close(static_cast<int>(fd));
    }
    char byte;
    ssize_t n;
    do n = ::read(3, &byte, 1);
    while (n < 0 && errno == EINTR);
    // Zklock is gone and its command may still run: unprotected once zklock's session expires.
    [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, message.data(), message.size());
    ::kill(0, end_signal);  // 0: our own group
    ::kill(0, SIGCONT);     // a stopped command must be able to act on it
    timespec left{static_cast<time_t>(grace.count() / 1000), static_cast<long>(grace.count() % 1000 * 1'000'000)};
    while (::nanosleep(&left, &left) != 0 && errno == EINTR) {}
    ::kill(0, SIGKILL);  // us too
    ::_exit(0);
}

}  // namespace

void remember_inherited_descriptors() { inherited_descriptors = open_descriptors(); }

std::string find_program(const std::string& name) {
    if (name.empty()) throw failure(exit_code::not_found, "the command is an empty string");
    if (name.find('/') != std::string::npos) {
        if (::access(name.c_str(), F_OK) != 0) throw failure(exit_code::not_found, "command not found: " + name);
        if (!is_executable_file(name)) throw failure(exit_code::cannot_execute, "command not executable: " + name);
        return name;
    }
    const char* search = std::getenv("PATH");
    std::string_view dirs = search && *search ? search : "/usr/local/bin:/usr/bin:/bin";
    bool seen_not_executable = false;
    while (true) {
        std::size_t colon = dirs.find(':');
        std::string dir(dirs.substr(0, colon));
        std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (is_executable_file(candidate)) return candidate;
        seen_not_executable = seen_not_executable || ::access(candidate.c_str(), F_OK) == 0;
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
    }
    if (seen_not_executable) throw failure(exit_code::cannot_execute, "command not executable: " + name);
    throw failure(exit_code::not_found, "command not found in PATH: " + name);
}

command_process::command_process(const command_spec& spec) {
    std::vector<std::string> arguments = spec.argv;
    std::vector<std::string> environment = environment_with(spec.environment);
    auto argv_pointers = as_argv(arguments);
    auto environment_pointers = as_argv(environment);
    std::string message = "zklock: zklock ended while '" + spec.description + "' ran under the lock on " +
                          spec.lock_path + ": sending its process group " + signal_name(spec.end_signal) +
                          ", SIGKILL in " + format_duration(spec.grace) + "\n";

    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) throw failure(exit_code::internal, std::string("pipe: ") + std::strerror(errno));
    // Every signal blocked from the watchdog's first instruction; ours back right after.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t watchdog = ::fork();
    if (watchdog == 0) run_watchdog(ends[0], ends[1], message, spec.end_signal, spec.grace);
    int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    ::close(ends[0]);
    if (watchdog < 0) {
        ::close(ends[1]);
        throw failure(exit_code::internal, std::string("cannot start zklock's watchdog: fork: ") + std::strerror(fork_error));
    }
    ::setpgid(watchdog, watchdog);  // as the watchdog does itself: the group must exist before the command joins it
    group_ = watchdog;
    watchdog_pipe_ = ends[1];
    terminal_ = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);

    // The command gets the signal mask zklock was started with, not the one zklock runs
    // under (which blocks the signals its event loop reads).
    keep_own_descriptors_from_command();
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setsigmask(&attributes, &original_signal_mask());
    posix_spawnattr_setpgroup(&attributes, group_);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    int error = posix_spawn(&pid_, spec.program.c_str(), nullptr, &attributes, argv_pointers.data(),
                            environment_pointers.data());
    posix_spawnattr_destroy(&attributes);
    if (error != 0) {
        pid_ = -1;
        dismiss_watchdog();
        exit_code code = error == ENOENT ? exit_code::not_found
                         : (error == EACCES || error == ENOEXEC || error == EPERM) ? exit_code::cannot_execute
                                                                                    : exit_code::internal;
        throw failure(code, "cannot run " + spec.program + ": " + std::strerror(error));
    }
}

command_process::~command_process() {
    if (pid_ > 0 && running()) {
        ::kill(-group_, SIGKILL);  // the watchdog too
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    }
    dismiss_watchdog();
}

void command_process::dismiss_watchdog() noexcept {
    if (terminal_ >= 0) {
        // The terminal goes back to zklock's group if the command's group still has it.
        if (terminal_is_with(group_)) give_terminal_to(::getpgrp());
        ::close(terminal_);
        terminal_ = -1;
    }
    if (group_ <= 0) return;
    ::kill(group_, SIGKILL);  // the watchdog alone: it would act on our end of file
    while (::waitpid(group_, nullptr, 0) < 0 && errno == EINTR) {}
    ::close(watchdog_pipe_);
    watchdog_pipe_ = -1;
    group_ = -1;
}

void command_process::signal(int signal_number) noexcept {
    if (pid_ > 0 && running() && group_ > 0) ::kill(-group_, signal_number);
}

bool command_process::try_reap() noexcept {
    while (running()) {
        int status = 0;
        pid_t r = ::waitpid(pid_, &status, WNOHANG | WUNTRACED);
        if (r != pid_) break;
        if (WIFSTOPPED(status)) job_stopped(WSTOPSIG(status));
        else if (WIFEXITED(status) || WIFSIGNALED(status)) wait_status_ = status;
    }
    return !running();
}

bool command_process::terminal_is_with(pid_t group) const noexcept {
    return terminal_ >= 0 && group > 0 && ::tcgetpgrp(terminal_) == group;
}

void command_process::give_terminal_to(pid_t group) noexcept {
    // SIGTTOU is blocked (block_handled_signals): allowed from the background too.
    if (terminal_ >= 0) ::tcsetpgrp(terminal_, group);
}

// The command is in a process group of its own, so that nothing of it survives zklock. Job
// control then needs zklock to do what a shell does for its jobs.
void command_process::job_stopped(int signal_number) noexcept {
    bool tty_stop = signal_number == SIGTTIN || signal_number == SIGTTOU;
    if (tty_stop && terminal_is_with(::getpgrp())) {
        // It wants the terminal zklock's job has: it gets it, and Ctrl-C and Ctrl-Z go to it
        // from now on.
        give_terminal_to(group_);
        terminal_handed_over_ = true;
        signal(SIGCONT);
    } else if (tty_stop || (signal_number == SIGTSTP && terminal_is_with(group_))) {
        // Stopped at the terminal (Ctrl-Z), or by it from the background: the job stops.
        stop_zklock_too(signal_number);
    }
    // Anything else (SIGSTOP, a SIGTSTP sent to it alone) is someone's doing on purpose: zklock
    // keeps its session, and waits for the command to go on.
}

void command_process::stop_with_command() noexcept {
    signal(SIGTSTP);
    stop_zklock_too(SIGTSTP);
}

void command_process::stop_zklock_too(int signal_number) noexcept {
    if (terminal_is_with(group_)) give_terminal_to(::getpgrp());
    stop_self(signal_number);
    // Continued: by the shell's fg (our group has the terminal again) or bg (it has not).
    if (terminal_handed_over_ && terminal_is_with(::getpgrp())) give_terminal_to(group_);
    signal(SIGCONT);
}

int command_process::exit_status() const noexcept {
    if (!wait_status_) return to_int(exit_code::internal);
    if (WIFSIGNALED(*wait_status_)) return signal_exit_status(WTERMSIG(*wait_status_));
    return WEXITSTATUS(*wait_status_);
}

std::string command_process::describe_exit() const {
    if (!wait_status_) return "is still running";
    if (WIFSIGNALED(*wait_status_)) return "was killed by " + signal_name(WTERMSIG(*wait_status_));
    return "exited with status " + std::to_string(WEXITSTATUS(*wait_status_));
}

}  // namespace zklock
