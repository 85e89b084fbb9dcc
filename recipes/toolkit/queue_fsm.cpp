#include "queue_fsm.hpp"

#include "owner_data.hpp"
#include "zkr/path.hpp"

#include <algorithm>

namespace zkr::detail {
namespace {

void add_once(std::vector<std::string>& deletes, const std::string& path) {
    if (!path.empty() && std::find(deletes.begin(), deletes.end(), path) == deletes.end()) deletes.push_back(path);
}

}  // namespace

queue_fsm::queue_fsm(queue_options options, std::function<std::string()> make_uuid)
    : options_(std::move(options)),
      create_(options_.path, std::string(queue_marker(options_.kind)), options_.max_attempts, std::move(make_uuid)) {}

queue_fsm::action queue_fsm::ask(decltype(action::next) next, std::vector<std::string> deletes) {
    return action{std::move(next), std::move(deletes)};
}

queue_fsm::action queue_fsm::create_step() {
    return ask(step::create_and_list{create_.creation_path(), options_.data, options_.path});
}

std::string queue_fsm::ignored_write_node() const {
    return options_.own_write_session == create_.session() ? options_.own_write_node : std::string();
}

void queue_fsm::delete_ours(std::vector<std::string>& deletes) {
    if (!create_.has_node() || node_deleted_) return;
    add_once(deletes, create_.node_path());
    node_deleted_ = true;
}

queue_fsm::action queue_fsm::start() { return new_attempt(); }

queue_fsm::action queue_fsm::on(const any_reply& r, std::int64_t session) {
    return std::visit(
        [&](const auto& x) -> action {
            using R = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<R, reply::created_and_listed>) {
                return on_created_and_listed(x.create_error, x.created, x.list_error, x.children, session);
            } else if constexpr (std::is_same_v<R, reply::create_answered>) {
                return on_create_answered(x.error, x.created);
            } else if constexpr (std::is_same_v<R, reply::parents_created>) {
                return on_parents_created(x.error);
            } else if constexpr (std::is_same_v<R, reply::multi_and_listed>) {
                return {};  // never asked for
            } else if constexpr (std::is_same_v<R, reply::listed>) {
                return on_listed(x.error, x.children, session);
            } else if constexpr (std::is_same_v<R, reply::owner>) {
                return on_owner(x.error, x.result, session);
            } else if constexpr (std::is_same_v<R, reply::watch_set>) {
                return on_watch_set(x.error, session, x.data_read && is_marked_holding(x.data), x.child_watch_set,
                                    x.data_read && is_zkr_owner_data(x.data), x.own_gone);
            } else if constexpr (std::is_same_v<R, reply::watch_fired>) {
                return on_watch_event(x.error, x.type, session, x.child_watch, x.own_node);
            } else if constexpr (std::is_same_v<R, reply::watch_removed>) {
                return on_watch_removed();
            } else {
                return {};  // never asked for (a transaction's early reply)
            }
        },
        r);
}

queue_fsm::action queue_fsm::new_attempt(std::vector<std::string> deletes) {
    // A fresh name per attempt: whatever an earlier attempt left behind can be told apart.
    if (!create_.next_attempt()) return finish(false, make_error_code(errc::attempts_exhausted), std::move(deletes));
    listing_free_handoffs_ = 0;
    node_deleted_ = false;
    create_known_ = false;
    phase_ = phase::creating;
    auto a = create_step();
    a.deletes = std::move(deletes);
    return a;
}

queue_fsm::action queue_fsm::restart(std::vector<std::string> deletes, error_code why) {
    // Our node is gone, or belongs to a session that is not ours any more.
    if (abandoned_) return finish_abandoned(std::move(deletes));
    if (!options_.wait) return finish(false, why, std::move(deletes));  // a try has one round
    return new_attempt(std::move(deletes));
}

