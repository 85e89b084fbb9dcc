// One operation of a recipe that is not a lock (a barrier's wait, a count-down, a counter's change,
// a cache's or a node's start), told to the client's observer once it ends: observer::on_operation,
// zkr_recipe_operation_seconds. Made when the operation starts; finish() tells it, once (later
// calls do nothing). Costs nothing without an observer. Thread-safe.
#pragma once

#include "completion.hpp"
#include "observer_channel.hpp"
#include "session_port.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace zkr::detail {

class observed_operation {
public:
    observed_operation() = default;
    observed_operation(const session_port& port, recipe_kind recipe, std::string path, recipe_operation op)
        : channel_(port.observer_events()), recipe_(recipe), op_(op), path_(std::move(path)) {
        if (channel_) id_ = channel_->next_id();
    }

    // Moved before it is shared between threads (into the machine that finishes it).
    observed_operation(observed_operation&& o) noexcept
        : channel_(std::move(o.channel_)), recipe_(o.recipe_), op_(o.op_), path_(std::move(o.path_)), id_(o.id_),
          started_(o.started_), finished_(o.finished_.load()) {}
    observed_operation& operator=(observed_operation&& o) noexcept {
        channel_ = std::move(o.channel_);
        recipe_ = o.recipe_;
        op_ = o.op_;
        path_ = std::move(o.path_);
        id_ = o.id_;
        started_ = o.started_;
        finished_ = o.finished_.load();
        return *this;
    }

    void finish(operation_outcome outcome) {
        if (!channel_ || finished_.exchange(true)) return;
        channel_->operation(recipe_info{id_, recipe_, path_, 0}, op_, outcome, std::chrono::steady_clock::now() - started_);
    }
    /// finish() with the outcome an error means: none done, errc::cancelled cancelled,
    /// errc::timed_out timed out, anything else failed.
    void finish(error_code ec) {
        if (!ec) return finish(operation_outcome::done);
        if (ec == errc::cancelled) return finish(operation_outcome::cancelled);
        if (ec == errc::timed_out) return finish(operation_outcome::timed_out);
        finish(operation_outcome::failed);
    }

private:
    std::shared_ptr<observer_channel> channel_;
    recipe_kind recipe_ = recipe_kind::barrier;
    recipe_operation op_ = recipe_operation::wait;
    std::string path_;
    std::uint64_t id_ = 0;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    std::atomic<bool> finished_{false};
};

/// A recipe's `recipe_operation::wait` on `path` (nothing without a port or an observer).
inline observed_operation observed_wait(const std::weak_ptr<session_port>& port, recipe_kind recipe, const std::string& path) {
    if (auto p = port.lock()) return observed_operation(*p, recipe, path, recipe_operation::wait);
    return {};
}

/// A blocking wait's outcome: passed, done; not passed by its deadline, timed out; not passed
/// before it (the recipe closed), cancelled.
inline operation_outcome wait_outcome(bool passed, std::chrono::steady_clock::time_point deadline) {
    if (passed) return operation_outcome::done;
    return std::chrono::steady_clock::now() >= deadline ? operation_outcome::timed_out : operation_outcome::cancelled;
}

/// A blocking wait, `wait()` (true when it passed), told to `observed` as it ends: by
/// wait_outcome(), or failed when it throws (the exception goes on to the caller).
template <class Wait>
bool observed_blocking_wait(observed_operation observed, std::chrono::steady_clock::time_point deadline, Wait&& wait) {
    bool passed = false;
    try {
        passed = wait();
    } catch (...) {
        observed.finish(operation_outcome::failed);
        throw;
    }
    observed.finish(wait_outcome(passed, deadline));
    return passed;
}

/// `inner`, with `observed` told how it ended (its error) just before.
inline completion<> observed_completion(observed_operation observed, completion<> inner) {
    auto o = std::make_shared<observed_operation>(std::move(observed));
    auto i = std::make_shared<completion<>>(std::move(inner));
    return completion<>(completion<>::inline_fn([o, i](error_code ec) {
        o->finish(ec);
        (*i)(ec);
    }));
}

}  // namespace zkr::detail
