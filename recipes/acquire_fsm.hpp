// The acquisition of one lock node, as a sans-io state machine: it says which ZooKeeper request
// to send next and digests the replies. The lock engine runs it against a zkr::client; unit
// tests run it against scripted replies and against a model of a server with faults injected at
// every step. Mutex and read/write lock share it: they differ only in the driver's decision
// (lock_driver.hpp).
#pragma once

#include "lock_driver.hpp"
#include "zkr/error.hpp"
#include "zkr/types.hpp"

#include <cassert>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace zkr::detail {

struct acquire_options {
    std::string lock_path;               ///< the lock's parent node
    lock_kind kind = lock_kind::exclusive;
    std::string owner_data;              ///< data of our node (who we are)
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

/// A create whose outcome no listing settled: any child carrying `prefix` is ours to delete,
/// for as long as `session` (the session current when its reply was lost) lives.
struct unsettled_create {
    std::string prefix;
    std::int64_t session = 0;
};

/// What the machine asks for next. Each step carries only what belongs to it.
namespace step {
struct none {};                                   ///< nothing to send now: a reply is still due
struct create_and_list { std::string path; };     ///< create `path` + sequence (ephemeral, owner data), then list, back to back
struct create_parents { std::string path; };      ///< create the lock path and its ancestors, then on_parents_created
struct list { std::string path; };                ///< list the lock path
struct check_owner { std::string node; };         ///< exists(node): which session made it
/// get_children(node) leaving a child watch (a lock node is ephemeral and has no children: it
/// fires only when the node goes) and, if `want_mark`, get_data(node) leaving a data watch sent
/// right before it (it fires when the node is marked holding, or goes). Then on_watch_set.
/// The mark is wanted only when the node's departure alone would not tell us we hold.
struct watch {
    std::string node;
    bool want_mark = true;
};
struct wait { std::string node; };                ///< wait for the watches the last `watch` left
struct remove_watch { std::string node; };        ///< remove what is left of them, then on_watch_removed
struct done {                                     ///< finished
    bool acquired = false;
    /// Acquired, and a successor may be waiting without knowing we hold: mark our node (set its
    /// data to the holding mark, version 0) before anything else is sent for this hold.
    bool mark = false;
    error_code error;                             ///< why it failed; none for a try that found the lock taken
    std::vector<unsettled_create> sweep;          ///< look for these once more and delete what is found
};
}  // namespace step

class acquire_fsm {
public:
    struct action {
        std::variant<step::none, step::create_and_list, step::create_parents, step::list, step::check_owner,
                     step::watch, step::wait, step::remove_watch, step::done>
            next;
        std::vector<std::string> deletes;  ///< our own nodes to remove (guaranteed) before the step

        template <class Step>
        bool is() const noexcept { return std::holds_alternative<Step>(next); }
        template <class Step>
        const Step& as() const {
            assert(is<Step>());
            return std::get<Step>(next);
        }
    };

    /// `make_uuid` gives a fresh random uuid per created node (injected for tests).
    acquire_fsm(acquire_options options, std::function<std::string()> make_uuid);

    action start();

    /// Replies of create_and_list; `session` is the client's session id now (0 while it has none).
    action on_created_and_listed(error_code create_error, const create_result& created, error_code list_error,
                                 const std::vector<std::string>& children, std::int64_t session);
    action on_parents_created(error_code error);
    action on_listed(error_code error, const std::vector<std::string>& children, std::int64_t session);
    action on_owner(error_code error, const exists_result& result, std::int64_t session);
    /// The replies of a `watch` step. `error` is the get_data's if the mark was wanted, else the
    /// get_children's: none means the node exists and that watch is set, on the client's session
    /// `session`; `marked`: its data carried the holding mark; `child_watch_set`: the child watch
    /// is set (too); `zkr_node`: its data is zkr's owner data (only then does a later change of
    /// it count as the mark).
    action on_watch_set(error_code error, std::int64_t session, bool marked = false, bool child_watch_set = false,
                        bool zkr_node = false);
    /// A watch of the `watch` step fired (or ended with an error: its session was lost, or it
    /// was removed): the data watch, or the child watch if `child_watch`. The engine passes on
    /// only the first of the two for a departure or an error.
    action on_watch_event(error_code error, event_type type, std::int64_t session, bool child_watch = false);
    action on_watch_removed();
    /// Give up (timeout, cancellation): returns what to send to clean up, or step::none when a
    /// reply is due first (cleanup follows it). Ignored once done. The machine never reports
    /// acquired after this.
    action abandon(error_code reason);

    bool finished() const noexcept { return phase_ == phase::finished; }
    /// Our node once acquired (or the last one we had).
    const std::string& node_path() const noexcept { return path_; }
    const std::string& node_name() const noexcept { return node_; }
    std::int64_t czxid() const noexcept { return czxid_; }
    std::int64_t session() const noexcept { return session_; }
    bool adopted() const noexcept { return adopted_; }
    int attempts() const noexcept { return attempts_; }
    int stale_deleted() const noexcept { return stale_deleted_; }
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
    action evaluate(std::int64_t session, std::vector<std::string> deletes = {});
    action after_departure(std::int64_t session);
    action recover(const std::vector<std::string>& children);
    action finish(bool acquired, error_code error, std::vector<std::string> deletes = {});
    bool should_mark() const;
    action finish_abandoned(std::vector<std::string> deletes = {});
    action ask(decltype(action::next) next, std::vector<std::string> deletes = {});
    std::vector<std::string> stale_nodes(const std::vector<std::string>& children);
    std::vector<std::string> take_listing(const std::vector<std::string>& children);
    std::string full(std::string_view name) const;
    std::string creation_path() const;
    void prune(const std::string& name);
    void settle(const std::string& prefix);

    acquire_options options_;
    std::function<std::string()> make_uuid_;
    phase phase_ = phase::idle;

    std::string prefix_;                       // "_c_<uuid>-" of the current attempt
    std::vector<std::string> stale_prefixes_;  // earlier attempts: anything left of them goes
    std::vector<unsettled_create> unsettled_;  // creates whose outcome no listing has settled yet
    std::string node_, path_;                  // our node, once known
    std::int64_t czxid_ = 0, session_ = 0;
    bool adopted_ = false;
    int attempts_ = 0;
    int stale_deleted_ = 0;

    std::vector<contender> queue_;  // the last listing: nodes below ours can only leave it
    bool fresh_listing_ = false;    // queue_ is a listing made after the last departure we saw
    std::vector<std::string> recovered_children_;
    std::string candidate_;         // a node carrying our prefix, being checked
    std::string watched_;
    bool watched_holds_ = false;    // the watched node was marked: nodes below it are all gone
    bool watched_is_zkr_ = false;   // its data was zkr's: a change of it is the mark
    bool child_watch_set_ = false;  // its departure is watched even once its data watch fired
    bool want_mark_ = true;         // its departure alone would not tell us we hold
    int listing_free_handoffs_ = 0;
    bool restart_after_removal_ = false;  // the watch was set on a session our node is not of
    std::optional<error_code> abandoned_;
    bool pins_write_node_ = false;
};

}  // namespace zkr::detail
