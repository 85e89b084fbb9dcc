/// \file
/// zkr::atomic_long, zkr::atomic_int — a counter in one node, wire-compatible with Curator 5.4's
/// DistributedAtomicLong (8-byte big-endian) and DistributedAtomicInteger (4-byte; also
/// SharedCount's layout), changed optimistically (a versioned write) and exactly once.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/initiation.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace zkr {

/// The outcome of a counter operation (Curator's AtomicValue): check `succeeded` — a change that
/// lost to other writers `max_attempts` times in a row did not happen.
template <class T>
struct atomic_result {
    bool succeeded = false;  ///< whether the change was applied (for get(): read)
    T pre{};                 ///< the value before (for a failed change: the value last read)
    T post{};                ///< the value after (for a failed change: the same as pre)
    int attempts = 0;        ///< versioned writes sent (1 when nobody else wrote meanwhile)
};

/// Curator's PromotedToLock: a change that lost `atomic_options::max_attempts` races takes a
/// lock and tries again under it. The lock is a zkr::mutex at `lock_path`: Curator's
/// InterProcessMutex layout, so zkr and Curator counters promoted to one path share it. It only
/// orders the writers that take it: a writer still trying optimistically can win a race against
/// the holder, which then tries again (up to `max_attempts`). It is held by the operation, not by
/// the calling thread: a thread's own zkr::mutex hold on that path is not re-entered (its change
/// would wait behind that hold and give up after `lock_timeout`). Should its
/// session be lost while a change is under it, the change goes on as any change does (exactly
/// once, by the counter's versions), no longer ordered against writers that took the lock since.
struct promoted_lock {
    /// The lock's path: a valid ZooKeeper path, neither the counter's nor under it (its nodes
    /// would be the counter's children).
    std::string lock_path;
    /// How long a change waits for the lock; not acquired in time, the change gives up
    /// (succeeded = false). Not negative.
    std::chrono::milliseconds lock_timeout{std::chrono::seconds(10)};
    /// Versioned writes under the lock before the change gives up. At least 1.
    int max_attempts = 100;
};

/// How a counter retries when another writer changed the node between its read and its write.
struct atomic_options {
    /// Versioned writes per operation before it gives up (succeeded = false), or is promoted to
    /// the lock. At least 1.
    int max_attempts = 100;
    /// When set, a change that lost max_attempts races is tried again under this lock.
    std::optional<promoted_lock> promote_to_lock{};
};

namespace detail {
class atomic_engine;

/// What a counter operation does with the value it reads. Data, not code: the machine that
/// runs it (recipes/atomic/atomic_fsm.hpp) stays pure.
struct counter_change {
    enum class kind {
        read,             ///< get(): nothing written
        add,              ///< value + a (wrapping)
        compare_and_set,  ///< b if the value is a, else nothing (not retried)
        set,              ///< a whatever the value is
        reserve,          ///< value + a unless that would pass the largest id (id_generator)
    };
    kind what = kind::read;
    std::int64_t a = 0, b = 0;
};

/// -delta, wrapping as Java's long does (no signed overflow).
constexpr std::int64_t wrapping_negate(std::int64_t delta) noexcept {
    return static_cast<std::int64_t>(std::uint64_t{0} - static_cast<std::uint64_t>(delta));
}

template <class T>
using counter_handler = boost::asio::any_completion_handler<void(error_code, atomic_result<T>)>;
using counter_set_handler = boost::asio::any_completion_handler<void(error_code)>;

ZKR_EXPORT void start_counter_op(const std::shared_ptr<atomic_engine>& e, counter_change change,
                                 counter_handler<std::int64_t> handler);
ZKR_EXPORT void start_counter_op(const std::shared_ptr<atomic_engine>& e, counter_change change,
                                 counter_handler<std::int32_t> handler);
ZKR_EXPORT void start_counter_set(const std::shared_ptr<atomic_engine>& e, std::int64_t value, counter_set_handler handler);
ZKR_EXPORT boost::asio::any_io_executor counter_executor(const std::shared_ptr<atomic_engine>& e);

/// The async operations of a counter whose values are T (atomic_long: std::int64_t, atomic_int:
/// std::int32_t), documented on atomic_long.
template <class T>
class counter_async_ops {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;
    /// The client's executor: where the async operations complete by default.
    executor_type get_executor() const { return counter_executor(engine_); }

