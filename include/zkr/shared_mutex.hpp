/// \file
/// zkr::shared_mutex — many readers or one writer across processes, fair, reentrant, on the same
/// lock engine as zkr::mutex; wire-compatible with Curator's InterProcessReadWriteLock. Its nodes
/// are not a mutex's: a zkr::mutex and a zkr::shared_mutex on one path do not exclude each other.
#pragma once
#include "zkr/export.hpp"

#include "zkr/lock_view.hpp"

namespace zkr {

/// Meets the standard's SharedTimedLockable requirements: std::unique_lock (write) and
/// std::shared_lock (read) work with it. read_lock() and write_lock() are Curator-style views,
/// each Lockable/TimedLockable on its own.
///
/// - Fair: a waiting writer holds back readers that come after it.
/// - Downgrade: a thread holding the write lock may take the read lock, then release the write
///   lock and keep reading; a writer queued meanwhile cannot slip in between (CURATOR-621).
/// - Upgrade (the write lock asked for by a thread holding only the read lock) would wait for
///   itself forever, as it does in Curator and kazoo: it is refused at once with
///   errc::upgrade_refused.
/// - Downgrade and upgrade refusal are about a thread's blocking holds. Async holds (lock_hold)
///   are owners of their own: an async writer queues behind its own thread's read hold like
///   anyone else's.
/// - A hold that was lost (its session gone) never counts as the thread's own: a lost write hold
///   does not let the thread's read lock skip the queue.
class ZKR_EXPORT shared_mutex {
public:
    /// A read/write lock on the lock path `path` through `c` (nothing is sent until it is used).
    /// Throws std::invalid_argument naming the path and the rule it breaks (the root "/" is
    /// refused too), or zkr::system_error(errc::client_closed) for a closed client.
    shared_mutex(client& c, std::string path);

    /// The write side, a Lockable/TimedLockable view (what lock() and friends use).
    lock_view& write_lock() noexcept { return write_; }
    /// The read side, a Lockable/TimedLockable view (what lock_shared() and friends use).
    lock_view& read_lock() noexcept { return read_; }

    // Exclusive (write) side.

    /// Blocks until the write lock is held (see lock_view::lock); errc::upgrade_refused for a
    /// thread that holds only the read lock.
    void lock() { write_.lock(); }
    /// One round for the write lock (see lock_view::try_lock).
    bool try_lock() { return write_.try_lock(); }
    /// One round for the write lock; `ec` says why not (see lock_view::try_lock(error_code&)).
    bool try_lock(error_code& ec) { return write_.try_lock(ec); }
    /// Waits up to `timeout` for the write lock (see lock_view::try_lock_for).
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) { return write_.try_lock_for(timeout); }
    /// Waits up to `timeout` for the write lock; `ec` says why not.
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout, error_code& ec) {
        return write_.try_lock_for(timeout, ec);
    }
    /// Waits until `deadline` for the write lock (see lock_view::try_lock_until).
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) { return write_.try_lock_until(deadline); }
    /// Releases one level of the calling thread's write hold (see lock_view::unlock).
    void unlock() noexcept { write_.unlock(); }
    /// Async: completes with a zkr::lock_hold owning a write hold of its own (see lock_view::async_lock).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_lock(CompletionToken&& token = {}) { return write_.async_lock(std::forward<CompletionToken>(token)); }

    // Shared (read) side.

    /// Blocks until the read lock is held (see lock_view::lock); granted at once to the thread
    /// holding the write lock (a downgrade).
    void lock_shared() { read_.lock(); }
    /// One round for the read lock (see lock_view::try_lock).
    bool try_lock_shared() { return read_.try_lock(); }
    /// One round for the read lock; `ec` says why not (see lock_view::try_lock(error_code&)).
    bool try_lock_shared(error_code& ec) { return read_.try_lock(ec); }
    /// Waits up to `timeout` for the read lock (see lock_view::try_lock_for).
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) { return read_.try_lock_for(timeout); }
    /// Waits up to `timeout` for the read lock; `ec` says why not.
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout, error_code& ec) {
        return read_.try_lock_for(timeout, ec);
    }
    /// Waits until `deadline` for the read lock (see lock_view::try_lock_until).
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return read_.try_lock_until(deadline);
    }
    /// Releases one level of the calling thread's read hold (see lock_view::unlock).
    void unlock_shared() noexcept { read_.unlock(); }
    /// Async: completes with a zkr::lock_hold owning a read hold of its own; async readers share.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_lock_shared(CompletionToken&& token = {}) { return read_.async_lock(std::forward<CompletionToken>(token)); }

    /// Everyone in the queue in order, readers marked, holders flagged, with their owners.
    std::vector<participant> participants() const { return write_.participants(); }
    /// The lock path.
    const std::string& path() const noexcept { return write_.path(); }

private:
    lock_view write_;
    lock_view read_;
};

}  // namespace zkr
