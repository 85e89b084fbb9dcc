#include "event_loop.hpp"

#include "exit_codes.hpp"
#include "signals.hpp"

#include <boost/asio/read.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace zklock {

namespace {
int open_signal_fd() {
    int fd = signalfd(-1, &handled_signals(), SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) throw failure(exit_code::internal, std::string("signalfd: ") + std::strerror(errno));
    return fd;
}
}  // namespace

event_loop::event_loop() : signal_fd_(io_, open_signal_fd()) { read_next_signal(); }

event_loop::~event_loop() {
    boost::system::error_code ignored;
    signal_fd_.close(ignored);
}

void event_loop::read_next_signal() {
    boost::asio::async_read(signal_fd_, boost::asio::buffer(&incoming_, sizeof incoming_),
                            [this](boost::system::error_code ec, std::size_t) {
                                if (ec) return;  // closed: the loop is going away
                                int number = static_cast<int>(incoming_.ssi_signo);
                                if (number == SIGCHLD) ++child_events_;
                                else if (number != SIGTSTP) signals_.push_back({number});
                                else if (stop_handler_) stop_handler_();
                                else stop_self(SIGTSTP);
                                read_next_signal();
                            });
}

event_loop::wake event_loop::run_until(const std::function<bool()>& done, std::optional<steady_time> deadline) {
    for (;;) {
        if (done()) return wake::done;
        if (!signals_.empty()) return wake::signal;
        if (!deadline) {
            io_.run_one();
        } else if (io_.run_one_until(*deadline) == 0 && std::chrono::steady_clock::now() >= *deadline) {
            return done() ? wake::done : wake::deadline;
        }
    }
}

std::optional<received_signal> event_loop::take_signal() {
    if (signals_.empty()) return std::nullopt;
    auto s = signals_.front();
    signals_.pop_front();
    return s;
}

}  // namespace zklock
