// What `zklock run` holds while its command runs: a lock (an async zkr::lock_hold, or with
// --timeout 0 the main thread's hold of one try_lock round) or, with --max, a semaphore lease.
// One interface, so that supervising the command is the same whichever it is.
#pragma once

#include "event_loop.hpp"

#include <zkr/client.hpp>
#include <zkr/lock_hold.hpp>
#include <zkr/semaphore.hpp>
#include <zkr/shared_mutex.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace zklock {

class run_hold {
public:
    explicit run_hold(zkr::lock_hold hold) : hold_(std::move(hold)) {}
    explicit run_hold(zkr::lock_view& thread_side) : thread_side_(&thread_side) {}
    explicit run_hold(zkr::lease lease) : lease_(std::move(lease)), is_lease_(true) {}

    /// "lock" or "lease", for messages.
    const char* kind() const noexcept { return is_lease_ ? "lease" : "lock"; }
    std::string node_path() const;
    std::int64_t fencing_token() const;
    zkr::lock_state state() const;

    /// Completes with errc::lock_lost when the hold is lost, as zkr's holds do.
    template <class Handler>
    void async_wait_lost(Handler&& handler) {
        if (is_lease_) lease_.async_wait_lost(std::forward<Handler>(handler));
        else if (thread_side_) thread_side_->async_wait_lost(std::forward<Handler>(handler));
        else hold_.async_wait_lost(std::forward<Handler>(handler));
    }

    /// Releases it and waits (until `deadline`) for the server to have the node gone, so that
    /// the next holder can go.
    void release(zkr::client& client, event_loop& loop, steady_time deadline);

private:
    zkr::lock_hold hold_;
    zkr::lock_view* thread_side_ = nullptr;
    zkr::lease lease_;
    bool is_lease_ = false;
};

}  // namespace zklock
