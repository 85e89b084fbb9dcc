// A hold: a recipe's claim that stands on one node of ours — a lock hold, a semaphore lease, a
// latch's leadership. It stands while the node's session lives and the node exists, and the
// hold registry (one per client) says so, live: held, uncertain (the connection is suspect), or
// lost — with its session, or as soon as anyone deletes its node (an operator, a cleanup script,
// `zklock release-stale` aimed at the wrong session): every hold that lasts past own_watch_delay
// watches its own node (a shorter one is released before the watch would be worth its request).
//
// Loss is learned on the session thread (session events) or on the C client's completion thread
// (the node's watch); the registry marks the hold lost there, before any user code hears of it,
// then completes the waiters and posts the listeners to the client's executor.
#pragma once

#include "live_objects.hpp"
#include "observer_channel.hpp"
#include "session_port.hpp"
#include "zkr/lock_types.hpp"

#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace zkr::detail {

/// Why a hold stopped standing.
enum class loss_cause {
    none,
    session,       ///< its session is gone (expired, given up) or the client closed
    node_deleted,  ///< its node was deleted by someone else while it stood
};

struct hold {
    hold(std::string group, std::string node_path, std::int64_t session, std::int64_t czxid)
        : group(std::move(group)), node_path(std::move(node_path)), session(session), czxid(czxid) {}
    virtual ~hold() = default;
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;

    const std::string group;      ///< what on_lost listeners subscribe to: the lock path, the latch path...
    const std::string node_path;  ///< the node it stands on
    const std::int64_t session;   ///< the session that made the node
    const std::int64_t czxid;     ///< the node's czxid: the fencing token (0 if the recipe could not read it)
    /// The czxid as the hold's own watch read it (for holds made without it: a lease's node
    /// comes from a transaction, whose reply carries no stat).
    std::atomic<std::int64_t> observed_czxid{0};

    // Guarded by the registry's mutex.
    bool watch_sent = false;  ///< its own-node watch was asked for (by the delay's end or by a fencing_token())
    bool lost = false;
    /// Its node's delete was seen: it reads as lost from then on, while its own session is asked
    /// whether it still stands, which says why (report() then marks it lost, with that cause).
    bool node_gone = false;
    bool released = false;
    loss_cause cause = loss_cause::none;
    std::map<std::uint64_t, completion<>> lost_waiters;  // keyed: a cancelled wait takes its own out
    /// The recipe's own reaction to the loss (a latch rejoins): runs once, on the thread that
    /// learns of it, outside every lock; must not block nor call user code. Set before add().
    std::function<void(loss_cause)> on_lost;
    std::shared_ptr<watch_state> node_watch;

    /// Set before add() by a recipe whose holds the client's observer sees (a lock hold, a
    /// lease): the registry tells it of the hold's release or loss (one of the two, once).
    /// observed.path points into `group`.
    std::shared_ptr<observer_channel> observer;
    recipe_info observed{};
    std::chrono::steady_clock::time_point held_since{};
    void observe(std::shared_ptr<observer_channel> channel, recipe_kind recipe, std::uint64_t id) {
        observer = std::move(channel);
        observed = recipe_info{id, recipe, group};
        held_since = std::chrono::steady_clock::now();
    }

private:
    live_counter<&live_objects::holds> counted_;
};

class hold_registry : public std::enable_shared_from_this<hold_registry> {
public:
    /// How long a hold lasts before its own-node watch is sent (issue 32): a shorter hold costs the
    /// server no watch request (an uncontended lock cycle: create, listing, delete); a longer one
    /// learns of its node's deletion within this bound plus a round trip of the deletion.
    static constexpr std::chrono::milliseconds own_watch_delay{50};

    explicit hold_registry(session_port& port);
    void attach();  // per_client(): subscribes to session events
    static std::shared_ptr<hold_registry> of(session_port& port) { return per_client<hold_registry>(port); }

    /// Starts reporting `h`, and watches its node: the watch is sent once the hold has lasted
    /// own_watch_delay (sooner if fencing_token() asks for a czxid not known yet), after anything
    /// the caller sent for that node before (the holding mark), costing no round trip on the way to
    /// the hold. A node already gone makes the hold lost when the watch's answer says so.
    void add(const std::shared_ptr<hold>& h);
    /// Stops reporting `h`, before its node is deleted: its waiters complete with
    /// errc::cancelled. False if it was released already. `was_lost`: it had been lost.
    bool release(const std::shared_ptr<hold>& h, bool* was_lost = nullptr);

    /// Read live: not_held once released; lost once lost; else the session's health.
    lock_state state_of(const hold& h) const;
    /// The session's lease while state_of() is held; the epoch otherwise.
    std::chrono::steady_clock::time_point valid_until(const hold& h) const;
    /// Completes with errc::lock_lost when `h` is lost, errc::cancelled when released first (or
    /// by a per-operation cancellation through `slot`, any type), errc::not_owner if it was
    /// released already.
    void wait_lost(const std::shared_ptr<hold>& h, completion<> done, boost::asio::cancellation_slot slot = {});
    /// Calls `fn(node path)` on the client's executor when a hold of `group` is lost.
    subscription on_lost(const std::string& group, std::function<void(const std::string&)> fn);

    /// The hold's fencing token: its czxid, waiting (up to `timeout`) for its own watch to have
    /// read it if the recipe could not — the watch is sent now if its delay has not run out: one
    /// round trip. 0 if it is not known by then or the hold was lost.
    std::int64_t fencing_token(const std::shared_ptr<hold>& h, std::chrono::milliseconds timeout);

    std::uint64_t holds_lost() const noexcept { return holds_lost_.load(); }
    std::uint64_t nodes_deleted_under_holds() const noexcept { return nodes_deleted_.load(); }
    /// Holds reported now (tests).
    std::size_t size() const;

private:
    struct listener {
        std::string group;
        std::function<void(const std::string&)> fn;
        std::atomic<bool> active{true};
    };

    void on_session(const session_event& ev);
    /// Sends the hold's own-node watch unless it was sent (or the hold ended) already.
    void send_watch_once(const std::shared_ptr<hold>& h);
    void watch_node(const std::shared_ptr<hold>& h);
    void on_node_gone(const std::shared_ptr<hold>& h);
    void node_gone_because(const std::shared_ptr<hold>& h, loss_cause cause);
    /// Marks `lost` (under the mutex already), then tells everyone outside it.
    void report(std::vector<std::shared_ptr<hold>> lost, loss_cause cause);

    std::weak_ptr<session_port> port_;
    boost::asio::any_io_executor executor_;  // kept: the client may be gone by the time handlers run
    subscription session_subscription_;

    mutable std::mutex mutex_;  // a leaf: nothing is taken or called under it
    mutable std::condition_variable stat_read_;
    std::set<std::shared_ptr<hold>> holds_;
    std::uint64_t next_waiter_ = 0;
    std::multimap<std::string, std::shared_ptr<listener>> listeners_;
    std::atomic<std::uint64_t> holds_lost_{0}, nodes_deleted_{0};
};

}  // namespace zkr::detail
