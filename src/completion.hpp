// Internal: where an operation's result goes — an async handler (posted to its executor) or a
// blocked caller (woken directly). Either way no user code runs on the ZooKeeper C client's threads.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include "live_objects.hpp"
#include "zkr/error.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

namespace zkr::detail {

/// A blocked caller's mailbox.
template <class... Values>
class sync_slot {
public:
    void set(zkr::error_code ec, Values... values) {
        std::lock_guard lock(mutex_);
        error_ = ec;
        values_.emplace(std::move(values)...);
        done_.notify_all();
    }
    std::tuple<Values...> wait(zkr::error_code& ec) {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return values_.has_value(); });
        ec = error_;
        return std::move(*values_);
    }
    /// Like wait(), but gives up after `timeout` (std::nullopt).
    template <class Duration>
    std::optional<std::tuple<Values...>> wait_for(Duration timeout, zkr::error_code& ec) {
        std::unique_lock lock(mutex_);
        if (!done_.wait_for(lock, timeout, [&] { return values_.has_value(); })) return std::nullopt;
        ec = error_;
        return std::move(*values_);
    }
    /// Like wait(), but gives up at `deadline` (std::nullopt); time_point::max() waits for ever
    /// (wait_until would compute with it, wait() does not).
    std::optional<std::tuple<Values...>> wait_until(std::chrono::steady_clock::time_point deadline, zkr::error_code& ec) {
        std::unique_lock lock(mutex_);
        auto set = [&] { return values_.has_value(); };
        if (deadline == std::chrono::steady_clock::time_point::max()) done_.wait(lock, set);
        else if (!done_.wait_until(lock, deadline, set)) return std::nullopt;
        ec = error_;
        return std::move(*values_);
    }

private:
    std::mutex mutex_;
    std::condition_variable done_;
    zkr::error_code error_;
    std::optional<std::tuple<Values...>> values_;
};

/// Posts `handler(args...)` through `io_executor` on to the handler's associated executor
/// (asio::append keeps the handler's associations: executor, allocator, cancellation slot).
template <class Handler, class Executor, class... Args>
void post_handler(Handler handler, const Executor& io_executor, Args... args) {
    boost::asio::post(io_executor, boost::asio::append(std::move(handler), std::move(args)...));
}

template <class... Values>
class completion {
public:
    using handler_type = boost::asio::any_completion_handler<void(error_code, Values...)>;

    /// `io_executor`: the client's; it counts as busy until the handler is posted.
    completion(handler_type handler, const boost::asio::any_io_executor& io_executor)
        : handler_(std::move(handler)),
          work_(boost::asio::prefer(io_executor, boost::asio::execution::outstanding_work.tracked)),
          owed_(true) {
        ++live().completions;
    }
    explicit completion(sync_slot<Values...>* slot) : slot_(slot), owed_(true) { ++live().completions; }
    /// For zkr's own state machines: runs `fn` on whichever thread completes the request (often
    /// the ZooKeeper C client's). It must not block and must not call user code.
    using inline_fn = std::function<void(zkr::error_code, Values...)>;
    explicit completion(inline_fn fn) : inline_(std::move(fn)), owed_(true) { ++live().completions; }

    completion(completion&& other) noexcept
        : handler_(std::move(other.handler_)),
          work_(std::move(other.work_)),
          slot_(std::exchange(other.slot_, nullptr)),
          inline_(std::move(other.inline_)),
          owed_(std::exchange(other.owed_, false)) {}
    // Boost 1.81's any_completion_handler crashes on move assignment (it takes itself for a
    // handler to wrap): build a new completion instead.
    completion& operator=(completion&&) = delete;
    ~completion() {
        // A result owed and never delivered: someone waits for ever (counted; tests fail on it).
        if (owed_) {
            --live().completions;
            ++live().dropped_completions;
        }
    }

    /// Delivers the result; call once.
    void operator()(error_code ec, Values... values) {
        if (std::exchange(owed_, false)) --live().completions;
        if (slot_) {
            slot_->set(ec, std::move(values)...);
            return;
        }
        if (inline_) {
            auto fn = std::move(inline_);
            fn(ec, std::move(values)...);
            return;
        }
        post_handler(std::move(handler_), work_, ec, std::move(values)...);
        work_ = {};
    }

private:
    handler_type handler_;
    boost::asio::any_io_executor work_;
    sync_slot<Values...>* slot_ = nullptr;
    inline_fn inline_;
    bool owed_ = false;
};

}  // namespace zkr::detail
