// Joining a sequence queue, as a sans-io state machine: create our node (protected), list the
// queue, and either hold (the queue's rules say we are first) or watch the node whose departure
// may let us in, and wait. The mutex, both sides of the read/write lock, the leader latch and
// the semaphore's mutex all run it; they differ only in the queue kind (sequence_queue.hpp).
// fsm_runner.hpp runs it against a session; unit tests run it against scripted replies and
// against a model server with faults injected at every step.
//
// While it waits it keeps what it needs to go on — its node, the node it watches and what that
// node's departure will mean — not the listing: a waiter costs the same at the head of a queue
// of ten as at the back of a queue of ten thousand.
#pragma once

#include "protected_create.hpp"
#include "sequence_queue.hpp"
#include "steps.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zkr::detail {

struct queue_options {
    std::string path;                    ///< the queue's parent node (the lock path, the latch path)
    queue_kind kind = queue_kind::exclusive;
    std::string data;                    ///< data of our node (who we are)
    bool wait = true;                    ///< false: one round, then give up (try_lock)
    /// A downgrade: the write node this owner holds must not block its read node — but only
    /// while that node is of the session our node is made on. A node of a lost hold is never ours.
    std::string own_write_node;
    std::int64_t own_write_session = 0;
    int max_attempts = 16;               ///< fresh nodes we may create before giving up
    /// Mark our node once it holds, when a successor may be waiting on it without knowing that
    /// it holds (docs/lock-protocol.md, "One-round-trip hand-off"). Readers never mark.
    bool mark_holding = true;
};

namespace step {
struct done {  ///< finished
    bool acquired = false;
    /// Acquired, and a successor may be waiting without knowing we hold: mark our node (set its
    /// data to the holding mark, version 0) before anything else is sent for this hold.
    bool mark = false;
    error_code error;                     ///< why it failed; none for a try that found the queue taken
    std::vector<unsettled_create> sweep;  ///< look for these once more and delete what is found
};
}  // namespace step

class queue_fsm {
public:
    using done_type = step::done;
    using action = basic_action<step::done>;

    /// `make_uuid` gives a fresh random uuid per created node (injected for tests).
    queue_fsm(queue_options options, std::function<std::string()> make_uuid);

    action start();
    /// Any reply; `session` is the client's session id now (0 while it has none).
    action on(const any_reply& r, std::int64_t session);

    action on_created_and_listed(error_code create_error, const create_result& created, error_code list_error,
                                 const listing& children, std::int64_t session);
    /// The create was answered, its listing still due: a node made is known from here on (a
    /// give-up deletes it at once), and our node's delete is asked for if given up already.
    action on_create_answered(error_code error, const create_result& created);
    action on_parents_created(error_code error);
    action on_listed(error_code error, const listing& children, std::int64_t session);
    action on_owner(error_code error, const exists_result& result, std::int64_t session);
    /// The replies of a `watch` step. `error` is the get_data's if the mark was wanted, else the
    /// get_children's: none means the node exists and that watch is set, on the client's session
    /// `session`; `marked`: its data carried the holding mark; `child_watch_set`: the child watch
    /// is set (too); `zkr_node`: its data is zkr's owner data (only then does a later change of
    /// it count as the mark).
    /// `own_gone`: our own node is gone (its watch found none).
    action on_watch_set(error_code error, std::int64_t session, bool marked = false, bool child_watch_set = false,
                        bool zkr_node = false, bool own_gone = false);
    /// A watch of the `watch` step fired (or ended with an error: its session was lost, or it
    /// was removed): the data watch, or the child watch if `child_watch`. The runner passes on
    /// only the first of the two for a departure or an error.
    /// `own_node`: the watch on our own node fired (or ended).
    action on_watch_event(error_code error, event_type type, std::int64_t session, bool child_watch = false,
                          bool own_node = false);
    action on_watch_removed();
    /// Give up (timeout, cancellation): returns what to send to clean up — our node's delete
    /// right away whenever we know it — or step::none when a reply is due first (the rest of the
    /// cleanup follows it). Ignored once done. The machine never reports acquired after this.
    action abandon(error_code reason);

