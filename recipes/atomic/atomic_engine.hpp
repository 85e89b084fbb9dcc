// The counters' engine (atomic_long, atomic_int, id_generator): runs each operation's sans-io
// machine (atomic_fsm.hpp) through the session, one operation at a time per counter among the
// objects of one client, for the blocking calls and the async ones alike.
//
// Threads: an operation's requests complete on whichever thread the session completes them on
// (often the C client's completion thread); the machine runs right there and never blocks. The
// answer function runs there too: it must neither block nor call user code (async handlers are
// posted to their executor by completion<>, blocked callers woken through a sync_slot). The
// promoted lock is taken through the lock engine with an inline callback, and released with a
// guaranteed delete: nothing waits on the client's executor, so a blocking call made on it
// cannot deadlock.
#pragma once

#include "atomic_fsm.hpp"
#include "session_port.hpp"
#include "zkr/atomic.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace zkr::detail {

struct counter_queue;

class atomic_engine : public std::enable_shared_from_this<atomic_engine> {
public:
    /// `width`: 8 (long) or 4 (int) bytes. Throws std::invalid_argument for a bad path or
    /// options, zkr::system_error(client_closed). Sends nothing.
    atomic_engine(client& c, std::string path, int width, atomic_options options, const char* who);
    ~atomic_engine();

    /// Called once when an operation ends: no error and its result, or the error and what failed.
    using answer_fn = std::function<void(error_code, const std::string& what, const atomic_result<std::int64_t>&)>;
    /// Starts one operation, after those of this client's objects queued before it on the path.
    /// `answer` runs on whichever thread ends it (see the file's comment).
    void run(counter_change change, answer_fn answer);
    /// The blocking form: the result, or zkr::system_error naming what failed.
    atomic_result<std::int64_t> call(counter_change change);

    const std::string& path() const noexcept { return path_; }
    const char* who() const noexcept { return who_; }
    const boost::asio::any_io_executor& executor() const noexcept { return executor_; }
    std::int64_t wrap(std::int64_t v) const noexcept;

private:
    struct operation;
    void finish(const std::shared_ptr<operation>& op, error_code ec, const std::string& what,
                const atomic_result<std::int64_t>& result);

    std::weak_ptr<session_port> port_;
    boost::asio::any_io_executor executor_;
    std::string path_;
    int width_;
    atomic_options options_;
    const char* who_;
    // One operation at a time on this counter among every object of this client: two objects of
    // one process never race each other (the one with a fresh version would win every time and
    // starve the other).
    std::shared_ptr<counter_queue> queue_;
    std::mutex mutex_;       // memory_, handed to each operation and taken back
    counter_memory memory_;  // what this object knows of the counter between operations
};

}  // namespace zkr::detail
