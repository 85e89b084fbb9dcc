/// \file
/// zkr::semaphore — at most N holders across processes, wire-compatible with Curator 5.4's
/// InterProcessSemaphoreV2 (`path/locks` a mutex, `path/leases` one node per lease), so zkr and
/// Curator participants share one semaphore and together never exceed its maximum.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/lock_types.hpp"
#include "zkr/shared_count.hpp"
#include "zkr/types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkr {

class lease;

namespace detail {
class semaphore_impl;
struct hold;
struct lease_access;
using leases_handler = boost::asio::any_completion_handler<void(error_code, std::vector<lease>)>;
using lease_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_acquire_leases(const std::shared_ptr<semaphore_impl>& s, int count, leases_handler handler);
ZKR_EXPORT void start_lease_wait_lost(const std::shared_ptr<semaphore_impl>& s, const std::shared_ptr<hold>& h,
                                      lease_handler handler);
ZKR_EXPORT boost::asio::any_io_executor semaphore_executor(const semaphore_impl& s);
}  // namespace detail

/// One lease of a semaphore: a hold of its own node `path/leases/_c_<uuid>-lease-<seq>`. It ends
/// with release() (or destruction, or move-assignment over it), or with its session, or when
/// anyone deletes its node: then state() says lost and async_wait_lost completes. Movable, not
/// copyable; any thread may use it.
class ZKR_EXPORT lease {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// No lease.
    lease() noexcept = default;
    /// Takes over `other`'s lease.
    lease(lease&& other) noexcept = default;
    /// Returns the lease this one holds, then takes over `other`'s.
    lease& operator=(lease&& other) noexcept;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    /// release().
    ~lease() { release(); }

    /// Returns the lease: its node's delete is sent at once (guaranteed, retried while its
    /// session lives). No-op when empty.
    void release() noexcept;
    /// True until released.
    bool owns() const noexcept { return hold_ != nullptr; }
    /// owns().
    explicit operator bool() const noexcept { return owns(); }

    /// held, uncertain (the connection is suspect), lost (its session ended or its node was
    /// deleted), or not_held once released. Read live.
    lock_state state() const;
    /// Until when the lease is certainly still ours (the session's lease), while state() is held.
    std::chrono::steady_clock::time_point valid_until() const;
    /// The lease node's czxid: ensemble-wide and increasing. A lease's node is made in a
    /// transaction whose reply carries no czxid: the lease's own-node watch reads it. That watch
    /// is sent once the lease has lasted 50 ms, or by the first call here if that comes sooner;
    /// the first call waits for its answer (a round trip, bounded by the session timeout). Throws
    /// zkr::system_error(errc::not_owner) when empty, errc::lock_lost when it could not be read.
    std::int64_t fencing_token() const;
    /// The lease node. Throws errc::not_owner when empty.
    const std::string& node_path() const;
    /// A guard for client::multi (see op::guard). Throws errc::not_owner when empty.
    op::guard guard() const;
    /// Completes with errc::lock_lost when the lease is lost, errc::cancelled when released first
    /// or on per-operation cancellation, errc::not_owner for an empty lease. Handler:
    /// void(zkr::error_code).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_lost(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(),
                               [sem = semaphore_, h = hold_](auto handler) {
                                   detail::start_lease_wait_lost(sem, h, std::move(handler));
                               }},
            token);
    }
    /// The client's executor.
    executor_type get_executor() const {
        return semaphore_ ? detail::semaphore_executor(*semaphore_) : executor_type{};
    }

private:
    friend struct detail::lease_access;
    lease(std::shared_ptr<detail::semaphore_impl> s, std::shared_ptr<detail::hold> h) noexcept
        : semaphore_(std::move(s)), hold_(std::move(h)) {}
    void check() const;

    std::shared_ptr<detail::semaphore_impl> semaphore_;
    std::shared_ptr<detail::hold> hold_;
};

