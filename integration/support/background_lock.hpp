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
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace zkr::test {

enum class lock_side { exclusive, read, write };

/// Whether a background_lock holds. Reading it throws once the acquisition failed (anything but
/// the cancellation release() asks for), so a contender that died is a test failure naming the
/// error, not a wait that runs out or a "not acquired" that passes.
class acquisition_flag {
public:
    bool load() const {
        std::lock_guard lock(mutex_);
        if (failure_) throw std::runtime_error("background_lock: the acquisition failed: " + failure_.message());
        return held_;
    }
    void set_held() {
        std::lock_guard lock(mutex_);
        held_ = true;
    }
    void set_failed(zkr::error_code ec) {
        std::lock_guard lock(mutex_);
        failure_ = ec;
    }

private:
    mutable std::mutex mutex_;
    bool held_ = false;
    zkr::error_code failure_;
};

class background_lock {
public:
    /// Starts locking at once; `on_acquired` runs on its thread once held.
    background_lock(const std::string& connect, const std::string& path, lock_side side = lock_side::exclusive,
                    std::function<void()> on_acquired = {})
        : background_lock(test_options(connect), path, side, std::move(on_acquired)) {}

    /// The same on a client made with `options` (a test that needs its own session timeout).
    background_lock(const zkr::client_options& options, const std::string& path,
                    lock_side side = lock_side::exclusive, std::function<void()> on_acquired = {})
        : client(options) {
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
                hold = locked.get();  // bounded: release() cancels it
            } catch (const zkr::system_error& e) {
                if (!(cancelling_ && e.code() == zkr::errc::cancelled)) {
                    std::fprintf(stderr, "background_lock: the acquisition failed: %s\n", e.what());
                    acquired.set_failed(e.code());
                }
                finished_.set_value();
                return;
            }
            acquired.set_held();
            if (on_acquired) on_acquired();
            std::unique_lock lock(mutex_of_release_);
            release_cv_.wait(lock, [&] { return release_now_; });
            lock.unlock();
            hold.unlock();
            finished_.set_value();
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
        cancelling_ = true;
        std::promise<void> emitted;
        boost::asio::post(client.get_executor(), [&] {
            cancel_.emit(boost::asio::cancellation_type::terminal);
            emitted.set_value();
        });
        // Called from destructors too, where a failed check cannot throw: a contender that does
        // not finish stops the run, loudly, instead of hanging it.
        auto bound = std::chrono::seconds(30);
        if (emitted.get_future().wait_for(bound) != std::future_status::ready ||
            finished_.get_future().wait_for(bound) != std::future_status::ready) {
            std::fprintf(stderr, "background_lock: its acquisition did not end within 30 s of release()\n");
            std::abort();
        }
        thread_.join();
    }
    std::uint64_t wakeups() const { return view_->statistics().wakeups; }
    zkr::lock_statistics statistics() const { return view_->statistics(); }

    zkr::client client;
    acquisition_flag acquired;

private:
    std::unique_ptr<zkr::mutex> mutex_;
    std::unique_ptr<zkr::shared_mutex> shared_;
    zkr::lock_view* view_ = nullptr;
    boost::asio::cancellation_signal cancel_;
    std::atomic<bool> cancelling_{false};
    std::promise<void> finished_;
    std::mutex mutex_of_release_;
    std::condition_variable release_cv_;
    bool release_now_ = false;
    std::thread thread_;
};

}  // namespace zkr::test
