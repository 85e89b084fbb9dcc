// One call of a double-barrier member (enter or leave), as a sans-io state machine, on Curator's
// DistributedDoubleBarrier layout: ephemeral "<uuid>" members under a container, a persistent
// "ready" node. Entering: make our node, then list with a watch until "ready" is there or enough
// members are, and make "ready" then. Leaving: ZooKeeper's recipe (the lowest waits for the
// highest; everyone else deletes its node and waits for the lowest); once nobody is left,
// "ready" is deleted. Every decision comes from a listing read from the server: no session
// event lets anyone through. The machine never does I/O: the driver (double_barrier.cpp) sends
// what it asks for, keeps the watch of its last watched read for a `wait`, and drops that watch
// whenever the machine asks for anything else.
//
// Curator's layout beside kazoo's members (issue 44): kazoo's leave deletes "ready" first, so a
// member may never see "ready" although its round closed. An enter watches "ready" (exists, set
// before its first listing, kept for the whole call): the watch's `created` is proof that the
// round closed. A connection drop may lose that event for good (a reconnection does not replay an
// exists watch for a node made and deleted meanwhile): after one, the listing is checked against
// the last one (the barrier node's cversion counts every child made and deleted): no child came
// and went unseen, or too few to have completed a group, and it waits on; else it cannot know, and
// answers errc::outcome_unknown (its node deleted first) instead of waiting out its deadline. A
// leave that is out while one member is left and "ready" is still there deletes "ready": kazoo's
// lowest member waits for every child, "ready" included, and one made again late (a create resent
// after its reply was lost, once kazoo's leave had deleted it) would keep every leave waiting.
//
// Reusable mode (zkr's own layout, no Curator or kazoo peer): the members of round V are under
// "<path>/round-<V>", where V is the data version of <path> itself. An entrant reads V and makes
// its node by a multi (check <path> at version V, create its node): it can only join a round
// that is still open. The round is closed by a multi (create its "ready", set <path>'s data to
// "V+1") that also checks the group's nodes are all there: the round closes only while its group
// is complete on the server, the closer included. Closing moves the version: whoever comes after
// enters round V+1, and a fast member back from leaving round V never counts in it. So <path>'s
// version moved past V says that round V's group was complete.
#pragma once

#include "zkr/error.hpp"
#include "zkr/types.hpp"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace zkr::detail {

namespace barrier_step {
struct make_parents { std::string path; };  ///< `path` and its ancestors, as containers
struct create {
    std::string path;
    create_mode mode = create_mode::ephemeral;
};
struct list {
    std::string path;
    bool watch = false;
};
struct watch_node { std::string path; };  ///< exists() with a watch
/// Reusable mode: exists(`path`), no watch: the open round is its data version.
struct read_round { std::string path; };
/// Reusable mode: delete the round's node `path` (any version): one we made empty for a round
/// that had closed (ZooKeeper never reaps a container that never had a child).
struct remove_round { std::string path; };
/// Reusable mode: a multi of check(`path`, `version`) and create(`node`, ephemeral).
struct join {
    std::string path;
    std::int32_t version = 0;
    std::string node;
};
/// Reusable mode: a multi of check(each of `members`: ours and enough others to complete the
/// group), create(`ready`, persistent) and set_data(`path`, `data`, `version`).
struct close_round {
    std::vector<std::string> members;
    std::string ready;
    std::string path;
    std::int32_t version = 0;
    std::string data;
};
/// Curator's layout, enter: exists(`path`, the round's "ready") with a watch that the driver keeps
/// for the rest of the call (never dropped by another step; replaced by the next watch_ready);
/// every later reply says whether it fired `created` (barrier_reply::ready_created).
struct watch_ready { std::string path; };
/// Curator's layout, leave: delete `path` ("ready"; any version, no_node is fine), not resent.
struct remove_ready { std::string path; };
struct wait {};                           ///< for the watch the last watched read left (and the ready watch)
/// Delete our node, and hear back: resent while the session lives (guaranteed), so that nobody
/// counts a member that gave up once the call has returned.
struct remove_own { std::string path; };
/// Delete `path` once everyone has left (guaranteed, not waited for).
struct done {
    bool passed = false;     ///< entered (all in) or left (all out); false: the deadline passed
    error_code error;        ///< the call failed (our node deleted first)
    std::string what;
    std::string delete_after;  ///< "ready", when the last member left
    std::string round;         ///< reusable mode: the round's node an enter passed in (for its leave)
};
}  // namespace barrier_step