queue_fsm::action queue_fsm::finish(bool acquired, error_code error, std::vector<std::string> deletes) {
    if (abandoned_) {
        // Whatever raced with the abandon, an abandoned acquisition holds nothing.
        acquired = false;
        error = *abandoned_;
    }
    if (!acquired) delete_ours(deletes);
    phase_ = phase::finished;
    step::done d;
    d.acquired = acquired;
    d.mark = acquired && should_mark();
    d.error = acquired ? error_code{} : error;
    // Creates whose outcome no listing settled may still have made a node: look for them once more.
    d.sweep = create_.take_unsettled();
    return ask(std::move(d), std::move(deletes));
}

bool queue_fsm::should_mark() const {
    // Only a writer's (or the mutex's) holding tells a successor that everything before it is
    // gone; a reader may hold beside others.
    if (!options_.mark_holding || !has_marks(options_.kind) || options_.kind == queue_kind::read) return false;
    // We hold without a listing made since: whoever queued behind us meanwhile listed while we
    // were not yet first, and would have to list again when we go. Tell them.
    if (!fresh_listing_) return true;
    // A listing made once we were first: anyone who queues after it sees us first in its own
    // listing and needs no mark. Those already behind us in it may have listed before.
    return someone_behind_;
}

queue_fsm::action queue_fsm::finish_abandoned(std::vector<std::string> deletes) {
    return finish(false, *abandoned_, std::move(deletes));
}

bool queue_fsm::cleanup_pending() const noexcept {
    // A create's reply, or the listing that settles a lost one, is due: a node of ours may exist
    // that we cannot name yet.
    return abandoned_ && ((phase_ == phase::creating && !create_known_) || phase_ == phase::recovering);
}

const std::vector<contender>& queue_fsm::take_listing(const listing& children, skipped_nodes& skipped,
                                                      std::vector<std::string>& deletes) {
    fresh_listing_ = true;
    // Our own leftovers are being deleted: waiting on them would only cost a round trip.
    for (auto& path : create_.stale_children(children.children())) {
        skipped.emplace_back(zkr::node_name(path));
        deletes.push_back(std::move(path));
    }
    return children.queue(options_.kind);
}

queue_fsm::action queue_fsm::on_created_and_listed(error_code create_error, const create_result& created,
                                                   error_code list_error, const listing& children,
                                                   std::int64_t session) {
    if (phase_ != phase::creating) return {};
    if (create_error == errc::no_node) {
        // The queue's path is missing: nothing was created under this name.
        if (abandoned_) return finish_abandoned();
        phase_ = phase::making_parents;
        return ask(step::create_parents{options_.path});
    }
    if (!create_error) {
        if (!std::exchange(create_known_, true)) {
            create_.created(created);
            node_deleted_ = false;
        }
        if (abandoned_) return finish_abandoned(list_error ? std::vector<std::string>{} : create_.stale_children(children.children()));
        if (list_error) {
            // The listing was retried under the retry policy already: asking again would only
            // double the time an outage takes to be reported.
            if (!node_session_gone(list_error) && list_error != errc::no_node) return finish(false, list_error);
            phase_ = phase::listing;
            return ask(step::list{options_.path});
        }
        std::vector<std::string> deletes;
        skipped_nodes skipped;
        const auto& queue = take_listing(children, skipped, deletes);
        return evaluate(queue, std::move(skipped), session, std::move(deletes));
    }
    if (may_have_been_applied(create_error)) {
        create_.in_doubt(session);
        // The create may have been applied with its reply lost. A listing sent after it tells:
        // the one that came with it if it got through, else a new one — unless the retry policy
        // gave up on that one already (then the sweep settles it, in the background).
        if (!list_error) return recover(children);
        if (!node_session_gone(list_error)) return finish(false, list_error);
        phase_ = phase::recovering;
        return ask(step::list{options_.path});
    }
    return finish(false, create_error);
}

