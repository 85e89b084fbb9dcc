#include "ports.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

namespace zkr::testkit::detail {
namespace {

// One pair per user: /tmp's sticky bit (and fs.protected_regular) keeps users out of each other's
// files; servers of two users that pick the same port meet the bind clash retry instead.
std::string lock_file() { return "/tmp/zkr-testkit-ports-" + std::to_string(::getuid()) + ".lock"; }
std::string reservation_file() { return "/tmp/zkr-testkit-ports-" + std::to_string(::getuid()) + ".reserved"; }

// Local ports in any state (listening, connected, TIME_WAIT) from /proc/net/tcp and tcp6.
std::set<int> ports_in_use() {
    std::set<int> used;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(table);
        std::string line;
        std::getline(in, line);  // header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string slot, local;
            fields >> slot >> local;
            auto colon = local.rfind(':');
            if (colon == std::string::npos) continue;
            used.insert(static_cast<int>(std::stoul(local.substr(colon + 1), nullptr, 16)));
        }
    }
    return used;
}

// Whether a listening socket could bind 127.0.0.1:port now.
bool bindable(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    ::close(fd);
    return ok;
}

// Holds the lock file for the lifetime of the object (other processes wait on it).
class file_lock {
public:
    file_lock() {
        fd_ = ::open(lock_file().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd_ < 0) throw std::runtime_error("zkr::testkit: cannot open " + lock_file() + ": " + std::strerror(errno));
        while (::flock(fd_, LOCK_EX) != 0) {
            if (errno != EINTR) throw std::runtime_error("zkr::testkit: cannot lock " + lock_file());
        }
    }
    ~file_lock() { ::close(fd_); }
    file_lock(const file_lock&) = delete;
    file_lock& operator=(const file_lock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace

std::vector<int> pick_ports(const std::string& directory, int count) {
    static std::mutex in_process;  // flock is per open file: threads of one process need this too
    std::lock_guard guard(in_process);
    file_lock lock;
    std::set<int> taken = ports_in_use();
    // Reservations of directories that still exist (another ensemble's, running or starting).
    std::string kept;
    {
        std::ifstream in(reservation_file());
        std::string line;
        while (std::getline(in, line)) {
            auto tab = line.find('\t');
            if (tab == std::string::npos) continue;
            std::string dir = line.substr(tab + 1);
            if (dir == directory || !std::filesystem::exists(dir)) continue;
            taken.insert(std::stoi(line.substr(0, tab)));
            kept += line + "\n";
        }
    }
    int lo = 32768, hi = 60999;
    {
        std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
        range >> lo >> hi;
    }
    int first = 10000, last = lo - 1;
    if (lo <= 12000) first = hi + 1, last = 65000;
    if (last - first < 1000)
        throw std::runtime_error("zkr::testkit: the ephemeral port range " + std::to_string(lo) + "-" + std::to_string(hi) +
                                 " leaves no room for servers' ports (below it from 10000, or above it to 65000)");
    std::mt19937 random{std::random_device{}()};
    std::uniform_int_distribution<int> pick(first, last);
    std::vector<int> ports;
    for (int tries = 0; static_cast<int>(ports.size()) < count; ++tries) {
        if (tries > 10000)
            throw std::runtime_error("zkr::testkit: no free ports found in " + std::to_string(first) + ".." + std::to_string(last));
        int p = pick(random);
        if (!taken.insert(p).second) continue;
        if (bindable(p)) ports.push_back(p);
    }
    for (int p : ports) kept += std::to_string(p) + "\t" + directory + "\n";
    std::string temporary = reservation_file() + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << kept;
    }
    std::filesystem::rename(temporary, reservation_file());
    return ports;
}

}  // namespace zkr::testkit::detail