    bool finished() const noexcept { return phase_ == phase::finished; }
    const queue_options& options() const noexcept { return options_; }
    /// After abandon(): a node of ours may exist that no delete was asked for yet (the reply of
    /// a create is due, or of the listing that settles one). Cleared as the machine learns it.
    bool cleanup_pending() const noexcept;
    /// Our node once acquired (or the last one we had).
    const std::string& node_path() const noexcept { return create_.node_path(); }
    /// Our nodes now (for the runner's last-resort cleanup).
    std::vector<std::string> owned_nodes() const { return {node_path()}; }
    std::string_view node_name() const noexcept { return create_.node_name(); }
    std::int64_t czxid() const noexcept { return create_.czxid(); }
    std::int64_t session() const noexcept { return create_.session(); }
    bool adopted() const noexcept { return create_.adopted(); }
    int attempts() const noexcept { return create_.attempts(); }
    int stale_deleted() const noexcept { return create_.stale_deleted(); }
    int nodes_created() const noexcept { return create_.nodes_created(); }
    /// Departures of a watched node seen (each one a wake-up).
    int departures() const noexcept { return departures_; }
    const std::string& watched() const noexcept { return watched_; }
    /// The watched node was seen marked holding (by its data, or a change of it).
    bool watched_holds() const noexcept { return watched_holds_; }
    /// Departures that gave us the lock with no listing (1 or 0).
    int listing_free_handoffs() const noexcept { return listing_free_handoffs_; }
    /// A downgrade's read node was created behind a queued writer: the owner's write node must
    /// stay until this read hold ends, or that writer would get in beside it (CURATOR-621).
    bool pins_write_node() const noexcept { return pins_write_node_; }

private:
    enum class phase {
        idle, creating, making_parents, listing, recovering, checking_owner, setting_watch, waiting, removing_watch,
        finished,
    };

    action new_attempt(std::vector<std::string> deletes = {});
    action restart(std::vector<std::string> deletes, error_code why);
    /// `queue` read without `skipped` (shared with the listing's other readers: never copied).
    action evaluate(const std::vector<contender>& queue, skipped_nodes skipped, std::int64_t session,
                    std::vector<std::string> deletes);
    action after_departure(std::int64_t session);
    action watch_step();
    /// Our node is gone while we wait (someone deleted it): take our watch off, then queue anew.
    action own_node_gone();
    action recover(const listing& children);
    action finish(bool acquired, error_code error, std::vector<std::string> deletes = {});
    bool should_mark() const;
    action finish_abandoned(std::vector<std::string> deletes = {});
    action ask(decltype(action::next) next, std::vector<std::string> deletes = {});
    action create_step();
    /// The listing as a queue; our own leftovers in it are to be skipped (their names are added
    /// to `skipped`, their deletes to `deletes`).
    const std::vector<contender>& take_listing(const listing& children, skipped_nodes& skipped,
                                               std::vector<std::string>& deletes);
    std::string ignored_write_node() const;
    /// Our node, to delete now, unless its delete was asked for already.
    void delete_ours(std::vector<std::string>& deletes);

    queue_options options_;
    protected_create create_;
    phase phase_ = phase::idle;
    bool node_deleted_ = false;       // its delete was asked for
    bool create_known_ = false;       // this attempt's create was answered with our node

    // What the last evaluation left to go on (no listing is kept while waiting).
    bool fresh_listing_ = false;      // we hold on a listing made after the last departure we saw...
    bool someone_behind_ = false;     // ... and that listing showed someone after us
    listing recovered_children_;  // a listing kept only while a candidate's owner is checked
    std::string candidate_;           // a node carrying our prefix, being checked
    bool candidate_deleted_ = false;  // ... whose delete was asked for already (an abandon)
    std::string watched_;
    bool watched_reads_ = false;      // the watched node is a reader's
    bool departure_holds_ = false;    // the watched node's departure alone gives us the lock
    bool departure_pins_ = false;     // ... past a queued writer, as a downgrade (see pins_write_node)
    bool watched_holds_ = false;      // the watched node was marked: nodes before it are all gone
    bool watched_is_zkr_ = false;     // its data was zkr's: a change of it is the mark
    bool child_watch_set_ = false;    // its departure is watched even once its data watch fired
    bool want_mark_ = true;           // its departure alone would not tell us we hold
    int listing_free_handoffs_ = 0;
    int departures_ = 0;
    bool restart_after_removal_ = false;  // the watch was set on a session our node is not of
    std::optional<error_code> abandoned_;
    bool pins_write_node_ = false;
};

}  // namespace zkr::detail
