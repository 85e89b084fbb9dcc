#include "zk_cluster.hpp"

#include <fstream>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#ifndef ZKR_CLUSTER_SCRIPT
#error "define ZKR_CLUSTER_SCRIPT as a string literal with the absolute path of integration/zk-cluster.sh"
#endif

extern char** environ;

namespace zkr::test {
namespace {

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
        s.pop_back();
    std::size_t b = 0;
    while (b < s.size() && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n')) ++b;
    return s.substr(b);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        auto pos = s.find(sep, start);
        parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
        if (pos == std::string::npos) break;
        start = pos + 1;
    }
    return parts;
}

const char* signal_name(int sig) {
    switch (sig) {
        case SIGKILL: return "KILL";
        case SIGTERM: return "TERM";
        case SIGSTOP: return "STOP";
        case SIGCONT: return "CONT";
        case SIGINT: return "INT";
        case SIGHUP: return "HUP";
        case SIGQUIT: return "QUIT";
        case SIGABRT: return "ABRT";
        case SIGUSR1: return "USR1";
        case SIGUSR2: return "USR2";
        default: return nullptr;
    }
}

}  // namespace

int run_cluster_script(const std::vector<std::string>& args, std::string& out, std::string& err) {
    out.clear();
    err.clear();
    // Everything the child needs is prepared before fork(): the test process is multi-threaded.
    std::vector<std::string> argv_store;
    argv_store.emplace_back("/bin/bash");
    argv_store.emplace_back(ZKR_CLUSTER_SCRIPT);
    argv_store.insert(argv_store.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_store) argv.push_back(a.data());
    argv.push_back(nullptr);

    std::vector<std::string> env_store;
    for (char** e = environ; e && *e; ++e) {
        if (std::strncmp(*e, "ZK_CLUSTER_OWNER_PID=", 21) == 0) continue;
        env_store.emplace_back(*e);
    }
    env_store.push_back("ZK_CLUSTER_OWNER_PID=" + std::to_string(::getpid()));
    std::vector<char*> envp;
    for (auto& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);

    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
        ::close(out_pipe[0]);
        ::close(out_pipe[1]);
        throw std::runtime_error("pipe2 failed");
    }
    const long max_fd = ::sysconf(_SC_OPEN_MAX);

    pid_t pid = ::fork();
    if (pid < 0) {
        for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
        throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
        // Child: only async-signal-safe calls from here on.
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::dup2(out_pipe[1], 1);
        ::dup2(err_pipe[1], 2);
        // Do not leak the test's sockets (proxy listeners, client connections) into the servers.
        if (::close_range(3, ~0U, 0) != 0) {
            for (long fd = 3; fd < max_fd && fd < 65536; ++fd) ::close(static_cast<int>(fd));
        }
        // Default signal dispositions and an empty mask for the script and its servers.
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);
        ::execve(argv[0], argv.data(), envp.data());
        const char msg[] = "zk_cluster: execve(/bin/bash) failed\n";
        [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);

    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&out, &err};
    int open_count = 2;
    char buf[4096];
    while (open_count > 0) {
        int r = ::poll(fds, 2, -1);
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < 2; ++k) {
            if (fds[k].fd < 0 || fds[k].revents == 0) continue;
            ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
            if (n > 0) {
                sinks[k]->append(buf, static_cast<std::size_t>(n));
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                ::close(fds[k].fd);
                fds[k].fd = -1;
                --open_count;
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) ::close(f.fd);

    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string zk_cluster::run(const std::vector<std::string>& args) const {
    std::string out, err;
    int rc = run_cluster_script(args, out, err);
    if (rc != 0) {
        std::string cmd;
        for (auto& a : args) cmd += " " + a;
        throw std::runtime_error("zk-cluster.sh" + cmd + " failed (rc " + std::to_string(rc) + "): " + err);
    }
    return out;
}

zk_cluster::zk_cluster(int servers) : servers_(servers) {
    if (servers < 1 || servers > 9) throw std::invalid_argument("zk_cluster: servers must be 1..9");
    char tmpl[] = "/tmp/zkr-cluster-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
        throw std::runtime_error(std::string("zk_cluster: mkdtemp failed: ") + std::strerror(errno));
    dir_ = tmpl;
    std::string out, err;
    int rc = run_cluster_script({"start", dir_, std::to_string(servers)}, out, err);
    if (rc != 0) {
        std::string o2, e2;
        run_cluster_script({"destroy", dir_}, o2, e2);
        throw std::runtime_error("zk_cluster: starting " + std::to_string(servers) +
                                 " server(s) failed (rc " + std::to_string(rc) + "):\n" + err);
    }
    connect_ = trim(out);
    for (auto& hp : split(connect_, ',')) {
        auto colon = hp.rfind(':');
        if (colon == std::string::npos) continue;
        ports_.push_back(std::atoi(hp.c_str() + colon + 1));
    }
    if (static_cast<int>(ports_.size()) != servers) {
        std::string o2, e2;
        run_cluster_script({"destroy", dir_}, o2, e2);
        throw std::runtime_error("zk_cluster: unexpected connect string from script: '" + connect_ + "'");
    }
}

zk_cluster::~zk_cluster() {
    std::string out, err;
    try {
        run_cluster_script({"destroy", dir_}, out, err);
    } catch (...) {
    }
}

void zk_cluster::check_index(int i) const {
    if (i < 1 || i > servers_)
        throw std::out_of_range("zk_cluster: server index " + std::to_string(i) + " not in 1.." +
                                std::to_string(servers_));
}

void zk_cluster::stop_server(int i) {
    check_index(i);
    run({"stop-server", dir_, std::to_string(i)});
}

void zk_cluster::kill_server(int i, int signal) {
    check_index(i);
    const char* name = signal_name(signal);
    run({"kill-server", dir_, std::to_string(i), name ? std::string(name) : std::to_string(signal)});
}

void zk_cluster::start_server(int i) {
    check_index(i);
    run({"start-server", dir_, std::to_string(i)});
}

void zk_cluster::pause_server(int i) { kill_server(i, SIGSTOP); }
void zk_cluster::resume_server(int i) { kill_server(i, SIGCONT); }

int zk_cluster::client_port(int i) const {
    check_index(i);
    return ports_[static_cast<std::size_t>(i - 1)];
}

std::string zk_cluster::server_address(int i) const { return "127.0.0.1:" + std::to_string(client_port(i)); }

std::string zk_cluster::four_letter_word(int i, const std::string& word) const {
    const int port = client_port(i);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    auto remaining_ms = [&] {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
                      .count();
        return ms > 0 ? static_cast<int>(ms) : 0;
    };
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return {};
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } guard{fd};
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        if (errno != EINPROGRESS) return {};
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, remaining_ms()) <= 0) return {};
        int soerr = 0;
        socklen_t len = sizeof soerr;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        if (soerr != 0) return {};
    }
    std::size_t sent = 0;
    while (sent < word.size()) {
        ssize_t n = ::send(fd, word.data() + sent, word.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd p{fd, POLLOUT, 0};
            if (::poll(&p, 1, remaining_ms()) <= 0) return {};
            continue;
        }
        return {};
    }
    std::string reply;
    char buf[4096];
    while (true) {
        pollfd p{fd, POLLIN, 0};
        int r = ::poll(&p, 1, remaining_ms());
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return {};  // no complete answer in time
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            reply.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0) {
            return reply;
        } else if (errno != EINTR && errno != EAGAIN) {
            return reply;
        }
    }
}

