// "Try again in a moment" for a recipe that keeps something up (a cache's failed reads, a
// persistent node's create): one timer on the client's session thread, armed once at a time.
#pragma once

#include "runtime.hpp"

#include <chrono>
#include <functional>
#include <memory>

namespace zkr::detail {

class retry_timer {
public:
    /// The timers run on `threads`' session context (kept alive while one may exist).
    explicit retry_timer(std::shared_ptr<runtime> threads);

    /// Calls `fn` on the session thread after `delay`, unless cancel() comes first. `fn` must not
    /// block, and must hold its recipe weakly (the timer may outlive it).
    void arm(std::chrono::milliseconds delay, std::function<void()> fn);
    /// No call after this returns, except one already running; arm() does nothing afterwards.
    void cancel();

private:
    struct state;
    std::shared_ptr<state> state_;
};

}  // namespace zkr::detail
