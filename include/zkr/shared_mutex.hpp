// zkr::shared_mutex — many readers or one writer across processes, fair, reentrant, on the same
// queue as zkr::mutex; wire-compatible with Curator's InterProcessReadWriteLock.
#pragma once

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
class shared_mutex {
public:
    /// Throws std::invalid_argument naming the path and the rule it breaks.
    shared_mutex(client& c, std::string path);

    lock_view& write_lock() noexcept { return write_; }
    lock_view& read_lock() noexcept { return read_; }

    // Exclusive (write) side.
    void lock() { write_.lock(); }
    bool try_lock() { return write_.try_lock(); }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) { return write_.try_lock_for(timeout); }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) { return write_.try_lock_until(deadline); }
    void unlock() noexcept { write_.unlock(); }
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_lock(CompletionToken&& token = {}) { return write_.async_lock(std::forward<CompletionToken>(token)); }

    // Shared (read) side.
    void lock_shared() { read_.lock(); }
    bool try_lock_shared() { return read_.try_lock(); }
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) { return read_.try_lock_for(timeout); }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return read_.try_lock_until(deadline);
    }
    void unlock_shared() noexcept { read_.unlock(); }
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_lock_shared(CompletionToken&& token = {}) { return read_.async_lock(std::forward<CompletionToken>(token)); }

    /// Everyone in the queue in order, readers marked, holders flagged, with their owners.
    std::vector<participant> participants() const { return write_.participants(); }
    const std::string& path() const noexcept { return write_.path(); }

private:
    lock_view write_;
    lock_view read_;
};

}  // namespace zkr
