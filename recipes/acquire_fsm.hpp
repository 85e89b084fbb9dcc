// The acquisition of one lock node, as a sans-io state machine: it says which ZooKeeper request
// to send next and digests the replies. The lock engine runs it against a zkr::client; unit
// tests run it against scripted replies. Mutex and read/write lock share it: they differ only
// in the driver's decision (lock_driver.hpp).
#pragma once

#include "lock_driver.hpp"
#include "zkr/types.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include "zkr/error.hpp"
#include <vector>

namespace zkr::detail {

struct acquire_options {
    std::string lock_path;               ///< the lock's parent node
    lock_kind kind = lock_kind::exclusive;
    std::string owner_data;              ///< data of our node (who we are)
    bool wait = true;                    ///< false: one round, then give up (try_lock)
    std::string ignore;                  ///< a node of our own thread that must not block us
    int max_attempts = 16;               ///< fresh nodes we may create before giving up
};

class acquire_fsm {
public:
    enum class step {
        none,             ///< nothing to send now: a reply is still due
        create_and_list,  ///< create `path` (ephemeral sequential, owner data) and list the lock path, back to back
        create_parents,   ///< create the lock path and its missing ancestors, then report on_parents_created
        list,             ///< list the lock path
        check_owner,      ///< exists(`path`): which session made it
        watch,            ///< get_data(`path`) leaving a watch
        wait,             ///< wait for the watch left by the last `watch`
        remove_watch,     ///< remove that watch, then report on_watch_removed
        done,             ///< finished: see `acquired` and `error`
    };

    struct action {
        step what = step::none;
        std::string path;                  ///< the node (or, for create_and_list, the name prefix) the step is about
        std::vector<std::string> deletes;  ///< our own nodes to remove (guaranteed) before the step
        bool acquired = false;             ///< for done
        zkr::error_code error;             ///< for done: why it failed; none for a try that found the lock taken
        std::vector<std::string> sweep_prefixes;  ///< for done: delete any child carrying these (creates of unknown outcome)
    };

    /// `make_uuid` gives a fresh random uuid per created node (injected for tests).
    acquire_fsm(acquire_options options, std::function<std::string()> make_uuid);

    action start();

    /// Replies of create_and_list; `session` is the client's session id now (0 while it has none).
    action on_created_and_listed(zkr::error_code create_error, const create_result& created,
                                 zkr::error_code list_error, const std::vector<std::string>& children,
                                 std::int64_t session);
    action on_parents_created(zkr::error_code error);
    action on_listed(zkr::error_code error, const std::vector<std::string>& children, std::int64_t session);
    action on_owner(zkr::error_code error, const exists_result& result, std::int64_t session);
    /// The get_data of a `watch` step: no error means the node exists and the watch is set.
    action on_watch_set(zkr::error_code error, std::int64_t session);
    /// The watch fired (or ended with an error: its session was lost, or it was removed).
    action on_watch_event(zkr::error_code error, event_type type, std::int64_t session);
    action on_watch_removed();
    /// Give up (timeout, cancellation): returns what to send to clean up, or step::none when a
    /// reply is due first (cleanup follows it). Ignored once done.
    action abandon(zkr::error_code reason);

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
    /// A downgrade's read node was created behind a queued writer: the thread's write node must
    /// stay until this read hold ends, or that writer would get in beside it (CURATOR-621).
    bool pins_write_node() const noexcept { return pins_write_node_; }

private:
    enum class phase {
        idle, creating, making_parents, listing, recovering, checking_owner, setting_watch, waiting, removing_watch,
        finished,
    };

    action new_attempt(std::vector<std::string> deletes = {});
    action restart(std::vector<std::string> deletes, zkr::error_code why);
    action evaluate(std::int64_t session, std::vector<std::string> deletes = {});
    action after_departure(std::int64_t session);
    action recover(const std::vector<std::string>& children);
    action finish(bool acquired, zkr::error_code error, std::vector<std::string> deletes = {});
    action finish_abandoned(std::vector<std::string> deletes = {});
    std::vector<std::string> stale_nodes(const std::vector<std::string>& children);
    std::vector<std::string> take_listing(const std::vector<std::string>& children);
    std::string full(std::string_view name) const;
    void prune(const std::string& name);

    acquire_options options_;
    std::function<std::string()> make_uuid_;
    phase phase_ = phase::idle;

    std::string prefix_;                       // "_c_<uuid>-" of the current attempt
    std::vector<std::string> stale_prefixes_;  // earlier attempts: anything left of them goes
    std::vector<std::string> unknown_prefixes_;  // creates whose outcome no listing has settled yet
    std::string node_, path_;                  // our node, once known
    std::int64_t czxid_ = 0, session_ = 0;
    bool adopted_ = false;
    int attempts_ = 0;
    int stale_deleted_ = 0;

    std::vector<contender> queue_;  // the last listing: nodes below ours can only leave it
    std::vector<std::string> recovered_children_;
    std::string candidate_;         // a node carrying our prefix, being checked
    std::string watched_;
    std::optional<zkr::error_code> abandoned_;
    bool pins_write_node_ = false;
};

}  // namespace zkr::detail