    /// Reads the value. Handler: void(zkr::error_code, zkr::atomic_result<T>).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_get(CompletionToken&& token = {}) {
        return start({counter_change::kind::read, 0, 0}, std::forward<CompletionToken>(token));
    }
    /// Adds `delta`, exactly once. Handler: void(zkr::error_code, zkr::atomic_result<T>).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_add(T delta, CompletionToken&& token = {}) {
        return start({counter_change::kind::add, delta, 0}, std::forward<CompletionToken>(token));
    }
    /// Subtracts `delta`, exactly once. Handler: as async_add's.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_subtract(T delta, CompletionToken&& token = {}) {
        return start({counter_change::kind::add, wrapping_negate(delta), 0}, std::forward<CompletionToken>(token));
    }
    /// Adds 1. Handler: as async_add's.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_increment(CompletionToken&& token = {}) {
        return start({counter_change::kind::add, 1, 0}, std::forward<CompletionToken>(token));
    }
    /// Subtracts 1. Handler: as async_add's.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_decrement(CompletionToken&& token = {}) {
        return start({counter_change::kind::add, -1, 0}, std::forward<CompletionToken>(token));
    }
    /// Sets `value` if the counter holds `expected`. Handler: as async_add's (succeeded tells).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_compare_and_set(T expected, T value, CompletionToken&& token = {}) {
        return start({counter_change::kind::compare_and_set, expected, value}, std::forward<CompletionToken>(token));
    }
    /// Sets `value` whatever the counter holds. Handler: void(zkr::error_code)
    /// (errc::attempts_exhausted after `max_attempts` lost races).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_force_set(T value, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            initiation{get_executor(), [engine = engine_, value](auto handler) {
                           start_counter_set(engine, value, std::move(handler));
                       }},
            token);
    }

protected:
    explicit counter_async_ops(std::shared_ptr<atomic_engine> engine) : engine_(std::move(engine)) {}
    std::shared_ptr<atomic_engine> engine_;

private:
    template <class CompletionToken>
    auto start(counter_change change, CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, atomic_result<T>)>(
            initiation{get_executor(), [engine = engine_, change](auto handler) {
                           start_counter_op(engine, change, counter_handler<T>(std::move(handler)));
                       }},
            token);
    }
};
}  // namespace detail

/// A 64-bit counter at `path` (Curator's DistributedAtomicLong layout: one persistent node, its
/// missing parents as containers, the value as 8 big-endian bytes; no node or no data reads as 0).
///
/// Exactly once: each change is one transaction that also bumps the version of this object's
/// own ephemeral child of the counter ("zkr-writer-<uuid>", holding the change's pre and post
/// values), at the version this object last wrote it. A transaction resent after its reply was
/// lost fails whole if its first try was applied, and the child's data says what was applied: the
/// change is never applied twice (Curator retries it blindly and counts twice). Should the session
/// itself be lost between a change and its answer, the child goes with it: if the counter is
/// unchanged since, nothing was applied and the change is made on the new session; if it changed,
/// whether by this change or by another writer cannot be known, and the call throws
/// errc::outcome_unknown instead of guessing; so does a change whose resending the client's
/// retry policy gave up, one whose client closed before its answer, and one whose settling read
/// (after a session loss) failed. Either way it is never applied twice: a caller that gets
/// outcome_unknown must not simply do it again (read the counter, or give the change up).
///
/// Cost: the value and version this object last saw are kept, so a change by the only zkr
/// writer of a counter is one request and one round trip (the first change of a session also
/// makes the child). Children
/// of the counter are ignored by Curator; while an object lives, the counter cannot be deleted
/// without deleting its child first. Thread-safe: one operation at a time per counter
/// among the objects of one client (they never race each other).
///
/// Fairness: a change made with the version this object kept needs no read (one round trip),
/// while a writer that lost a race must read first, and would lose again and again to one that
/// writes without pause. So while other zkr objects write the counter (their records are its
/// children) every change reads first, as theirs do: two round trips, and nobody starves.
/// Curator writers leave no record: a zkr object changing the counter without pause can still
/// win race after race against them, and they give up as their retry policy says.
///
/// Async forms (async_get, async_add, async_subtract, async_increment, async_decrement,
/// async_compare_and_set, async_force_set; inherited): the same operations, on the same engine
/// (one sans-io machine runs the blocking calls and the async ones), blocking nothing. The
/// handler runs on its associated executor, by default the client's (get_executor()); never on
/// the ZooKeeper C client's threads. Errors are the blocking calls' (errc::outcome_unknown,
/// bad_arguments, client_closed, connection trouble once the retry policy gives up). Not
/// cancellable: a change once sent is seen through, and its outcome decided by the exactly-once
/// rules above. The object may go before they complete (its child is deleted once the last
/// one has). The operations of one client's objects on one counter run one at a time, in the
/// order they were started (blocking calls included), so they never race each other.
class ZKR_EXPORT atomic_long : public detail::counter_async_ops<std::int64_t> {
public:
    /// Throws std::invalid_argument for a bad path (naming the rule) or options,
    /// zkr::system_error(client_closed) for a closed client. Sends nothing.
    atomic_long(client& c, std::string path, atomic_options options = {});
    /// Deletes this object's child (guaranteed delete, not waited for).
    ~atomic_long();
    atomic_long(const atomic_long&) = delete;
    atomic_long& operator=(const atomic_long&) = delete;