queue_fsm::action queue_fsm::on_create_answered(error_code error, const create_result& created) {
    if (phase_ != phase::creating || error || create_known_) return {};
    create_.created(created);
    create_known_ = true;
    node_deleted_ = false;
    if (!abandoned_) return {};
    // Given up while the create was due: our node goes now, before anything else; the listing
    // that comes with it ends the machine.
    std::vector<std::string> deletes;
    delete_ours(deletes);
    return ask(step::none{}, std::move(deletes));
}

queue_fsm::action queue_fsm::on_parents_created(error_code error) {
    if (phase_ != phase::making_parents) return {};
    if (abandoned_) return finish_abandoned();
    if (error && error != errc::node_exists) return finish(false, error);
    phase_ = phase::creating;
    return create_step();
}

queue_fsm::action queue_fsm::recover(const listing& children) {
    // This listing settles the current attempt's create: found (below) or not applied.
    auto candidate = create_.settle(children.children());
    std::vector<std::string> deletes = create_.stale_children(children.children());
    candidate_.clear();
    candidate_deleted_ = false;
    if (!candidate) {
        // Not applied. Start over under a new name, in case it still lands later.
        return restart(std::move(deletes), make_error_code(errc::connection_loss));
    }
    candidate_ = std::move(*candidate);
    if (abandoned_) {
        deletes.push_back(create_.full(candidate_));
        return finish_abandoned(std::move(deletes));
    }
    recovered_children_ = children;
    phase_ = phase::checking_owner;
    return ask(step::check_owner{create_.full(candidate_)}, std::move(deletes));
}

queue_fsm::action queue_fsm::on_listed(error_code error, const listing& children, std::int64_t session) {
    if (phase_ != phase::listing && phase_ != phase::recovering) return {};
    bool recovering = phase_ == phase::recovering;
    if (!error) {
        if (recovering) return recover(children);
        if (abandoned_) return finish_abandoned(create_.stale_children(children.children()));
        std::vector<std::string> deletes;
        skipped_nodes skipped;
        const auto& queue = take_listing(children, skipped, deletes);
        return evaluate(queue, std::move(skipped), session, std::move(deletes));
    }
    if (error == errc::no_node) {
        // The queue's path itself is gone (a container reaped): so is any node of ours.
        if (recovering) create_.settled();
        return restart({}, error);
    }
    if (node_session_gone(error)) {
        // Our node went with the session; a create in doubt stays unsettled for the sweep.
        std::vector<std::string> deletes;
        if (!recovering) delete_ours(deletes);
        return restart(std::move(deletes), error);
    }
    // Connection trouble the retry policy gave up on, or an answer we cannot get past: done.
    // Our node (if any) is deleted, a create in doubt swept, both for as long as their session lives.
    return finish(false, error);
}

queue_fsm::action queue_fsm::on_owner(error_code error, const exists_result& result, std::int64_t session) {
    if (phase_ != phase::checking_owner) return {};
    std::string candidate_path = create_.full(candidate_);
    auto children = std::exchange(recovered_children_, {});
    if (!error && create_.adopt_if_ours(candidate_, result, session)) {
        // Our create went through on this very session: it is ours to keep (CURATOR-498).
        node_deleted_ = candidate_deleted_;
        if (abandoned_) return finish_abandoned();
        std::vector<std::string> deletes;
        skipped_nodes skipped;
        const auto& queue = take_listing(children, skipped, deletes);
        return evaluate(queue, std::move(skipped), session, std::move(deletes));
    }
    // Made by a session that is gone (or going), or not checked: never adopt it (CURATOR-604),
    // remove it. Its name carries our uuid, so the delete can never hit another owner's node.
    std::vector<std::string> deletes;
    if ((error || result.exists) && !candidate_deleted_) {
        deletes.push_back(candidate_path);
        if (!error) create_.count_stale();
    }
    if (error && !node_session_gone(error)) return finish(false, error, std::move(deletes));
    return restart(std::move(deletes), make_error_code(errc::session_expired));
}

