/// \file
/// zkr::count_down_latch — java.util.concurrent.CountDownLatch across processes (Redisson's
/// RCountDownLatch on ZooKeeper): a count set once, counted down by anyone, awaited by anyone.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/detail/node_wait.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace zkr {

namespace detail {
class session_port;
using count_down_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_count_down(const std::weak_ptr<session_port>& port, const boost::asio::any_io_executor& executor,
                                 std::string path, count_down_handler handler);
}

/// A count-down latch at `path`. Layout: the node `path` holds the count left as an 8-byte
/// big-endian integer (Curator's DistributedAtomicLong reads it), made with a child
/// "set-<uuid>" by the try_set_count that set it; each count-down leaves a
/// persistent child "cd-<uuid>" made in the same transaction that lowers the count, so a
/// count-down whose reply is lost is never applied twice; the transaction that brings the count
/// to 0 also makes the child "released", which is all a waiter watches (no herd: a count-down
/// wakes nobody until the last one).
///
/// The latch stays on the server once released (a later wait() passes at once) until
/// someone deletes it (remove()). Thread-safe; blocks the calling thread, never the client's.
class ZKR_EXPORT count_down_latch {
public:
    /// Throws std::invalid_argument for a bad path (naming the rule),
    /// zkr::system_error(client_closed) for a closed client. Sends nothing.
    count_down_latch(client& c, std::string path);
    ~count_down_latch();
    count_down_latch(const count_down_latch&) = delete;
    count_down_latch& operator=(const count_down_latch&) = delete;

    /// Gives the latch its count if it has none: true if this call set it, false if the latch
    /// already had one (whoever set it; a reply lost and resent is still told true). A count of
    /// 0 makes it released at once. Missing parents are made as containers. Throws
    /// std::invalid_argument for a negative count, zkr::system_error (errc::outcome_unknown
    /// when the retry policy gave up resending it: it may have been set).
    bool try_set_count(std::int64_t count);
    /// Lowers the count by one, exactly once per call even when a reply is lost and the request
    /// resent; nothing once it is 0. Throws zkr::system_error: no_node when the latch has no
    /// count yet (the count-down is not kept for later), bad_arguments when its node does not
    /// hold an 8-byte count, outcome_unknown when the retry policy gave up resending it or the
    /// client closed before its answer (it may have been applied: do not count down again for
    /// it; its "cd-<uuid>" child, named in the message, says whether it was).
    void count_down();
    /// count_down() blocking nothing: the same machine and driver (recipes/barrier/count_down_fsm.hpp,
    /// count_down_latch.cpp), so the same promises; past its first few lost races it pauses a
    /// little before reading again, on a timer, holding no thread. Handler: void(zkr::error_code) — the errors count_down()
    /// throws; errc::client_closed when the client closed before it was sent (a transaction
    /// already sent is outcome_unknown). Not cancellable (a write: once
    /// sent, only its answer can say whether it was applied). The handler runs on its associated
    /// executor, by default the client's, never on the ZooKeeper C client's threads; the latch
    /// object may go before it completes.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_count_down(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{executor_, [port = port_, executor = executor_, path = path_](auto handler) {
                                   detail::start_count_down(port, executor, path, std::move(handler));
                               }},
            token);
    }
    /// Blocks until the count reached 0 (true) or `deadline` passed (false; its watch removed):
    /// time_point::max() waits for ever, a deadline already past reads once (as barrier::wait).
    /// A latch with no count yet is waited for too. Throws zkr::system_error.
    bool wait(std::chrono::steady_clock::time_point deadline);
    /// wait(deadline) for a time point of any other clock (or precision), converted once.
    template <class Clock, class Duration>
    bool wait(const std::chrono::time_point<Clock, Duration>& deadline) {
        return wait(detail::to_steady(deadline));
    }
    /// wait(deadline) with the deadline `timeout` from now (any std::chrono::duration;
    /// duration::max() waits for ever, zero reads once).
    template <class Rep, class Period>
    bool wait(const std::chrono::duration<Rep, Period>& timeout) {
        return wait(detail::deadline_after(timeout));
    }
    /// Blocks until the count reached 0.
    void wait() { wait(std::chrono::steady_clock::time_point::max()); }
    /// Completes once the count reached 0, blocking nothing meanwhile. Handler:
    /// void(zkr::error_code), as barrier::async_wait's (errc::cancelled by per-operation
    /// cancellation, the watch removed; errc::client_closed). The latch object may go before it
    /// completes.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{executor_, [port = port_, executor = executor_, path = released_](auto handler) {
                                   detail::start_node_wait(port, executor, path, true, recipe_kind::count_down_latch, std::move(handler));
                               }},
            token);
    }
    /// \deprecated Use wait(timeout): kept for 0.2 only.
    [[deprecated("use zkr::count_down_latch::wait(timeout)")]] bool await_for(std::chrono::milliseconds timeout) { return wait(timeout); }
    /// \deprecated Use wait(): kept for 0.2 only.
    [[deprecated("use zkr::count_down_latch::wait()")]] void await() { wait(); }
    /// \deprecated Use async_wait(token): kept for 0.2 only.
    template <class CompletionToken = boost::asio::deferred_t>
    [[deprecated("use zkr::count_down_latch::async_wait(token)")]] auto async_await(CompletionToken&& token = {}) {
        return async_wait(std::forward<CompletionToken>(token));
    }
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;
    /// The client's executor: where async_wait completes by default.
    executor_type get_executor() const { return executor_; }
    /// The count left (0 for a latch with no count). Throws zkr::system_error.
    std::int64_t count() const;
    /// Deletes the latch, its count-downs and its release, so the path can serve again. Throws
    /// zkr::system_error. Not while count-downs of the old latch may still be in flight: one whose
    /// reply was lost and that the session layer resends could land on a latch set again at the
    /// same data version, whose count it would lower (its key child, deleted with the old latch,
    /// no longer tells it apart).
    void remove();
    /// The latch's path.
    const std::string& path() const noexcept { return path_; }

private:
    std::shared_ptr<detail::session_port> port() const;
    std::weak_ptr<detail::session_port> port_;
    boost::asio::any_io_executor executor_;
    std::string path_, released_;
};

}  // namespace zkr
