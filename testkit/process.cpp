#include "process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace zkr::testkit::detail {
namespace {

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
    std::vector<char*> out;
    out.reserve(argv.size() + 1);
    for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
    out.push_back(nullptr);
    return out;
}

// posix_spawn with a session of its own and only descriptors 0-2 (the rest closed in the child,
// whatever other threads of the test opened without O_CLOEXEC).
pid_t spawn_with(const std::vector<std::string>& argv, posix_spawn_file_actions_t& actions) {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    auto args = c_argv(argv);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("zkr::testkit: cannot start " + argv[0] + ": " + std::strerror(rc));
    return pid;
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    return spawn_with(argv, actions);
}

pid_t spawn_with_input(const std::vector<std::string>& argv, int stdin_fd) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    return spawn_with(argv, actions);
}

namespace {

// The whole file, or nullopt if it cannot be read to its end. open/read, not a stream: a /proc
// file of a process that ends while it is read fails with ESRCH, which libstdc++'s filebuf
// throws out of an istreambuf_iterator.
std::optional<std::string> read_whole(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string text;
    char chunk[4096];
    while (true) {
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            ::close(fd);
            return std::nullopt;  // gone meanwhile (ESRCH), or unreadable
        }
        if (n == 0) break;
        text.append(chunk, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return text;
}

}  // namespace

std::optional<std::string> read_proc_file(pid_t pid, const char* name) {
    if (pid <= 0) return std::nullopt;
    return read_whole("/proc/" + std::to_string(pid) + "/" + name);
}

char process_state(pid_t pid) {
    auto stat = read_proc_file(pid, "stat");
    if (!stat) return 0;
    // "pid (comm) S ...": the command may hold spaces and parentheses; the state follows the last ')'.
    auto close = stat->rfind(')');
    if (close == std::string::npos || close + 2 >= stat->size()) return 0;
    return (*stat)[close + 2];
}

std::optional<std::chrono::system_clock::time_point> process_start_time(pid_t pid) {
    auto stat = read_proc_file(pid, "stat");
    auto boot = read_whole("/proc/stat");  // "btime <seconds since the epoch>"
    if (!stat || !boot) return std::nullopt;
    auto close = stat->rfind(')');
    if (close == std::string::npos) return std::nullopt;
    // Fields after the command: state is field 3, starttime (clock ticks since boot) field 22.
    std::istringstream fields(stat->substr(close + 2));
    std::string field;
    for (int i = 3; i < 22 && fields >> field; ++i) {
    }
    unsigned long long ticks = 0;
    if (!(fields >> ticks)) return std::nullopt;
    auto at = boot->find("\nbtime ");
    if (at == std::string::npos) return std::nullopt;
    long long btime = std::atoll(boot->c_str() + at + 7);
    long hz = ::sysconf(_SC_CLK_TCK);
    if (btime <= 0 || hz <= 0) return std::nullopt;
    auto since_boot = std::chrono::milliseconds(static_cast<long long>(ticks * 1000 / static_cast<unsigned long long>(hz)));
    return std::chrono::system_clock::time_point(std::chrono::seconds(btime)) + since_boot;
}

bool process_runs(pid_t pid, const std::string& marker) {
    auto live = [](char state) { return state != 0 && state != 'Z' && state != 'X'; };
    if (!live(process_state(pid))) return false;
    auto cmdline = read_proc_file(pid, "cmdline");
    if (!cmdline) return false;  // ended meanwhile
    if (!cmdline->empty()) return cmdline->find(marker) != std::string::npos;
    // Empty while it is between two programs (the java launcher may exec itself again), and also
    // once it has ended (a zombie's is empty): running only if it still is, read after the cmdline.
    return live(process_state(pid));
}

void reap(pid_t pid) {
    if (pid <= 0) return;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) < 0 && errno == EINTR) {
    }
}

std::string reap_and_describe(pid_t pid, std::chrono::milliseconds timeout) {
    if (pid <= 0) return {};
    const auto until = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (true) {
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return {};  // not ours, or reaped already
        if (r == pid) break;
        if (std::chrono::steady_clock::now() >= until) return {};
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return {};
}

bool wait_gone(pid_t pid, const std::string& marker, std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (!process_runs(pid, marker)) {
            reap(pid);  // a zombie of ours until collected
            return true;
        }
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

bool wait_stopped(pid_t pid, std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
        char state = process_state(pid);
        if (state == 'T' || state == 't') break;
        if (state == 0 || state == 'Z' || state == 'X') return false;  // ended: it never will
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

std::string find_program(const std::string& program) {
    auto executable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
    };
    if (program.empty()) return {};
    if (program.find('/') != std::string::npos) return executable(program) ? program : std::string();
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        if (dir.empty()) dir = ".";
        std::string candidate = dir + "/" + program;
        if (executable(candidate)) return candidate;
    }
    return {};
}

}  // namespace zkr::testkit::detail