queue_fsm::action queue_fsm::evaluate(const std::vector<contender>& queue, skipped_nodes skipped, std::int64_t session,
                                      std::vector<std::string> deletes) {
    std::string_view node = create_.node_name();
    auto ours = locate(queue, node);
    if (ours != queue.end() && std::find(skipped.begin(), skipped.end(), node) != skipped.end()) ours = queue.end();
    if (ours == queue.end() || session == 0 || session != create_.session()) {
        // Our node went with its session, or it is of a session we no longer have: it can hold
        // nothing for us. Start over with a node of the current session.
        if (ours != queue.end()) delete_ours(deletes);
        return restart(std::move(deletes), make_error_code(errc::session_expired));
    }
    // The owner's write node may step aside for its read node only if it is of our very session.
    std::string ignore = ignored_write_node();
    decision d = decide(queue, node, ignore, skipped);
    if (d.holds) {
        if (!ignore.empty()) pins_write_node_ = writer_between(queue, ignore, node, skipped);
        someone_behind_ = std::any_of(std::next(ours), queue.end(), [&](const contender& c) {
            return std::find(skipped.begin(), skipped.end(), c.name) == skipped.end();
        });
        return finish(true, {}, std::move(deletes));
    }
    if (!options_.wait) return finish(false, {}, std::move(deletes));  // a try leaves nothing behind
    watched_ = d.watch;
    watched_holds_ = false;
    watched_is_zkr_ = false;
    child_watch_set_ = false;
    auto watched = locate(queue, watched_);
    watched_reads_ = watched != queue.end() && watched->kind == queue_kind::read;
    // What the watched node's departure will mean, worked out now: the listing is not kept.
    // Nodes ahead of us can only leave, never arrive.
    skipped.push_back(watched_);
    departure_holds_ = decide(queue, node, ignore, skipped).holds;
    departure_pins_ = departure_holds_ && !ignore.empty() && writer_between(queue, ignore, node, skipped);
    // If its departure alone gives us the lock (it is first in our listing, or only readers
    // stand between), a mark would tell us nothing: watch for the departure only, and spare the
    // server a read and us a notification. Nor would a reader's mark (a reader never marks).
    want_mark_ = has_marks(options_.kind) && !watched_reads_ && !departure_holds_;
    phase_ = phase::setting_watch;
    auto a = watch_step();
    a.deletes = std::move(deletes);
    return a;
}

queue_fsm::action queue_fsm::watch_step() {
    // Our own node is watched too: a departure may hand us the lock with no listing, which is
    // only right while our node exists — and its deletion, were it gone, would have reached us
    // first.
    return ask(step::watch{create_.full(watched_), want_mark_, create_.node_path()});
}

queue_fsm::action queue_fsm::own_node_gone() {
    restart_after_removal_ = true;
    phase_ = phase::removing_watch;
    return ask(step::remove_watch{create_.full(watched_)});
}

queue_fsm::action queue_fsm::on_watch_set(error_code error, std::int64_t session, bool marked,
                                          bool child_watch_set, bool zkr_node, bool own_gone) {
    if (phase_ != phase::setting_watch) return {};
    if (abandoned_) {
        if (!error) {
            phase_ = phase::removing_watch;
            return ask(step::remove_watch{create_.full(watched_)});
        }
        return finish_abandoned();
    }
    if (own_gone) {
        // Someone deleted our node (or it went with a session we no longer have): it can hold
        // nothing for us, whatever happens to the one ahead.
        if (!error) return own_node_gone();
        if (node_session_gone(error) || error == errc::no_node) return restart({}, make_error_code(errc::lock_lost));
        return finish(false, error);
    }
    if (error == errc::no_node) return after_departure(session);  // gone before we could watch it
    if (error) {
        if (node_session_gone(error)) return restart({}, error);
        return finish(false, error);
    }
    if (session != create_.session()) {
        // The read was retried onto a newer session: the watch is set, but our node went with the
        // old session. Take the watch off, then queue again.
        restart_after_removal_ = true;
        phase_ = phase::removing_watch;
        return ask(step::remove_watch{create_.full(watched_)});
    }
    if (marked) watched_holds_ = true;
    if (zkr_node) watched_is_zkr_ = true;
    child_watch_set_ = child_watch_set;
    phase_ = phase::waiting;
    return ask(step::wait{create_.full(watched_)});
}

