#include "zkr/log.hpp"

#include "zk_log_bridge.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

namespace zkr::log {
namespace {

void default_sink(level l, std::string_view message) {
    std::fprintf(stderr, "zkr %s: %.*s\n", to_string(l), static_cast<int>(message.size()), message.data());
}

// Lines are handed to a dispatcher thread so the sink never runs on the ZooKeeper C client's
// threads (whose log callback has no context pointer to find a client's executor with).
// The dispatcher is never destroyed: C client threads may still log during static destruction.
class dispatcher {
public:
    void push(level l, std::string message) {
        std::lock_guard lock(mutex_);
        if (!thread_started_) {
            std::thread([this] { run(); }).detach();
            thread_started_ = true;
        }
        queue_.emplace_back(l, std::move(message));
        ++queued_;
        wake_.notify_all();
    }

    void set_sink(sink s) {
        std::lock_guard lock(mutex_);
        sink_ = s ? std::move(s) : sink(default_sink);
    }

    void flush() {
        std::unique_lock lock(mutex_);
        std::uint64_t target = queued_;
        drained_.wait(lock, [&] { return delivered_ >= target; });
    }

private:
    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return !queue_.empty(); });
            auto [l, message] = std::move(queue_.front());
            queue_.pop_front();
            sink current = sink_;
            lock.unlock();
            current(l, message);
            lock.lock();
            ++delivered_;
            drained_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, drained_;
    std::deque<std::pair<level, std::string>> queue_;
    sink sink_ = default_sink;
    bool thread_started_ = false;
    std::uint64_t queued_ = 0, delivered_ = 0;
};

dispatcher& the_dispatcher() {
    static dispatcher* instance = new dispatcher;  // leaked on purpose, see above
    return *instance;
}

std::atomic<level> current_threshold{level::warning};

ZooLogLevel to_zoo_level(level l) {
    switch (l) {
        case level::debug: return ZOO_LOG_LEVEL_DEBUG;
        case level::info: return ZOO_LOG_LEVEL_INFO;
        case level::warning: return ZOO_LOG_LEVEL_WARN;
        case level::error: return ZOO_LOG_LEVEL_ERROR;
    }
    return ZOO_LOG_LEVEL_WARN;
}

}  // namespace

void set_sink(sink s) { the_dispatcher().set_sink(std::move(s)); }

void set_threshold(level t) {
    current_threshold = t;
    zoo_set_debug_level(to_zoo_level(t));
}

level threshold() noexcept { return current_threshold; }

void write(level l, std::string_view message) {
    if (l < current_threshold.load()) return;
    the_dispatcher().push(l, std::string(message));
}

void flush() { the_dispatcher().flush(); }

const char* to_string(level l) noexcept {
    switch (l) {
        case level::debug: return "debug";
        case level::info: return "info";
        case level::warning: return "warning";
        case level::error: return "error";
    }
    return "?";
}

}  // namespace zkr::log

namespace zkr::detail {

void forward_c_client_log(const char* message) {
    std::string_view text(message);
    log::level l = log::level::info;
    if (text.find("ZOO_ERROR@") != std::string_view::npos) l = log::level::error;
    else if (text.find("ZOO_WARN@") != std::string_view::npos) l = log::level::warning;
    else if (text.find("ZOO_DEBUG@") != std::string_view::npos) l = log::level::debug;
    // The C client ends its lines with a newline of its own.
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    log::write(l, text);
}

void init_c_client_log_level() {
    static std::once_flag once;
    std::call_once(once, [] { zoo_set_debug_level(log::to_zoo_level(log::threshold())); });
}

}  // namespace zkr::detail
