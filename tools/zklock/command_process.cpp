#include "command_process.hpp"

#include "exit_codes.hpp"
#include "signals.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

command_process::command_process(const std::string& program, const std::vector<std::string>& argv,
                                 const std::vector<std::pair<std::string, std::string>>& extra_environment) {
    std::vector<std::string> arguments = argv;
    std::vector<std::string> environment = environment_with(extra_environment);
    auto argv_pointers = as_argv(arguments);
    auto environment_pointers = as_argv(environment);

    // The command gets the signal mask zklock was started with, not the one zklock runs
    // under (which blocks the signals its event loop reads).
    keep_own_descriptors_from_command();
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setsigmask(&attributes, &original_signal_mask());
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
    int error = posix_spawn(&pid_, program.c_str(), nullptr, &attributes, argv_pointers.data(), environment_pointers.data());
    posix_spawnattr_destroy(&attributes);
    if (error != 0) {
        pid_ = -1;
        exit_code code = error == ENOENT ? exit_code::not_found
                         : (error == EACCES || error == ENOEXEC || error == EPERM) ? exit_code::cannot_execute
                                                                                    : exit_code::internal;
        throw failure(code, "cannot run " + program + ": " + std::strerror(error));
    }
}

command_process::~command_process() {
    if (pid_ > 0 && running()) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    }
}

void command_process::signal(int signal_number) noexcept {
    if (pid_ > 0 && running()) ::kill(pid_, signal_number);
}

bool command_process::try_reap() noexcept {
    if (!running()) return true;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) wait_status_ = status;
    return !running();
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
