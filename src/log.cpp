#include "zkr/log.hpp"

#include "zk_log_bridge.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
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
// The queue is bounded: a slow sink loses lines (counted and reported), never memory.
// The dispatcher is never destroyed: C client threads may still log during static destruction.
class dispatcher {
public:
    static constexpr std::size_t capacity = 1024;

    void push(level l, std::string message) {
        std::lock_guard lock(mutex_);
        if (!thread_started_) {
            std::thread([this] { run(); }).detach();
            thread_started_ = true;
        }
        ++queued_;
        if (queue_.size() >= capacity) {
            ++dropped_;
            ++delivered_;  // accounted for: flush() must not wait for it
            return;
        }
        queue_.emplace_back(l, std::move(message));
        wake_.notify_all();
    }

    void set_sink(sink s) {
        std::lock_guard lock(mutex_);
        sink_ = s ? std::move(s) : sink(default_sink);
    }

    void flush() {
        std::unique_lock lock(mutex_);
        std::uint64_t target = queued_;
        drained_.wait(lock, [&] { return delivered_ >= target && dropped_ == 0 && !sinking_; });
    }

private:
    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return !queue_.empty() || dropped_ > 0; });
            std::pair<level, std::string> line;
            if (dropped_ > 0 && (queue_.empty() || queue_.size() < capacity / 2)) {
                // Said once the sink caught up a little, so the report itself is not dropped.
                line = {level::warning, "zkr: dropped " + std::to_string(dropped_) +
                                            " log lines: the log sink is slower than the lines come"};
                dropped_ = 0;
            } else if (!queue_.empty()) {
                line = std::move(queue_.front());
                queue_.pop_front();
                ++delivered_;
            } else {
                continue;
            }
            sink current = sink_;
            sinking_ = true;
            lock.unlock();
            current(line.first, line.second);
            lock.lock();
            sinking_ = false;
            drained_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, drained_;
    std::deque<std::pair<level, std::string>> queue_;
    sink sink_ = default_sink;
    bool thread_started_ = false;
    bool sinking_ = false;
    std::uint64_t queued_ = 0, delivered_ = 0, dropped_ = 0;
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

namespace {

// One C client line: "2026-11-23 12:00:10,486:12508(0x7f..):ZOO_ERROR@resolve_hosts@947: text".
struct c_client_line {
    log::level level = log::level::info;
    std::string_view where;  // "resolve_hosts@947": the C client's source location
    std::string_view text;
};

c_client_line parse_c_client_line(std::string_view line) {
    c_client_line out;
    out.text = line;
    std::size_t at = line.find(":ZOO_");
    if (at == std::string_view::npos) return out;
    std::string_view rest = line.substr(at + 5);
    std::size_t first_at = rest.find('@');
    if (first_at == std::string_view::npos) return out;
    std::string_view level_name = rest.substr(0, first_at);
    if (level_name == "ERROR") out.level = log::level::error;
    else if (level_name == "WARN") out.level = log::level::warning;
    else if (level_name == "DEBUG") out.level = log::level::debug;
    rest = rest.substr(first_at + 1);
    std::size_t colon = rest.find(": ");
    if (colon == std::string_view::npos) return out;
    out.where = rest.substr(0, colon);
    out.text = rest.substr(colon + 2);
    return out;
}

// The C client's connection-level complaints are what zkr handles (retries, reconnects, new
// sessions): warnings to zkr's users, not errors.
bool connection_level(std::string_view where) {
    for (std::string_view f : {"handle_socket_error_msg@", "check_events@", "zookeeper_interest@", "resolve_hosts@",
                               "handle_error@", "send_ping@", "prime_connection@"}) {
        if (where.substr(0, f.size()) == f) return true;
    }
    return false;
}

// The same C client line (by source location) at most once per window; the next one that is
// let through says how many were held back.
class repeat_limiter {
public:
    static constexpr std::chrono::seconds window{10};

    /// Empty if the line is held back, else how many like it were held back before.
    std::optional<std::uint64_t> admit(std::string_view where) {
        auto now = std::chrono::steady_clock::now();
        std::lock_guard lock(mutex_);
        if (seen_.size() > 4096) seen_.clear();  // bounded, whatever the C client says
        auto& e = seen_[std::string(where)];
        if (e.last != std::chrono::steady_clock::time_point{} && now - e.last < window) {
            ++e.held_back;
            return std::nullopt;
        }
        e.last = now;
        return std::exchange(e.held_back, 0);
    }

private:
    struct entry {
        std::chrono::steady_clock::time_point last{};
        std::uint64_t held_back = 0;
    };
    std::mutex mutex_;
    std::unordered_map<std::string, entry> seen_;
};

repeat_limiter& limiter() {
    static repeat_limiter* instance = new repeat_limiter;  // C client threads may log at exit
    return *instance;
}

}  // namespace

void forward_c_client_log(const char* message) {
    std::string_view line(message);
    // The C client ends its lines with a newline of its own.
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    auto parsed = parse_c_client_line(line);
    log::level l = parsed.level;
    if (l == log::level::error && connection_level(parsed.where)) l = log::level::warning;
    if (l < log::threshold()) return;
    std::string text = "zookeeper C client: " + std::string(parsed.text);
    if (!parsed.where.empty()) {
        auto held_back = limiter().admit(parsed.where);
        if (!held_back) return;
        text += " (" + std::string(parsed.where) + ")";
        if (*held_back > 0) text += " [" + std::to_string(*held_back) + " more like it in the last " +
                                    std::to_string(repeat_limiter::window.count()) + " s not shown]";
    }
    log::write(l, text);
}

void init_c_client_log_level() {
    static std::once_flag once;
    std::call_once(once, [] { zoo_set_debug_level(log::to_zoo_level(log::threshold())); });
}

}  // namespace zkr::detail
