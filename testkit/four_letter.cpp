// Four-letter words: one TCP connection to a server's client port, the word, the answer to EOF.
#include "address.hpp"
#include "zkr/testkit/ensemble.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <stdexcept>

namespace zkr::testkit {
namespace {

using clock_type = std::chrono::steady_clock;

int remaining_ms(clock_type::time_point until) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now()).count();
    return static_cast<int>(std::max<long long>(0, left));
}

}  // namespace

std::string four_letter_word(const std::string& address, const std::string& word, std::chrono::milliseconds timeout) {
    if (word.size() != 4 || !std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::islower(c); }))
        throw std::invalid_argument("zkr::testkit::four_letter_word: \"" + word + "\" is not a four-letter word (srvr, mntr, wchs, ...)");
    auto where = detail::resolve(address, "zkr::testkit::four_letter_word");
    const auto until = clock_type::now() + timeout;
    int fd = ::socket(where.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } close_fd{fd};
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&where.storage), where.length) != 0) {
        if (errno != EINPROGRESS) return {};
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, remaining_ms(until)) != 1) return {};
        int error = 0;
        socklen_t len = sizeof error;
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) return {};
    }
    if (::send(fd, word.data(), word.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(word.size())) return {};
    std::string answer;
    char buffer[4096];
    while (true) {
        pollfd p{fd, POLLIN, 0};
        int ready = ::poll(&p, 1, remaining_ms(until));
        if (ready < 0 && errno == EINTR) continue;
        if (ready != 1) return {};  // no whole answer in time (a frozen server answers nothing)
        ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n > 0) {
            answer.append(buffer, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        return n == 0 ? answer : std::string();
    }
}

}  // namespace zkr::testkit
