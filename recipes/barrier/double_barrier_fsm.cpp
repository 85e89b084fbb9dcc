#include "double_barrier_fsm.hpp"

#include "zkr/error.hpp"
#include "zkr/path.hpp"

#include <algorithm>

namespace zkr::detail {

namespace {
constexpr const char* ready_name = "ready";

// kazoo names its members uuid4().hex: 32 lowercase hex digits (Curator and zkr: 36 characters,
// with dashes).
bool kazoo_name(const std::string& name) {
    return name.size() == 32 && std::all_of(name.begin(), name.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::string> members_of(std::vector<std::string> children) {
    children.erase(std::remove(children.begin(), children.end(), ready_name), children.end());
    std::sort(children.begin(), children.end());  // Curator and kazoo order them so too
    return children;
}
}  // namespace

double_barrier_fsm::double_barrier_fsm(std::string path, std::string name, int member_count, bool leaving, bool once,
                                       bool reusable, std::string round)
    : path_(std::move(path)),
      name_(std::move(name)),
      member_count_(member_count),
      leaving_(leaving),
      once_(once),
      reusable_(reusable),
      own_(leaving) {
    set_dir(reusable_ && leaving_ ? std::move(round) : path_);
}

void double_barrier_fsm::set_dir(std::string dir) {
    dir_ = std::move(dir);
    node_ = join_path(dir_, name_);
    ready_ = join_path(dir_, ready_name);
}

double_barrier_fsm::request double_barrier_fsm::start() {
    if (leaving_) return list_again();
    return make_parents();
}

double_barrier_fsm::request double_barrier_fsm::make_parents() {
    phase_ = phase::making_parents;
    return barrier_step::make_parents{path_};
}

double_barrier_fsm::request double_barrier_fsm::enter_round(std::int32_t version) {
    version_ = version;
    joined_ = false;
    round_moved_ = false;
    made_round_ = false;
    own_ = false;
    set_dir(join_path(path_, "round-" + std::to_string(version)));
    phase_ = phase::making_round;
    return barrier_step::create{dir_, create_mode::container};
}

double_barrier_fsm::request double_barrier_fsm::join_round() {
    phase_ = phase::joining;
    own_ = true;  // from here on, a give-up deletes it
    return barrier_step::join{path_, version_, node_};
}

double_barrier_fsm::request double_barrier_fsm::arm_ready() {
    // Before our node is made: from then on, a "ready" made for our round is seen, by a listing
    // or by this watch's event (issue 44).
    phase_ = phase::arming_ready;
    ready_armed_ = false;
    gap_ = have_baseline_;  // the next listing is checked against the last one: the watch was down
    return barrier_step::watch_ready{ready_};
}

bool double_barrier_fsm::may_have_closed_unseen(const barrier_reply& r, const std::vector<std::string>& members) const {
    // Between the baseline listing and this one (neither with "ready"), the barrier node's
    // children changed r.cversion - base_cversion_ times: once per member that came or went for
    // good (the symmetric difference), twice per child made and deleted in between — "ready"
    // among them, if the round closed unseen. At most |union| + (those children - 1) members
    // were then in at once: fewer than member_count, and nobody can have made "ready".
    std::vector<std::string> both, either;
    std::set_intersection(base_members_.begin(), base_members_.end(), members.begin(), members.end(), std::back_inserter(both));
    std::set_union(base_members_.begin(), base_members_.end(), members.begin(), members.end(), std::back_inserter(either));
    const long changes = static_cast<long>(r.cversion) - base_cversion_;
    const long came_or_went = static_cast<long>(either.size() - both.size());
    const long passing = (changes - came_or_went) / 2;  // children made and deleted in between
    if (passing < 1) return false;                      // "ready" was never made
    return static_cast<long>(either.size()) + passing - 1 >= member_count_;
}

double_barrier_fsm::request double_barrier_fsm::make_own() {
    if (!reusable_ && !leaving_ && !ready_armed_) return arm_ready();
    phase_ = phase::creating_own;
    own_ = true;  // from here on, a give-up deletes it
    return barrier_step::create{node_, create_mode::ephemeral};
}

double_barrier_fsm::request double_barrier_fsm::list_again() {
    phase_ = phase::listing;
    return barrier_step::list{dir_, !leaving_};
}

double_barrier_fsm::request double_barrier_fsm::finish(bool passed, std::string delete_after) {
    phase_ = phase::finished;
    return barrier_step::done{passed, {}, {}, std::move(delete_after), reusable_ && passed && !leaving_ ? dir_ : std::string()};
}

double_barrier_fsm::request double_barrier_fsm::answer_after_own_delete(barrier_step::done d) {
    phase_ = phase::finished;
    if (!own_) return d;
    // Our node goes before the caller hears, so nobody counts a member that left.
    pending_ = std::move(d);
    phase_ = phase::removing;
    return barrier_step::remove_own{node_};
}

double_barrier_fsm::request double_barrier_fsm::fail(error_code ec, std::string what) {
    const char* call = leaving_ ? "zkr::double_barrier::leave_for: " : "zkr::double_barrier::enter_for: ";
    return answer_after_own_delete(barrier_step::done{false, ec, call + what, {}, {}});
}

bool double_barrier_fsm::may_give_up_now() const noexcept {
    // An enter's create of its node may still be resent and land after a delete sent now (a
    // ghost member that lets others through early); "ready" may already let the others through
    // counting us: their answers decide. A leave gives up only where the old recipe's deadline
    // bound it, while it watches or waits: its own delete and the listings that end it go on,
    // so the last one out always deletes "ready".
    if (leaving_) return phase_ == phase::watching || phase_ == phase::waiting;
    return phase_ != phase::idle && phase_ != phase::creating_own && phase_ != phase::joining && phase_ != phase::making_ready;
}

std::optional<double_barrier_fsm::request> double_barrier_fsm::abandon(error_code reason) {
    if (phase_ == phase::finished || pending_) return std::nullopt;  // ending already: its answer stands
    if (!may_give_up_now()) {
        if (!deferred_) deferred_ = reason;  // the reply due decides where it can give up
        return std::nullopt;
    }
    return give_up(reason);
}

double_barrier_fsm::request double_barrier_fsm::on(const barrier_reply& r) {
    auto next = on_phase(r);
    // A give-up that came while a reply was due: made at the first step where it may be.
    if (deferred_ && !pending_ && !std::holds_alternative<barrier_step::done>(next)) {
        bool safe = leaving_ ? std::holds_alternative<barrier_step::watch_node>(next) || std::holds_alternative<barrier_step::wait>(next)
                             : phase_ != phase::making_ready;  // the group is complete: we make "ready" and pass
        // (a join or create about to be sent is not sent: giving up there is safe)
        if (safe) return give_up(*deferred_);
    }
    return next;
}

double_barrier_fsm::request double_barrier_fsm::give_up(error_code reason) {
    // A deadline is no error: the call answers passed == false.
    return answer_after_own_delete(barrier_step::done{false, reason == errc::timed_out ? error_code{} : reason, {}, {}, {}});
}

double_barrier_fsm::request double_barrier_fsm::evaluate_enter(const barrier_reply& r) {
    const auto& children = r.children;
    bool ready = std::find(children.begin(), children.end(), ready_name) != children.end();
    bool ours = std::find(children.begin(), children.end(), name_) != children.end();
    if (reusable_) {
        if (ours) joined_ = true;
        else own_ = false;
        // In this round and it closed: through (our node may have gone with an expired session
        // after the group was complete). Never joined, or the path's version moved with no
        // "ready" here (the round left, or the path reaped and made anew: its version starts
        // again, so a moved version alone proves nothing): the next round.
        if (!ours && ready && joined_) return finish(true);
        if (!ours && (!joined_ || round_moved_)) {
            if (made_round_ && children.empty()) {  // made by us for a round gone by: never reaped
                made_round_ = false;
                phase_ = phase::removing_round;
                return barrier_step::remove_round{dir_};
            }
            phase_ = phase::reading_round;
            return barrier_step::read_round{path_};
        }
        if (!ours) return join_round();  // our session expired while we waited: again, if still open
    }
    if (!reusable_) {
        // Curator's layout. The ready watch stood before our node was made; a listing before it
        // too (the first baseline). "ready" made since: our round closed, though kazoo's leave
        // may have deleted it since.
        if (r.ready_watch_ended) ready_armed_ = false;  // with its session (our node with it)
        if (ours && (ready || r.ready_created)) return finish(true);
        auto members = members_of(children);
        // A group complete now (ours in it) needs no proof of the past: "ready" is made below.
        const bool complete = ours && static_cast<int>(members.size()) >= member_count_;
        if (!ready_armed_ || r.drops != armed_drops_ || gap_) {
            // The watch may have missed "ready" made and deleted (a connection dropped since it
            // was set): only the children's count of changes since the last listing can tell.
            if (ours && !complete && (!have_baseline_ || may_have_closed_unseen(r, members)))
                return fail(make_error_code(errc::outcome_unknown),
                            "cut off from " + quoted_path(path_) +
                                " while its round may have closed: \"ready\" may have been made and deleted unseen "
                                "(kazoo's leave deletes it first); whether the group was complete is unknown");
            armed_drops_ = r.drops;  // a reconnection set the watch again before this listing
            gap_ = false;
        }
        have_baseline_ = true;
        base_cversion_ = r.cversion;
        base_members_ = std::move(members);
        if (!ready_armed_) return arm_ready();  // then a listing, then our node if it is not there
    }
    if (!ours) {
        // Our session expired while we waited, and our node with it: enter again on the new one
        // (nobody passes on our old node, and we do not pass without one). Curator's layout: or
        // the baseline listing before our node.
        return make_own();
    }
    if (ready) return finish(true);
    if (static_cast<int>(members_of(children).size()) >= member_count_) {
        phase_ = phase::making_ready;
        if (reusable_) {
            // Closed only while the group is there: ours and enough others, checked in the same
            // transaction (a node gone since the listing fails it, and we look again).
            std::vector<std::string> group{node_};
            for (const auto& m : members_of(children)) {
                if (static_cast<int>(group.size()) >= member_count_) break;
                if (m != name_) group.push_back(join_path(dir_, m));
            }
            return barrier_step::close_round{std::move(group), ready_, path_, version_, std::to_string(version_ + 1)};
        }
        return barrier_step::create{ready_, create_mode::persistent};
    }
    if (once_) return give_up(make_error_code(errc::timed_out));  // a zero timeout lists once
    phase_ = phase::waiting;
    return barrier_step::wait{};
}

double_barrier_fsm::request double_barrier_fsm::evaluate_leave(const std::vector<std::string>& children) {
    auto members = members_of(children);
    if (members.empty()) {
        own_ = false;
        return finish(true, ready_);  // everyone has left: the next round waits for its own members
    }
    auto ours = std::find(members.begin(), members.end(), name_);
    if (ours == members.end()) own_ = false;
    if (!reusable_ && ours == members.end() && members.size() == 1 && ready_removals_ < 3 && kazoo_name(members.front()) &&
        std::find(children.begin(), children.end(), ready_name) != children.end()) {
        // We are out, one member is left, a kazoo member, and "ready" is still there: kazoo's
        // lowest member waits for every other child, "ready" included (its leave deletes "ready"
        // first, but one made again after that — a create resent late — would keep it, and us,
        // waiting for ever). It goes now. Not for a Curator or zkr member: that one may be still
        // entering, cut off, and "ready" is what tells it the round closed.
        phase_ = phase::removing_ready;
        return barrier_step::remove_ready{ready_};
    }
    if (ours != members.end() && (members.size() == 1 || ours != members.begin())) {
        // The last one, or not the lowest: our node goes, then we look again.
        phase_ = phase::removing;
        return barrier_step::remove_own{node_};
    }
    // The lowest waits for the highest to go; everyone else for the lowest.
    phase_ = phase::watching;
    return barrier_step::watch_node{join_path(dir_, ours == members.begin() ? members.back() : members.front())};
}

double_barrier_fsm::request double_barrier_fsm::on_phase(const barrier_reply& r) {
    switch (phase_) {
    case phase::making_parents:
        if (r.error) return fail(r.error, "creating " + quoted_path(path_));
        if (reusable_) {
            phase_ = phase::reading_round;
            return barrier_step::read_round{path_};
        }
        if (!ready_armed_) return arm_ready();
        return make_own();
    case phase::reading_round:
        if (r.error) return fail(r.error, "reading " + quoted_path(path_));
        if (!r.exists) {  // reaped (empty) since it was made: made again
            return make_parents();
        }
        return enter_round(r.version);
    case phase::making_round:
        if (r.error == errc::no_node) {  // the path was reaped meanwhile
            return make_parents();
        }
        if (r.error && r.error != errc::node_exists) return fail(r.error, "creating " + quoted_path(dir_));
        made_round_ = !r.error;
        return join_round();
    case phase::removing_round:  // whatever the answer (not_empty: someone joined it after all)
        phase_ = phase::reading_round;
        return barrier_step::read_round{path_};
    case phase::joining:
        if (r.error == errc::bad_version) {
            // The path's version moved: the round closed, or the path was reaped and made anew.
            // Its listing decides: our node there (a resent join whose first landed), or
            // "ready" with us in it: through; else the next round.
            round_moved_ = true;
            return list_again();
        }
        if (r.error == errc::no_node) {  // the round's node (or the path) was reaped meanwhile
            own_ = false;
            return make_parents();
        }
        // node_exists: our join was resent after a lost reply (the uuid is ours alone).
        if (r.error && r.error != errc::node_exists) return fail(r.error, "joining " + quoted_path(dir_));
        joined_ = true;
        return list_again();
    case phase::creating_own:
        if (r.error == errc::no_node && !parents_retried_) {  // the container was reaped meanwhile
            parents_retried_ = true;
            return make_parents();
        }
        // node_exists: our create was resent after a lost reply (the uuid is ours alone).
        if (r.error && r.error != errc::node_exists) return fail(r.error, "creating " + quoted_path(node_));
        parents_retried_ = false;
        return list_again();
    case phase::listing:
        if (!leaving_ && r.error == errc::no_node) {
            // The container was reaped: our node went with an expired session and was its last
            // child. Enter again: the container and our node made anew.
            parents_retried_ = false;
            return make_parents();
        }
        if (leaving_ && r.error == errc::no_node) {
            own_ = false;
            return finish(true, ready_);  // the container went with its last member
        }
        if (r.error) return fail(r.error, "listing " + quoted_path(dir_));
        return leaving_ ? evaluate_leave(r.children) : evaluate_enter(r);
    case phase::making_ready:
        // Reusable: no_node, a member of the group has gone since the listing (ours perhaps,
        // with its session): look again. bad_version: the group's nodes were all there (checked
        // first), but something else moved the path's version: the group was complete all the same.
        if (reusable_ && r.error == errc::no_node) return list_again();
        // Given up on (connection trouble): it may have been applied, and the others may be
        // through counting us. The listing decides ("ready" there: through); failing there, it fails.
        if (may_have_been_applied(r.error)) return list_again();
        if (r.error && r.error != errc::node_exists && !(reusable_ && r.error == errc::bad_version))
            return fail(r.error, "creating " + quoted_path(ready_));
        return finish(true);
    case phase::arming_ready:
        if (r.error) return fail(r.error, "watching " + quoted_path(ready_));
        ready_armed_ = true;
        armed_drops_ = r.drops;
        return list_again();  // the baseline (before our node, the first time)
    case phase::removing_ready:  // whatever the answer (no_node: gone already; else the listing shows it)
        ++ready_removals_;
        return list_again();
    case phase::waiting:
        if (r.error == errc::too_many_watches) return fail(r.error, "watching under " + quoted_path(dir_));
        return list_again();  // fired, or ended with its session: look again
    case phase::watching:
        if (r.error) return fail(r.error, "reading the member it waits for under " + quoted_path(dir_));
        if (!r.exists) return list_again();
        phase_ = phase::waiting;
        return barrier_step::wait{};
    case phase::removing:
        // A guaranteed delete answers with an error only once its session is gone, and our
        // ephemeral node with it.
        own_ = false;
        if (pending_) {
            phase_ = phase::finished;
            return *std::exchange(pending_, std::nullopt);
        }
        return list_again();
    case phase::idle:
    case phase::finished: break;
    }
    phase_ = phase::finished;
    return barrier_step::done{false, make_error_code(errc::runtime_inconsistency), "a reply in no step (a bug of zkr's)", {}, {}};
}

}  // namespace zkr::detail