    /// Reads the value (pre == post). Throws zkr::system_error; bad_arguments when the node holds
    /// neither 0 nor 8 bytes (naming the path and the length).
    atomic_result<std::int64_t> get();
    /// Adds `delta` (wrapping, as Java's long does). Throws zkr::system_error.
    atomic_result<std::int64_t> add(std::int64_t delta);
    /// Subtracts `delta`.
    atomic_result<std::int64_t> subtract(std::int64_t delta);
    /// Adds 1.
    atomic_result<std::int64_t> increment() { return add(1); }
    /// Subtracts 1.
    atomic_result<std::int64_t> decrement() { return add(-1); }
    /// Sets `value` if the counter holds `expected` (no node counts as 0): succeeded tells. A
    /// counter found holding something else is not retried (pre is what it held).
    atomic_result<std::int64_t> compare_and_set(std::int64_t expected, std::int64_t value);
    /// Sets `value` whatever the counter holds (made if missing), through the same exactly-once
    /// transaction as a change (an unconditional set resent after a lost reply would undo a
    /// change made in between). Throws zkr::system_error (attempts_exhausted after
    /// `max_attempts` lost races).
    void force_set(std::int64_t value);
    /// The counter's path.
    const std::string& path() const noexcept;
};

/// A 32-bit counter: atomic_long's algorithm on Curator's DistributedAtomicInteger layout (4
/// big-endian bytes, which SharedCount and zkr::shared_count read too). Its async forms are
/// atomic_long's, with std::int32_t values.
class ZKR_EXPORT atomic_int : public detail::counter_async_ops<std::int32_t> {
public:
    /// As atomic_long's.
    atomic_int(client& c, std::string path, atomic_options options = {});
    /// As atomic_long's.
    ~atomic_int();
    atomic_int(const atomic_int&) = delete;
    atomic_int& operator=(const atomic_int&) = delete;

    /// As atomic_long::get (the node must hold 0 or 4 bytes).
    atomic_result<std::int32_t> get();
    /// Adds `delta` (wrapping).
    atomic_result<std::int32_t> add(std::int32_t delta);
    /// Subtracts `delta`.
    atomic_result<std::int32_t> subtract(std::int32_t delta);
    /// Adds 1.
    atomic_result<std::int32_t> increment() { return add(1); }
    /// Subtracts 1.
    atomic_result<std::int32_t> decrement() { return add(-1); }
    /// As atomic_long::compare_and_set.
    atomic_result<std::int32_t> compare_and_set(std::int32_t expected, std::int32_t value);
    /// As atomic_long::force_set.
    void force_set(std::int32_t value);
    /// The counter's path.
    const std::string& path() const noexcept;
};

}  // namespace zkr
