#include "acquire_fsm.hpp"

#include "zkr/path.hpp"

#include <algorithm>

namespace zkr::detail {
namespace {

// The request may or may not have been applied; only a fresh look tells.
bool outcome_unknown(error_code ec) { return is_retryable(ec) || ec == errc::session_expired; }

// The session our node was made on is gone, and the node with it.
bool session_gone(error_code ec) { return is_session_lost(ec) && ec != errc::client_closed; }

void add_once(std::vector<std::string>& deletes, const std::string& path) {
    if (!path.empty() && std::find(deletes.begin(), deletes.end(), path) == deletes.end()) deletes.push_back(path);
}

}  // namespace

acquire_fsm::acquire_fsm(acquire_options options, std::function<std::string()> make_uuid)
    : options_(std::move(options)), make_uuid_(std::move(make_uuid)) {}

std::string acquire_fsm::full(std::string_view name) const { return join_path(options_.lock_path, name); }

std::string acquire_fsm::creation_path() const { return full(prefix_ + std::string(lock_marker(options_.kind))); }

acquire_fsm::action acquire_fsm::ask(decltype(action::next) next, std::vector<std::string> deletes) {
    return action{std::move(next), std::move(deletes)};
}

acquire_fsm::action acquire_fsm::start() { return new_attempt(); }

acquire_fsm::action acquire_fsm::new_attempt(std::vector<std::string> deletes) {
    if (attempts_ >= options_.max_attempts)
        return finish(false, make_error_code(errc::attempts_exhausted), std::move(deletes));
    ++attempts_;
    listing_free_handoffs_ = 0;
    // A fresh name per attempt: whatever an earlier attempt left behind can be told apart.
    if (!prefix_.empty()) stale_prefixes_.push_back(prefix_);
    prefix_ = protection_prefix(make_uuid_());
    node_.clear();
    path_.clear();
    czxid_ = session_ = 0;
    adopted_ = false;
    phase_ = phase::creating;
    return ask(step::create_and_list{creation_path()}, std::move(deletes));
}

acquire_fsm::action acquire_fsm::restart(std::vector<std::string> deletes, error_code why) {
    // Our node is gone, or belongs to a session that is not ours any more.
    if (abandoned_) return finish_abandoned(std::move(deletes));
    if (!options_.wait) return finish(false, why, std::move(deletes));  // a try has one round
    return new_attempt(std::move(deletes));
}

acquire_fsm::action acquire_fsm::finish(bool acquired, error_code error, std::vector<std::string> deletes) {
    if (abandoned_) {
        // Whatever raced with the abandon, an abandoned acquisition holds nothing.
        acquired = false;
        error = *abandoned_;
    }
    if (!acquired) add_once(deletes, path_);
    phase_ = phase::finished;
    step::done d;
    d.acquired = acquired;
    d.mark = acquired && should_mark();
    d.error = acquired ? error_code{} : error;
    // Creates whose outcome no listing settled may still have made a node: look for them once more.
    d.sweep = std::move(unsettled_);
    return ask(std::move(d), std::move(deletes));
}

bool acquire_fsm::should_mark() const {
    // Only a writer's (or the mutex's) holding tells a successor that everything before it is
    // gone; a reader may hold beside others.
    if (!options_.mark_holding || options_.kind == lock_kind::read) return false;
    // We hold without a listing made since: whoever queued behind us meanwhile listed while we
    // were not yet first, and would have to list again when we go. Tell them.
    if (!fresh_listing_) return true;
    // A listing made once we were first: anyone who queues after it sees us first in its own
    // listing and needs no mark. Those already behind us in it may have listed before.
    auto ours = std::find_if(queue_.begin(), queue_.end(), [&](const contender& c) { return c.name == node_; });
    return ours != queue_.end() && std::next(ours) != queue_.end();
}

acquire_fsm::action acquire_fsm::finish_abandoned(std::vector<std::string> deletes) {
    return finish(false, *abandoned_, std::move(deletes));
}

std::vector<std::string> acquire_fsm::stale_nodes(const std::vector<std::string>& children) {
    std::vector<std::string> stale;
    for (const auto& child : children) {
        for (const auto& p : stale_prefixes_) {
            if (has_prefix(child, p)) {
                stale.push_back(full(child));
                ++stale_deleted_;
                break;
            }
        }
    }
    return stale;
}

std::vector<std::string> acquire_fsm::take_listing(const std::vector<std::string>& children) {
    queue_ = sorted_contenders(children, options_.kind != lock_kind::exclusive);
    fresh_listing_ = true;
    std::vector<std::string> stale = stale_nodes(children);
    // Our own leftovers are being deleted: waiting on them would only cost a round trip.
    for (const auto& path : stale) prune(std::string(zkr::node_name(path)));
    return stale;
}

void acquire_fsm::prune(const std::string& name) {
    std::erase_if(queue_, [&](const contender& c) { return c.name == name; });
}

void acquire_fsm::settle(const std::string& prefix) {
    std::erase_if(unsettled_, [&](const unsettled_create& u) { return u.prefix == prefix; });
}

acquire_fsm::action acquire_fsm::on_created_and_listed(error_code create_error, const create_result& created,
                                                       error_code list_error, const std::vector<std::string>& children,
                                                       std::int64_t session) {
    if (phase_ != phase::creating) return {};
    if (create_error == errc::no_node) {
        // The lock path is missing: nothing was created under this name.
        if (abandoned_) return finish_abandoned();
        phase_ = phase::making_parents;
        return ask(step::create_parents{options_.lock_path});
    }
    if (!create_error) {
        path_ = created.path;
        node_ = std::string(zkr::node_name(path_));
        czxid_ = created.stat.czxid;
        session_ = created.stat.ephemeral_owner;
        if (abandoned_) return finish_abandoned(list_error ? std::vector<std::string>{} : stale_nodes(children));
        if (list_error) {
            // The listing was retried under the retry policy already: asking again would only
            // double the time an outage takes to be reported.
            if (!session_gone(list_error) && list_error != errc::no_node) return finish(false, list_error);
            phase_ = phase::listing;
            return ask(step::list{options_.lock_path});
        }
        return evaluate(session, take_listing(children));
    }
    if (outcome_unknown(create_error)) {
        unsettled_.push_back({prefix_, session});
        // The create may have been applied with its reply lost. A listing sent after it tells:
        // the one that came with it if it got through, else a new one — unless the retry policy
        // gave up on that one already (then the sweep settles it, in the background).
        if (!list_error) return recover(children);
        if (!session_gone(list_error)) return finish(false, list_error);
        phase_ = phase::recovering;
        return ask(step::list{options_.lock_path});
    }
    return finish(false, create_error);
}

acquire_fsm::action acquire_fsm::on_parents_created(error_code error) {
    if (phase_ != phase::making_parents) return {};
    if (abandoned_) return finish_abandoned();
    if (error && error != errc::node_exists) return finish(false, error);
    phase_ = phase::creating;
    return ask(step::create_and_list{creation_path()});
}

acquire_fsm::action acquire_fsm::recover(const std::vector<std::string>& children) {
    // This listing settles the current attempt's create: found (below) or not applied.
    settle(prefix_);
    std::vector<std::string> deletes = stale_nodes(children);
    candidate_.clear();
    for (const auto& child : children) {
        if (has_prefix(child, prefix_)) candidate_ = child;
    }
    if (candidate_.empty()) {
        // Not applied. Start over under a new name, in case it still lands later.
        return restart(std::move(deletes), make_error_code(errc::connection_loss));
    }
    if (abandoned_) {
        deletes.push_back(full(candidate_));
        return finish_abandoned(std::move(deletes));
    }
    recovered_children_ = children;
    phase_ = phase::checking_owner;
    return ask(step::check_owner{full(candidate_)}, std::move(deletes));
}

acquire_fsm::action acquire_fsm::on_listed(error_code error, const std::vector<std::string>& children,
                                           std::int64_t session) {
    if (phase_ != phase::listing && phase_ != phase::recovering) return {};
    bool recovering = phase_ == phase::recovering;
    if (!error) {
        if (recovering) return recover(children);
        if (abandoned_) return finish_abandoned(stale_nodes(children));
        return evaluate(session, take_listing(children));
    }
    if (error == errc::no_node) {
        // The lock path itself is gone (a container reaped): so is any node of ours.
        if (recovering) settle(prefix_);
        return restart({}, error);
    }
    if (session_gone(error)) {
        // Our node went with the session; a create in doubt stays in `unsettled_` for the sweep.
        std::vector<std::string> deletes;
        if (!recovering) add_once(deletes, path_);
        return restart(std::move(deletes), error);
    }
    // Connection trouble the retry policy gave up on, or an answer we cannot get past: done.
    // Our node (if any) is deleted, a create in doubt swept, both for as long as their session lives.
    return finish(false, error);
}

acquire_fsm::action acquire_fsm::on_owner(error_code error, const exists_result& result, std::int64_t session) {
    if (phase_ != phase::checking_owner) return {};
    std::string candidate_path = full(candidate_);
    if (!error && result.exists && session != 0 && result.stat.ephemeral_owner == session) {
        // Our create went through on this very session: it is ours to keep (CURATOR-498).
        node_ = candidate_;
        path_ = candidate_path;
        czxid_ = result.stat.czxid;
        session_ = session;
        adopted_ = true;
        if (abandoned_) return finish_abandoned();
        return evaluate(session, take_listing(recovered_children_));
    }
    // Made by a session that is gone (or going), or not checked: never adopt it (CURATOR-604),
    // remove it. Its name carries our uuid, so the delete can never hit another owner's node.
    std::vector<std::string> deletes;
    if (error || result.exists) {
        deletes.push_back(candidate_path);
        if (!error) ++stale_deleted_;
    }
    if (error && !session_gone(error)) return finish(false, error, std::move(deletes));
    return restart(std::move(deletes), make_error_code(errc::session_expired));
}

acquire_fsm::action acquire_fsm::evaluate(std::int64_t session, std::vector<std::string> deletes) {
    auto ours = std::find_if(queue_.begin(), queue_.end(), [&](const contender& c) { return c.name == node_; });
    if (ours == queue_.end() || session == 0 || session != session_) {
        // Our node went with its session, or it is of a session we no longer have: it can hold
        // nothing for us. Start over with a node of the current session.
        if (ours != queue_.end()) add_once(deletes, path_);
        return restart(std::move(deletes), make_error_code(errc::session_expired));
    }
    // The owner's write node may step aside for its read node only if it is of our very session.
    std::string ignore = options_.own_write_session == session_ ? options_.own_write_node : std::string();
    decision d = decide(queue_, node_, ignore);
    if (d.holds) {
        if (!ignore.empty()) pins_write_node_ = writer_between(queue_, ignore, node_);
        return finish(true, {}, std::move(deletes));
    }
    if (!options_.wait) return finish(false, {}, std::move(deletes));  // a try leaves nothing behind
    watched_ = d.watch;
    watched_holds_ = false;
    watched_is_zkr_ = false;
    child_watch_set_ = false;
    // If its departure alone gives us the lock (it is first in our listing, or only readers
    // stand between), a mark would tell us nothing: watch for the departure only, and spare the
    // server a read and us a notification. Nor would a reader's mark (a reader never marks).
    std::vector<contender> without = queue_;
    std::erase_if(without, [&](const contender& c) { return c.name == watched_; });
    bool watched_reads = std::any_of(queue_.begin(), queue_.end(), [&](const contender& c) {
        return c.name == watched_ && c.kind == lock_kind::read;
    });
    want_mark_ = !watched_reads && !decide(without, node_, ignore).holds;
    phase_ = phase::setting_watch;
    return ask(step::watch{full(watched_), want_mark_}, std::move(deletes));
}

acquire_fsm::action acquire_fsm::on_watch_set(error_code error, std::int64_t session, bool marked,
                                              bool child_watch_set, bool zkr_node) {
    if (phase_ != phase::setting_watch) return {};
    if (abandoned_) {
        if (!error) {
            phase_ = phase::removing_watch;
            return ask(step::remove_watch{full(watched_)});
        }
        return finish_abandoned();
    }
    if (error == errc::no_node) return after_departure(session);  // gone before we could watch it
    if (error) {
        if (session_gone(error)) return restart({}, error);
        return finish(false, error);
    }
    if (session != session_) {
        // The read was retried onto a newer session: the watch is set, but our node went with the
        // old session. Take the watch off, then queue again.
        restart_after_removal_ = true;
        phase_ = phase::removing_watch;
        return ask(step::remove_watch{full(watched_)});
    }
    if (marked) watched_holds_ = true;
    if (zkr_node) watched_is_zkr_ = true;
    child_watch_set_ = child_watch_set;
    phase_ = phase::waiting;
    return ask(step::wait{full(watched_)});
}

acquire_fsm::action acquire_fsm::on_watch_event(error_code error, event_type type, std::int64_t session,
                                                bool child_watch) {
    if (phase_ != phase::waiting) return {};
    if (error) {
        if (error == errc::client_closed) return finish(false, error);
        return restart({}, error);  // the watch ended with its session: so did our node
    }
    if (type == event_type::deleted) return after_departure(session);
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
    return ask(step::watch{full(watched_), want_mark_});
}

acquire_fsm::action acquire_fsm::after_departure(std::int64_t session) {
    // Nodes below ours can only leave, never arrive: if the last listing minus the departed
    // node says we hold, we do, with no new listing. Otherwise that listing is stale (most of
    // what it shows ahead of us may be long gone): one fresh listing beats probing each entry.
    // A departed node that was marked holding had nothing below it left: neither have we now.
    auto departed = std::find_if(queue_.begin(), queue_.end(), [&](const contender& c) { return c.name == watched_; });
    bool known_first = watched_holds_ && departed != queue_.end() && departed->kind != lock_kind::read;
    if (known_first) queue_.erase(queue_.begin(), departed);
    prune(watched_);
    fresh_listing_ = false;
    auto ours = std::find_if(queue_.begin(), queue_.end(), [&](const contender& c) { return c.name == node_; });
    std::string ignore = options_.own_write_session == session_ ? options_.own_write_node : std::string();
    if (ours != queue_.end() && decide(queue_, node_, ignore).holds) {
        auto next = evaluate(session);
        if (next.is<step::done>() && next.as<step::done>().acquired) ++listing_free_handoffs_;
        return next;
    }
    phase_ = phase::listing;
    return ask(step::list{options_.lock_path});
}

acquire_fsm::action acquire_fsm::on_watch_removed() {
    if (phase_ != phase::removing_watch) return {};
    if (std::exchange(restart_after_removal_, false)) return restart({}, make_error_code(errc::session_expired));
    return finish_abandoned();
}

acquire_fsm::action acquire_fsm::abandon(error_code reason) {
    if (phase_ == phase::finished || abandoned_) return {};
    abandoned_ = reason;
    if (phase_ == phase::waiting) {
        phase_ = phase::removing_watch;
        return ask(step::remove_watch{full(watched_)});
    }
    if (phase_ == phase::idle) return finish_abandoned();
    return {};  // a reply is due; the cleanup follows it
}

}  // namespace zkr::detail
