// Waits for a recipe's own condition (a node made once, a cache initialized, a member joined):
// blocking ones on the recipe's condition variable up to a steady deadline, async ones as keyed
// completions that per-operation cancellation can take back. Both are guarded by the recipe's
// own mutex: it adds and takes waiters under it and completes what it took after releasing it,
// so no completion runs under a recipe's lock.
#pragma once

#include "completion.hpp"
#include "zkr/detail/deadline.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace zkr::detail {

/// Blocks on `cv` until `settled()` or `deadline` (time_point::max(): no deadline, so none is
/// computed to overflow). Returns settled().
template <class Settled>
bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                std::chrono::steady_clock::time_point deadline, Settled settled) {
    if (is_forever(deadline)) cv.wait(lock, settled);
    else cv.wait_until(lock, deadline, settled);
    return settled();
}

/// The async waiters of one condition. Not thread-safe on its own: its owner's mutex guards it.
class waiter_list {
public:
    /// Keeps `done` until taken; the key is for take(key) (a cancellation).
    std::uint64_t add(completion<> done) {
        auto key = ++next_key_;
        waiting_.emplace(key, std::move(done));
        return key;
    }
    /// The waiter of `key`, if it still waits.
    std::optional<completion<>> take(std::uint64_t key) {
        auto node = waiting_.extract(key);
        if (!node) return std::nullopt;
        return std::move(node.mapped());
    }
    /// Every waiter, to be completed once the owner's lock is released.
    std::map<std::uint64_t, completion<>> take_all() { return std::exchange(waiting_, {}); }
    bool empty() const noexcept { return waiting_.empty(); }

    /// Completes what take_all() took, with `ec`.
    static void complete(std::map<std::uint64_t, completion<>>&& taken, error_code ec) {
        for (auto& [key, done] : taken) done(ec);
    }

private:
    std::uint64_t next_key_ = 0;
    std::map<std::uint64_t, completion<>> waiting_;
};

}  // namespace zkr::detail
