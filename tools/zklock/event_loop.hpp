// zklock's one event loop: the main thread runs zkr's completions, timers and the signals it
// handles itself, so a deadline or a Ctrl-C can end any wait without a thread of its own.
#pragma once

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <zkr/error.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <sys/signalfd.h>
#include <sys/types.h>

namespace zklock {

using steady_time = std::chrono::steady_clock::time_point;

/// A signal zklock received (one of handled_signals(), but SIGCHLD and SIGTSTP).
struct received_signal {
    int number = 0;
};

/// What one async zkr operation completed with. Shared with its handler, so an operation
/// abandoned at a deadline may still complete later without touching a dead stack frame.
template <class Value>
struct outcome {
    bool done = false;
    zkr::error_code error;
    Value value{};
};
struct no_value {};

/// Declare it before the zkr::client it serves: the client, destroyed first, completes what
/// is pending into this loop's queue, which must still exist.
class event_loop {
public:
    /// Reads handled_signals() (which main has blocked) from a signalfd.
    event_loop();
    ~event_loop();
    event_loop(const event_loop&) = delete;
    event_loop& operator=(const event_loop&) = delete;

    boost::asio::io_context& context() noexcept { return io_; }

    /// A completion handler for a zkr operation: runs on this loop, stores into `out`.
    template <class Value>
    auto completion(const std::shared_ptr<outcome<Value>>& out) {
        return boost::asio::bind_executor(io_, [out](zkr::error_code ec, auto&&... value) {
            static_assert(sizeof...(value) <= 1);
            out->error = ec;
            if constexpr (sizeof...(value) == 1) out->value = std::move(value...);
            out->done = true;
        });
    }

    enum class wake { done, signal, deadline };
    /// Runs handlers until `done()` holds, a signal is waiting in take_signal(), or `deadline`
    /// passes (none: no deadline). A SIGCHLD only wakes it through `done()`.
    wake run_until(const std::function<bool()>& done, std::optional<steady_time> deadline = std::nullopt);

    /// The oldest signal not yet taken. SIGCHLD is never one (see child_events()), nor SIGTSTP
    /// (see on_stop_request()).
    std::optional<received_signal> take_signal();

    /// What a SIGTSTP does (Ctrl-Z; an empty function: the default): by default zklock stops
    /// (stop_self), as it would have without handling it, and goes on once continued.
    void on_stop_request(std::function<void()> handler) { stop_handler_ = std::move(handler); }

    /// How many SIGCHLDs came so far. Counted, not queued: a child zklock did not start (one it
    /// inherited) must not end a wait as an interruption would.
    std::uint64_t child_events() const noexcept { return child_events_; }

private:
    void read_next_signal();

    boost::asio::io_context io_;
    boost::asio::posix::stream_descriptor signal_fd_;
    signalfd_siginfo incoming_{};
    std::deque<received_signal> signals_;
    std::uint64_t child_events_ = 0;
    std::function<void()> stop_handler_;
};

}  // namespace zklock
