// Internal: the non-template side of zkr::mutex, zkr::shared_mutex and zkr::lock_hold (one lock
// engine behind all of them).
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/lock_types.hpp"

#include <boost/asio/any_completion_handler.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace zkr {
class lock_hold;
}

namespace zkr::detail {

class lock_engine;
struct hold;
struct hold_access;  // makes lock_hold objects (recipes)

/// Which lock of a path: the mutex, or one side of the read/write lock.
struct lock_target {
    std::shared_ptr<lock_engine> engine;
    std::string path;
    bool read_write = false;
};

ZKR_EXPORT lock_target make_lock_target(client& c, std::string path, bool read_write, const char* who);

/// Takes the lock for the calling thread (re-entering its hold if it has one). `wait` false: one
/// round. Returns false when a try or a deadline found it taken, or (timed and tries only) when
/// connection trouble kept it from finding out; other failures throw zkr::system_error, or fill
/// `*ec` when given.
ZKR_EXPORT bool acquire(const lock_target& t, bool write, bool wait, std::optional<std::chrono::steady_clock::time_point> deadline,
             error_code* ec);

using hold_handler = boost::asio::any_completion_handler<void(error_code, zkr::lock_hold)>;
using void_lock_handler = boost::asio::any_completion_handler<void(error_code)>;

/// The async form: a hold of its own, owned by the lock_hold it completes with.
ZKR_EXPORT void start_acquire(const lock_target& t, bool write, hold_handler handler);

/// One release by the calling thread; false (logged, counted) if it holds nothing here.
ZKR_EXPORT bool unlock(const lock_target& t, bool write) noexcept;
/// One release by the calling thread: errc::not_owner if it holds nothing here.
ZKR_EXPORT error_code release(const lock_target& t, bool write);

ZKR_EXPORT int hold_count(const lock_target& t, bool write);
ZKR_EXPORT lock_state state(const lock_target& t, bool write);
ZKR_EXPORT std::chrono::steady_clock::time_point valid_until(const lock_target& t, bool write);
ZKR_EXPORT std::int64_t fencing_token(const lock_target& t, bool write);
ZKR_EXPORT std::string node_path(const lock_target& t, bool write);
ZKR_EXPORT op::guard guard(const lock_target& t, bool write);
ZKR_EXPORT bool acquired_in_process(const lock_target& t);
ZKR_EXPORT std::vector<participant> participants(const lock_target& t);
ZKR_EXPORT subscription on_lost(const lock_target& t, std::function<void(const std::string&)> fn);
ZKR_EXPORT void start_wait_lost(const lock_target& t, bool write, void_lock_handler handler);
ZKR_EXPORT lock_statistics statistics(const lock_target& t);
ZKR_EXPORT boost::asio::any_io_executor executor(const lock_target& t);

// lock_hold's side.
ZKR_EXPORT void release_hold(const std::shared_ptr<lock_engine>& e, const std::shared_ptr<hold>& h) noexcept;
ZKR_EXPORT void start_release_hold(const std::shared_ptr<lock_engine>& e, const std::shared_ptr<hold>& h, void_lock_handler handler);
ZKR_EXPORT void start_hold_wait_lost(const std::shared_ptr<lock_engine>& e, const std::shared_ptr<hold>& h, void_lock_handler handler);
ZKR_EXPORT lock_state hold_state(const lock_engine& e, const hold& h);
ZKR_EXPORT std::chrono::steady_clock::time_point hold_valid_until(const lock_engine& e, const hold& h);
ZKR_EXPORT std::int64_t hold_fencing_token(const hold& h) noexcept;
ZKR_EXPORT const std::string& hold_node_path(const hold& h) noexcept;
ZKR_EXPORT const std::string& hold_lock_path(const hold& h) noexcept;
ZKR_EXPORT bool hold_is_shared(const hold& h) noexcept;
ZKR_EXPORT op::guard hold_guard(const hold& h);
ZKR_EXPORT boost::asio::any_io_executor engine_executor(const lock_engine& e);

}  // namespace zkr::detail
