// A lock taken on a thread (and client) of its own, held until released: a contender in a queue.
#pragma once

#include "session_tools.hpp"
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

namespace zkr::test {

enum class lock_side { exclusive, read, write };

class background_lock {
public:
    /// Starts locking at once; `on_acquired` runs on its thread once held.
    background_lock(const std::string& connect, const std::string& path, lock_side side = lock_side::exclusive,
                    std::function<void()> on_acquired = {})
        : client(test_options(connect)) {
        if (side == lock_side::exclusive) {
            mutex_ = std::make_unique<zkr::mutex>(client, path);
            view_ = mutex_.get();
        } else {
            shared_ = std::make_unique<zkr::shared_mutex>(client, path);
            view_ = side == lock_side::read ? &shared_->read_lock() : &shared_->write_lock();
        }
        thread_ = std::thread([this, on_acquired] {
            // Async, so that a release before the lock is ever held can cancel the wait.
            auto locked = view_->async_lock(boost::asio::bind_cancellation_slot(cancel_.slot(), boost::asio::use_future));
            zkr::lock_hold hold;
            try {
                hold = locked.get();
            } catch (const zkr::system_error&) {
                return;  // cancelled by release(), or failed: the test's own checks say which
            }
            acquired = true;
            if (on_acquired) on_acquired();
            std::unique_lock lock(mutex_of_release_);
            release_cv_.wait(lock, [&] { return release_now_; });
            lock.unlock();
            hold.unlock();
        });
    }
    ~background_lock() { release(); }

    /// Unlocks (once held) and joins its thread.
    void release() {
        {
            std::lock_guard lock(mutex_of_release_);
            release_now_ = true;
        }
        release_cv_.notify_all();
        if (!thread_.joinable()) return;
        // Still waiting? Cancel it, on the client's executor where its handler runs; wait for
        // that, since the signal dies with this object.
        std::promise<void> emitted;
        boost::asio::post(client.get_executor(), [&] {
            cancel_.emit(boost::asio::cancellation_type::terminal);
            emitted.set_value();
        });
        emitted.get_future().wait();
        thread_.join();
    }
    std::uint64_t wakeups() const { return view_->statistics().wakeups; }
    zkr::lock_statistics statistics() const { return view_->statistics(); }

    zkr::client client;
    std::atomic<bool> acquired{false};

private:
    std::unique_ptr<zkr::mutex> mutex_;
    std::unique_ptr<zkr::shared_mutex> shared_;
    zkr::lock_view* view_ = nullptr;
    boost::asio::cancellation_signal cancel_;
    std::mutex mutex_of_release_;
    std::condition_variable release_cv_;
    bool release_now_ = false;
    std::thread thread_;
};

}  // namespace zkr::test
