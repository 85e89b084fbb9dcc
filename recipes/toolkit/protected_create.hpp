// Curator's protected creation of an ephemeral sequential node, with zkr's session check. Pure
// bookkeeping, no I/O: a recipe's state machine sends the requests and tells it what came back.
//
// A sequential create whose reply is lost may or may not have made a node, and cannot be resent
// (it would make a second one). So every attempt names its node with a fresh uuid
// ("_c_<uuid>-<name>"); a listing made after the create settles the doubt: no child with the
// prefix, nothing was made; one, and it is adopted only if it belongs to the client's session now
// (CURATOR-498: adopt it, or it would block us for ever; CURATOR-604: never adopt a node of an
// older session — it goes with that session). Whatever an earlier attempt left is recognised by
// its prefix and deleted; a create no listing could settle is handed to the cleanup service,
// which sweeps for its prefix for as long as the session that sent it lives.
#pragma once

#include "zkr/path.hpp"
#include "zkr/types.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zkr::detail {

/// A create whose outcome no listing settled: any child carrying `prefix` is ours to delete,
/// for as long as `session` (the session current when its reply was lost) lives.
struct unsettled_create {
    std::string prefix;
    std::int64_t session = 0;
    bool persistent = false;  ///< its node outlives the session: swept on any session (delete_persistent)
};

class protected_create {
public:
    /// Nodes made under `parent`, named "_c_<uuid>-<name><sequence>"; at most `max_attempts`
    /// fresh names; `make_uuid` gives each its uuid (injected for tests).
    protected_create(std::string parent, std::string name, int max_attempts, std::function<std::string()> make_uuid);

    /// Starts a new attempt under a fresh uuid: true, or false once max_attempts are used up.
    /// The previous attempt's prefix becomes stale: anything carrying it is ours to delete.
    bool next_attempt();
    /// What the current attempt creates: parent/_c_<uuid>-<name> (the server appends the sequence).
    std::string creation_path() const;
    const std::string& parent() const noexcept { return parent_; }

    /// The create was applied: this is our node.
    void created(const create_result& r);
    /// The create's reply was lost on `session` (0: none): its outcome is in doubt until a
    /// listing of the parent settles it.
    void in_doubt(std::int64_t session);
    /// A listing made after the create settles the current attempt: the child carrying its
    /// prefix, if any (then check its owner with adopt_if_ours()).
    std::optional<std::string> settle(const std::vector<std::string>& children);
    /// The current attempt's create is settled without a listing (the parent itself is gone).
    void settled();
    /// Like settle(), for an attempt that made several nodes under one prefix (one transaction):
    /// every child carrying it.
    std::vector<std::string> settle_all(const std::vector<std::string>& children);
    /// The current attempt's prefix, "_c_<uuid>-".
    const std::string& prefix() const noexcept { return prefix_; }
    /// Adopts `candidate` (a child name) if its stat says our session `session` made it: true,
    /// and it is our node now. Otherwise it is a stale node (of a session that is gone).
    bool adopt_if_ours(const std::string& candidate, const exists_result& r, std::int64_t session);

    /// Children carrying an earlier attempt's prefix: our own leftovers, to delete (full paths).
    std::vector<std::string> stale_children(const std::vector<std::string>& children);
    /// Creates no listing settled, for the sweep; empties the list.
    std::vector<unsettled_create> take_unsettled();

    /// Our node went (with its session): none is ours any more.
    void forget_node();
    bool has_node() const noexcept { return !path_.empty(); }
    /// The last part of node_path() (a view of it: one string per waiter, not two).
    std::string_view node_name() const noexcept { return zkr::node_name(path_); }
    const std::string& node_path() const noexcept { return path_; }
    std::int64_t czxid() const noexcept { return czxid_; }
    /// The session our node was made on.
    std::int64_t session() const noexcept { return session_; }
    bool adopted() const noexcept { return adopted_; }
    int attempts() const noexcept { return attempts_; }
    /// Our own leftovers found and deleted so far.
    int stale_deleted() const noexcept { return stale_deleted_; }
    /// Counts a stale node deleted by the caller (a candidate of an old session).
    void count_stale() noexcept { ++stale_deleted_; }
    /// Creates that made a node (their reply came back).
    int nodes_created() const noexcept { return nodes_created_; }
    std::string full(std::string_view child) const;

private:
    std::string parent_, name_;
    int max_attempts_;
    std::function<std::string()> make_uuid_;
    std::string prefix_;                       // "_c_<uuid>-" of the current attempt
    std::vector<std::string> stale_prefixes_;  // earlier attempts
    std::vector<unsettled_create> unsettled_;
    std::string path_;
    std::int64_t czxid_ = 0, session_ = 0;
    bool adopted_ = false;
    int attempts_ = 0;
    int stale_deleted_ = 0;
    int nodes_created_ = 0;
};

}  // namespace zkr::detail