queue_fsm::action queue_fsm::on_watch_event(error_code error, event_type type, std::int64_t session,
                                            bool child_watch, bool own_node) {
    if (phase_ != phase::waiting) return {};
    if (error) {
        if (error == errc::client_closed) return finish(false, error);
        return restart({}, error);  // the watch ended with its session: so did our node
    }
    if (own_node) {
        if (type == event_type::deleted) return own_node_gone();
        // Dropped with another watch of this client on our node (a successor of ours that took
        // its watch off takes the server's one child watch per node and session): set it again.
        phase_ = phase::setting_watch;
        return watch_step();
    }
    if (type == event_type::deleted) {
        ++departures_;
        return after_departure(session);
    }
    if (!child_watch) {
        // zkr changes a node's data only to mark it holding. Others may write to theirs (Curator's
        // Revoker writes "__REVOKE__" into a waiter's node): a change says "holds" only of a node
        // zkr made, as its data said when the watch was set.
        if (type == event_type::changed && watched_is_zkr_) watched_holds_ = true;
        if (child_watch_set_) return {};  // its departure is still watched
    }
    // The data watch fired with no child watch to see the departure, or a watch was dropped
    // with others on its path: set them again.
    phase_ = phase::setting_watch;
    return watch_step();
}

queue_fsm::action queue_fsm::after_departure(std::int64_t session) {
    // Nodes ahead of ours can only leave, never arrive: if the departed node was the last one
    // between us and the lock (as our listing showed), we hold, with no new listing. So do we
    // when it was marked holding: nothing before it was left. Otherwise the listing we had is
    // stale (most of what it showed ahead of us may be long gone): one fresh listing beats
    // probing each entry.
    bool known_first = watched_holds_ && !watched_reads_;
    fresh_listing_ = false;
    if (!known_first && !departure_holds_) {
        phase_ = phase::listing;
        return ask(step::list{options_.path});
    }
    if (session == 0 || session != create_.session()) {
        std::vector<std::string> deletes;
        delete_ours(deletes);
        return restart(std::move(deletes), make_error_code(errc::session_expired));
    }
    pins_write_node_ = departure_holds_ && departure_pins_;
    ++listing_free_handoffs_;
    return finish(true, {});
}

queue_fsm::action queue_fsm::on_watch_removed() {
    if (phase_ != phase::removing_watch) return {};
    // Our node went with the old session.
    if (std::exchange(restart_after_removal_, false)) return restart({}, make_error_code(errc::session_expired));
    return finish_abandoned();
}

queue_fsm::action queue_fsm::abandon(error_code reason) {
    if (phase_ == phase::finished || abandoned_) return {};
    abandoned_ = reason;
    if (phase_ == phase::idle) return finish_abandoned();
    // Our node goes now wherever we know it, before the caller is told: nothing this client sends
    // after the answer may find it still queued.
    std::vector<std::string> deletes;
    if (phase_ == phase::waiting) {
        delete_ours(deletes);
        phase_ = phase::removing_watch;
        return ask(step::remove_watch{create_.full(watched_)}, std::move(deletes));
    }
    if (phase_ == phase::listing || phase_ == phase::setting_watch || phase_ == phase::removing_watch ||
        (phase_ == phase::creating && create_known_)) {
        delete_ours(deletes);
    } else if (phase_ == phase::checking_owner) {
        // Ours whichever session made it (its name carries our uuid).
        deletes.push_back(create_.full(candidate_));
        candidate_deleted_ = true;
    }
    return ask(step::none{}, std::move(deletes));  // a reply is due; the rest follows it
}

}  // namespace zkr::detail
