// Watches one hold's standing for a recipe that must act when it changes — a latch that stops
// leading while its connection is suspect, a selector whose leader's work must be stopped:
// whenever the hold may have stopped (or started again) being `held`, it calls the recipe back,
// which reads the state itself. That is on every session event (suspended, reconnected, lost),
// on the hold's loss, and at the end of its lease: a connection that merely goes silent raises no
// event, but past its lease the hold is no longer certain. While it is uncertain, it looks again
// every tenth of a session timeout: a lease that ran out while the connection stayed up (a slow
// server, a slow network) comes back with the next answer, and no event says so.
//
// Threads: the callback runs on the session thread (events, the lease timer) or wherever the hold
// registry learns of a loss; it must not block nor call user code. It returns the standing it
// read and acted on: the monitor looks again soon if that, or the hold now, is uncertain (the
// two readings may differ, and the recipe's must not stand unchecked for a whole lease).
#pragma once

#include "hold.hpp"

#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <mutex>

namespace zkr::detail {

class hold_monitor : public std::enable_shared_from_this<hold_monitor> {
public:
    hold_monitor(session_port& port, std::shared_ptr<hold_registry> holds, std::function<lock_state()> on_change);
    /// Subscribes to session events (call once, after construction).
    void attach(session_port& port);

    /// Monitors `h` from now on (replacing any other); calls back once at once.
    void monitor(std::shared_ptr<hold> h);
    /// Stops calling back (for good).
    void stop();
    /// The hold's standing now (not_held when none is monitored).
    lock_state state() const;

private:
    void changed();
    void arm(std::chrono::steady_clock::time_point until);

    std::weak_ptr<session_port> port_;  // for the session timeout
    std::shared_ptr<runtime> threads_;  // the timer's io_context
    std::shared_ptr<hold_registry> holds_;
    std::function<lock_state()> on_change_;
    subscription session_subscription_;
    mutable std::mutex mutex_;  // a leaf
    std::shared_ptr<hold> hold_;
    bool stopped_ = false;
    boost::asio::steady_timer lease_timer_;  // session thread only
};

}  // namespace zkr::detail