int zk_cluster::watch_count(int i) const {
    const std::string reply = four_letter_word(i, "wchs");
    const std::string key = "Total watches:";
    auto pos = reply.find(key);
    if (pos == std::string::npos) return -1;
    return std::atoi(reply.c_str() + pos + key.size());
}

int zk_cluster::all_watch_count(int i) const {
    const std::string reply = four_letter_word(i, "mntr");
    const std::string key = "zk_watch_count\t";
    auto pos = reply.find(key);
    if (pos == std::string::npos) return -1;
    return std::atoi(reply.c_str() + pos + key.size());
}

int zk_cluster::leader() const {
    for (int i = 1; i <= servers_; ++i) {
        const std::string reply = four_letter_word(i, "srvr");
        if (reply.find("Mode: leader") != std::string::npos) return i;
        if (servers_ == 1 && reply.find("Mode: standalone") != std::string::npos) return i;
    }
    return 0;
}

int zk_cluster::wait_for_leader(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (int l = leader(); l > 0) return l;
        if (std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("zk_cluster: no leader after " + std::to_string(timeout.count()) + " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

namespace {
std::mutex shared_mutex;
std::unique_ptr<zk_cluster> shared_cluster;  // destroyed at exit, which stops the servers
}  // namespace

bool using_external_ensemble() {
    const char* env = std::getenv("ZK_CONNECT");
    return env != nullptr && *env != '\0';
}

std::string test_connect_string() {
    if (using_external_ensemble()) {
        // Said out loud: every test that asks for "a server" now runs against someone else's.
        static std::once_flag announced;
        std::call_once(announced, [] {
            std::fprintf(stderr,
                         "\n*** ZK_CONNECT is set: tests that need a server use %s, not the harness's own.\n"
                         "*** Tests that stop, pause or count servers still start servers of their own.\n\n",
                         std::getenv("ZK_CONNECT"));
        });
        return std::getenv("ZK_CONNECT");
    }
    // Under ctest a fixture has started one server for the whole run and left its address here.
    if (const char* file = std::getenv("ZKR_TEST_CONNECT_FILE"); file && *file) {
        std::ifstream in(file);
        std::string connect;
        if (in && std::getline(in, connect) && !connect.empty()) return connect;
    }
    std::lock_guard<std::mutex> lock(shared_mutex);
    if (!shared_cluster) shared_cluster = std::make_unique<zk_cluster>(1);
    return shared_cluster->connect_string();
}

}  // namespace zkr::test
