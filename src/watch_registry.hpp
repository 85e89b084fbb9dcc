// Internal: the watches a client has set, as the C client sees them. A watch's context pointer
// at the C client is its watch_state, which the registry keeps alive until the watch fires, is
// removed, or its session ends.
#pragma once

#include <cstdint>

#include "completion.hpp"
#include "live_objects.hpp"
#include "zkr/types.hpp"
#include "zkr/watch.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace zkr::detail {

class client_impl;

/// What every watch of one client shares: made once per client, not per watch (a deep lock queue
/// keeps three watches per waiter).
struct watch_owner {
    client_impl* client = nullptr;            // valid while the C client can call us
    std::weak_ptr<client_impl> client_owner;  // for user calls after the fact (remove)
    boost::asio::any_io_executor executor;    // where a user's wait completes without a client
};

/// A user's wait on a watch (zkr::watch::wait, async_wait): made only when a user waits, so a
/// recipe's watch does not carry it.
struct watch_user_wait {
    std::optional<watch_handler> waiter;
    boost::asio::any_io_executor waiter_work;
    sync_slot<watch_event>* sync_waiter = nullptr;
};

struct watch_state {
    std::shared_ptr<const watch_owner> owner;
    std::string path;
    watch_kind kind = watch_kind::data;
    std::uint64_t generation = 0;            // the handle it is set on
    std::atomic<bool> armed{false};          // the read succeeded: the C client holds it

    std::mutex mutex;
    bool done = false;
    event_type fired = event_type::changed;  // what ended it (the event's path is `path`)
    error_code error;
    std::unique_ptr<watch_user_wait> user;   // a user's wait, if any
    // zkr's own waits (lock recipes): called on the thread that ends the watch; must not block.
    std::function<void(error_code, const watch_event&)> inline_waiter;

    client_impl* client() const noexcept { return owner->client; }
    /// The event it ended with, under `mutex` once done: none for a watch ended by an error.
    watch_event event_locked() const { return error ? watch_event{} : watch_event{fired, path}; }
    /// Whether a user waits on it, under `mutex`.
    bool user_waits_locked() const noexcept { return user && (user->waiter || user->sync_waiter); }
    /// First call wins; completes a pending wait.
    void finish(error_code ec, event_type type);
    void cancel_wait();
    /// Registers an inline waiter; if the watch already ended, calls it at once (on this thread).
    void wait_inline(std::function<void(error_code, const watch_event&)> fn);
    /// Drops an inline waiter that has not been called (its owner gave up waiting).
    void clear_inline();

private:
    live_counter<&live_objects::watches> counted_;
};

/// For recipes: the state behind a zkr::watch.
struct watch_access {
    static const std::shared_ptr<watch_state>& state(const zkr::watch& w) { return w.state_; }
};

class watch_registry {
public:
    /// A new watch state; null when the watch is refused: with it, the watches a reconnection
    /// sets again would not fit in one request of `max_request` bytes (see set_watches_size).
    /// `chroot`: the length of the connect string's chroot, which the server sees before every path.
    std::shared_ptr<watch_state> add(std::shared_ptr<const watch_owner> owner, std::string path, watch_kind kind,
                                     std::size_t max_request = SIZE_MAX, std::size_t chroot = 0);
    /// The size, as the server reads it, of the SetWatches request a reconnection sends: every
    /// watched path once per kind. libzookeeper_mt 3.8 sends them all in one request; over the
    /// servers' jute.maxbuffer, the server drops the connection and the client reconnects and sends
    /// it again, for ever (measured: docs/operations.md, "Deep queues"). So add() refuses a watch
    /// that would take it over client_options::max_request_size.
    std::size_t set_watches_size();
    void forget(watch_state* ws);
    /// Armed watches other than `ws` on the same path, kind and handle.
    std::vector<std::shared_ptr<watch_state>> sharing(const watch_state& ws);
    /// Ends those with `type` (their registration went with a removal of all watches on the path).
    void end_sharing(const watch_state& ws, event_type type);
    /// Ends, with `ec`, every armed watch not set on handle `current` (or every one, if `all`).
    /// Their handle may still be open and call them: each is kept until release_handle.
    void end_stale(std::uint64_t current, bool all, error_code ec);
    /// Takes `ws` out like forget(), but keeps it until its handle is closed (release_handle):
    /// for a watch the C client of a handle still open may call.
    void retire(watch_state* ws);
    /// Handle `generation` is closed (zookeeper_close returned: nothing of it runs any more).
    /// Its watches still armed end with `ec` (armed by a late answer after end_stale), and
    /// those kept for it go.
    void release_handle(std::uint64_t generation, error_code ec);
    std::size_t size();
    /// How many watches are kept for handles not closed yet (tests).
    std::size_t retired();

private:
    void uncount_locked(const watch_state& ws);

    std::mutex mutex_;
    std::unordered_map<watch_state*, std::shared_ptr<watch_state>> watches_;
    // Distinct (kind, path) among watches_, by a hash of both: how many states share each, and
    // the bytes they take in a SetWatches request (a length and the path, with the chroot).
    std::unordered_map<std::uint64_t, std::uint32_t> distinct_;
    std::size_t watched_bytes_ = 0;
    std::size_t chroot_ = 0;
    std::unordered_multimap<std::uint64_t, std::shared_ptr<watch_state>> retired_;  // by handle
};

}  // namespace zkr::detail