/// A counting semaphore: at most `max` leases at once across every participant of `path`. The
/// maximum is the participants' shared convention (Curator's too): a fixed number, or a
/// shared_count's value that may change while they run.
///
/// Acquiring takes the semaphore's mutex (`path/locks`), makes all the leases asked for at once
/// in one transaction guarded by that mutex node — all or none, so two callers wanting several
/// cannot deadlock holding part, and a session lost meanwhile makes nothing — counts, and while
/// the semaphore is full waits (holding the mutex, as Curator does) for a lease to come back.
/// One deadline covers the mutex and the wait; on timeout, cancellation or error every lease
/// made so far is deleted before the call returns (CURATOR-462, -315, -335). Uncontended, an
/// acquire costs two round trips (Curator: about five).
///
/// Leases of a session the server has not yet expired still count (CURATOR-595): after a crash,
/// its leases stay until its session times out.
class ZKR_EXPORT semaphore {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// A semaphore of `max_leases` (≥ 1) on `path`. Nothing is sent until used. Throws
    /// std::invalid_argument for a bad path or maximum; errc::client_closed for a closed client.
    semaphore(client& c, std::string path, std::int32_t max_leases);
    /// A semaphore whose maximum is `max`'s value, read each time it counts; a change of it wakes
    /// a waiting acquisition. `max` must outlive the semaphore.
    semaphore(client& c, std::string path, const shared_count& max);
    ~semaphore();
    semaphore(const semaphore&) = delete;
    semaphore& operator=(const semaphore&) = delete;

    /// Blocks until it holds a lease. Throws zkr::system_error on failure (connection trouble
    /// once the retry policy gives up, errc::client_closed...).
    lease acquire();
    /// Blocks until it holds `count` leases, all at once.
    std::vector<lease> acquire(int count);
    /// One round: a lease if one is free now.
    std::optional<lease> try_acquire();
    /// Waits up to `timeout` for a lease; returns by then. Connection trouble is "not acquired".
    template <class Rep, class Period>
    std::optional<lease> try_acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
        auto all = acquire_within(1, std::chrono::ceil<std::chrono::milliseconds>(timeout));
        if (all.empty()) return std::nullopt;
        return std::move(all.front());
    }
    /// Waits up to `timeout` for `count` leases, all or none (an empty vector); returns by then.
    template <class Rep, class Period>
    std::vector<lease> try_acquire_for(int count, const std::chrono::duration<Rep, Period>& timeout) {
        return acquire_within(count, std::chrono::ceil<std::chrono::milliseconds>(timeout));
    }
    /// Acquires `count` leases, all at once. Handler: void(zkr::error_code, std::vector<zkr::lease>):
    /// errc::cancelled on per-operation cancellation (any type: what was made is deleted),
    /// errc::client_closed, connection trouble once the retry policy gives up.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_acquire(int count, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, std::vector<lease>)>(
            detail::initiation{get_executor(),
                               [impl = impl_, count](auto handler) {
                                   detail::start_acquire_leases(impl, count, std::move(handler));
                               }},
            token);
    }

    /// Leases free now: the maximum less the leases' children (one listing; may be negative when
    /// the maximum was lowered).
    int available() const;
    /// The lease nodes now, in queue order (Curator's getParticipantNodes; CURATOR-230).
    std::vector<std::string> participants() const;
    /// The maximum now.
    std::int32_t max_leases() const;
    /// Calls `handler(node path)` on the client's executor when a lease of this semaphore is lost.
    [[nodiscard]] subscription on_lost(std::function<void(const std::string& node)> handler);
    /// The semaphore's path.
    const std::string& path() const noexcept;
    /// The client's executor.
    executor_type get_executor() const { return detail::semaphore_executor(*impl_); }

private:
    std::vector<lease> acquire_within(int count, std::optional<std::chrono::milliseconds> timeout, bool once = false);
    std::shared_ptr<detail::semaphore_impl> impl_;
};

}  // namespace zkr
