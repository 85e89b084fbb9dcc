// Internal: the non-template side of zkr::mutex and zkr::shared_mutex (one lock engine behind both).
#pragma once

#include "zkr/client.hpp"
#include "zkr/lock_types.hpp"

#include <boost/asio/any_completion_handler.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkr::detail {

class lock_engine;
enum class lock_kind;

/// Which lock of a path: the mutex, or one side of the read/write lock.
struct lock_target {
    std::shared_ptr<lock_engine> engine;
    std::string path;
    bool read_write = false;
};

lock_target make_lock_target(client& c, std::string path, bool read_write, const char* who);

/// Takes the lock for the calling thread (re-entering its hold if it has one). `wait` false: one
/// round. Returns false when a try or a deadline found it taken; throws zkr::system_error when
/// it cannot tell (session lost, client closed, upgrade refused).
bool acquire(const lock_target& t, bool write, bool wait, std::optional<std::chrono::steady_clock::time_point> deadline);

/// The async form, for the initiating thread. Handler: void(error_code).
void start_acquire(const lock_target& t, bool write, boost::asio::any_completion_handler<void(error_code)> handler);

/// One release by the calling thread: errc::not_owner if it holds nothing here.
zkr::error_code release(const lock_target& t, bool write);

int hold_count(const lock_target& t, bool write);
lock_state state(const lock_target& t, bool write);
std::int64_t fencing_token(const lock_target& t, bool write);
std::string node_path(const lock_target& t, bool write);
bool acquired_in_process(const lock_target& t);
std::vector<participant> participants(const lock_target& t);
subscription on_lost(const lock_target& t, std::function<void(const std::string&)> fn);
void start_wait_lost(const lock_target& t, bool write, boost::asio::any_completion_handler<void(error_code)> handler);
lock_statistics statistics(const lock_target& t);

template <class Clock, class Duration>
std::chrono::steady_clock::time_point to_steady(const std::chrono::time_point<Clock, Duration>& t) {
    if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
        return std::chrono::time_point_cast<std::chrono::steady_clock::duration>(t);
    } else {
        return std::chrono::steady_clock::now() +
               std::chrono::ceil<std::chrono::steady_clock::duration>(t - Clock::now());
    }
}

}  // namespace zkr::detail