struct barrier_reply {
    error_code error;
    std::vector<std::string> children;  ///< for list
    bool exists = false;                ///< for watch_node, read_round
    std::int32_t version = 0;           ///< for read_round: the path's data version
    bool fired = false;                 ///< for wait: the watch fired (else it ended with its session)
    std::int32_t cversion = 0;          ///< for list: the barrier node's children version
    /// Any reply: session_port::connection_drops() as the reply came.
    std::uint64_t drops = 0;
    /// Any reply: the ready watch (watch_ready) fired `created` ("ready" was made since it was set).
    bool ready_created = false;
    /// Any reply: the ready watch ended without that (its session lost, or removed).
    bool ready_watch_ended = false;
};

class double_barrier_fsm {
public:
    using request = std::variant<barrier_step::make_parents, barrier_step::create, barrier_step::list,
                                 barrier_step::watch_node, barrier_step::wait, barrier_step::remove_own, barrier_step::read_round,
                                 barrier_step::join, barrier_step::close_round, barrier_step::remove_round,
                                 barrier_step::watch_ready, barrier_step::remove_ready, barrier_step::done>;

    /// `once`: a zero timeout — enter lists once and gives up instead of waiting. `reusable`: the
    /// rounds' layout (else Curator's); a reusable leave is given the `round` its enter passed in.
    double_barrier_fsm(std::string path, std::string name, int member_count, bool leaving, bool once, bool reusable = false,
                       std::string round = {});

    request start();
    request on(const barrier_reply& r);
    /// Given up (deadline: `reason` timed_out; cancelled): our node is deleted, then done. Where
    /// it may not give up yet (nullopt), the reply due decides (may_give_up_now()): it gives up at
    /// the first step where it may, or ends as that reply says. Nullopt too once it is ending.
    std::optional<request> abandon(error_code reason);

    bool finished() const noexcept { return phase_ == phase::finished; }
    /// Whether our node may be on the server (made and not known deleted).
    bool may_own_node() const noexcept { return own_; }

private:
    enum class phase {
        idle, making_parents, creating_own, listing, making_ready, waiting, watching, removing, finished,
        reading_round, making_round, joining, removing_round,  // reusable mode
        arming_ready, removing_ready                           // Curator's layout
    };

    request on_phase(const barrier_reply& r);
    bool may_give_up_now() const noexcept;
    request make_own();
    request evaluate_enter(const barrier_reply& r);
    request evaluate_leave(const std::vector<std::string>& children);
    request fail(error_code ec, std::string what);
    request give_up(error_code reason);
    request answer_after_own_delete(barrier_step::done d);
    request finish(bool passed, std::string delete_after = {});
    request list_again();
    request make_parents();
    request enter_round(std::int32_t version);
    request join_round();
    void set_dir(std::string dir);
    request arm_ready();
    bool may_have_closed_unseen(const barrier_reply& r, const std::vector<std::string>& members) const;

    std::string path_, name_;
    std::string dir_, node_, ready_;  // the members' node (the path, or the round's), ours, its "ready"
    int member_count_;
    bool leaving_, once_;
    bool reusable_;
    std::int32_t version_ = 0;  // reusable: the round's number
    bool joined_ = false;       // reusable: our node was in this round
    bool round_moved_ = false;  // reusable: a join found the path's version moved
    bool made_round_ = false;   // reusable: the round's node is one we made
    phase phase_ = phase::idle;
    bool own_ = false;  // our node may exist
    bool parents_retried_ = false;
    std::optional<barrier_step::done> pending_;  // what to answer once our node is deleted
    std::optional<error_code> deferred_;         // a give-up asked for where it could not be made
    // Curator's layout, enter: the ready watch and the last listing checked against it.
    bool ready_armed_ = false;        // the ready watch stands
    std::uint64_t armed_drops_ = 0;   // connection drops when it was set (or last checked)
    bool have_baseline_ = false;      // a listing checked against the watch (or the one before)
    bool gap_ = false;                // set again after the baseline: the next listing is checked
    std::int32_t base_cversion_ = 0;
    std::vector<std::string> base_members_;
    int ready_removals_ = 0;          // leave: "ready" deleted while one member is left
};

}  // namespace zkr::detail
