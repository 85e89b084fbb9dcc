/// \file
/// zkr::leader_selector — runs work only while leading, and takes it away safely; wire-compatible
/// with Curator 5.4's LeaderSelector (a mutex of `_c_<uuid>-lock-<seq>` nodes, the id as data).
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/election_types.hpp"
#include "zkr/lock_types.hpp"
#include "zkr/types.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace zkr {

namespace detail {
class selector_impl;
}

/// How a leader_selector runs its terms.
struct leader_selector_options {
    /// After each term (the work returned, threw, or was stopped), queue again for the next one
    /// (Curator's autoRequeue). Otherwise the selector waits for requeue().
    bool auto_requeue = true;
};

/// Contends for leadership on `path`; each time it leads, it runs the user's work — a term —
/// and its node goes once the work returns, so the next participant leads. The work is told to
/// stop (its std::stop_token, or its coroutine's cancellation) as soon as the leadership is
/// lost (session, or its node deleted by anyone) or uncertain (the connection is suspect, or the
/// server has not answered within the lease), on interrupt_leadership() and on close(): then it
/// must stop touching what leadership protects, and return. Terms of one selector never overlap
/// (CURATOR-518), and requeue() after a term ended always queues (CURATOR-671).
///
/// - Blocking work, `void(std::stop_token)`, runs on a thread of the selector's own. Its stop is
///   requested (and a `std::stop_callback` of it runs) on the client's executor when zkr learns
///   of a loss, on the calling thread for interrupt_leadership() and close(); never on zkr's
///   session thread nor under a lock of the selector's, so a callback may call the selector.
/// - Coroutine work, `boost::asio::awaitable<void>()`, runs on the client's executor; the stop is
///   a terminal cancellation of the coroutine (seen by its next async operation, or through
///   `co_await boost::asio::this_coro::cancellation_state`).
/// An exception from the work ends its term (it is logged).
///
/// Thread-safe. The destructor closes the selector and waits for a running blocking work to
/// return (unless called from that work, which is then left to finish on its own).
class ZKR_EXPORT leader_selector {
public:
    /// Blocking work.
    using work_fn = std::function<void(std::stop_token)>;
    /// Coroutine work.
    using async_work_fn = std::function<boost::asio::awaitable<void>()>;

    /// A participant on `path` whose node carries `id`, running `work` while it leads. Nothing is
    /// sent until start(). Throws std::invalid_argument for a bad path or id (see leader_latch)
    /// or an empty work; zkr::system_error(errc::client_closed) for a closed client.
    leader_selector(client& c, std::string path, std::string id, work_fn work, leader_selector_options options = {});
    /// The same, with coroutine work.
    leader_selector(client& c, std::string path, std::string id, async_work_fn work, leader_selector_options options = {});
    ~leader_selector();
    leader_selector(const leader_selector&) = delete;
    leader_selector& operator=(const leader_selector&) = delete;

    /// Queues for leadership and returns at once. Throws std::logic_error if started before.
    void start();
    /// Queues for one more term: true if it will contend (it was idle, or the running term ends
    /// first); false if it is queued already or closed.
    bool requeue();
    /// Stops the running term's work (its stop token or cancellation); with auto_requeue the
    /// selector queues again once the work returns. No-op when not leading.
    void interrupt_leadership();
    /// Leaves: the running work is stopped, a queued node deleted; the term's node goes when the
    /// work returns. Returns at once; idempotent.
    void close();

    /// True while a term runs and its leadership is held (read live).
    bool has_leadership() const;
    /// The running term's leadership: held, uncertain, lost (the work was told to stop), or
    /// not_held between terms.
    lock_state state() const;
    /// The running term's fencing token (its node's czxid). Throws errc::not_owner between terms.
    std::int64_t fencing_token() const;
    /// A guard for client::multi of the running term (see op::guard). Throws errc::not_owner
    /// between terms.
    op::guard guard() const;
    /// Terms started so far.
    std::uint64_t terms() const;

    /// Everyone contending, in queue order, the first one leading (see leader_latch::participants).
    std::vector<election_participant> participants() const;
    /// The leader, if anyone contends.
    std::optional<election_participant> leader() const;
    /// The election's path.
    const std::string& path() const noexcept;
    /// This participant's id (its nodes' data).
    const std::string& id() const noexcept;

private:
    std::shared_ptr<detail::selector_impl> impl_;
};

}  // namespace zkr
