#include "acquire_fsm.hpp"

#include "zkr/error.hpp"
#include "zkr/path.hpp"

#include <algorithm>

namespace zkr::detail {
namespace {

// The request may or may not have been applied; only a fresh look tells.
bool outcome_unknown(zkr::error_code ec) { return is_retryable(ec) || ec == errc::session_expired; }

acquire_fsm::action act(acquire_fsm::step what, std::string path = {}, std::vector<std::string> deletes = {}) {
    acquire_fsm::action a;
    a.what = what;
    a.path = std::move(path);
    a.deletes = std::move(deletes);
    return a;
}

}  // namespace

acquire_fsm::acquire_fsm(acquire_options options, std::function<std::string()> make_uuid)
    : options_(std::move(options)), make_uuid_(std::move(make_uuid)) {}

std::string acquire_fsm::full(std::string_view name) const { return join_path(options_.lock_path, name); }

acquire_fsm::action acquire_fsm::start() { return new_attempt(); }

acquire_fsm::action acquire_fsm::new_attempt(std::vector<std::string> deletes) {
    if (attempts_ >= options_.max_attempts)
        return finish(false, make_error_code(errc::operation_timeout), std::move(deletes));
    ++attempts_;
    // A fresh name per attempt: whatever an earlier attempt left behind can be told apart.
    if (!prefix_.empty()) stale_prefixes_.push_back(prefix_);
    prefix_ = protection_prefix(make_uuid_());
    node_.clear();
    path_.clear();
    czxid_ = session_ = 0;
    adopted_ = false;
    phase_ = phase::creating;
    return act(step::create_and_list, full(prefix_ + std::string(lock_marker(options_.kind))), std::move(deletes));
}

acquire_fsm::action acquire_fsm::restart(std::vector<std::string> deletes, zkr::error_code why) {
    // Our node is gone, or belongs to a session that is not ours any more.
    if (abandoned_) return finish_abandoned(std::move(deletes));
    if (!options_.wait) return finish(false, why, std::move(deletes));
    return new_attempt(std::move(deletes));
}

acquire_fsm::action acquire_fsm::finish(bool acquired, zkr::error_code error, std::vector<std::string> deletes) {
    if (!acquired && abandoned_) {
        error = *abandoned_;
        if (!path_.empty() && std::find(deletes.begin(), deletes.end(), path_) == deletes.end()) deletes.push_back(path_);
    }
    phase_ = phase::finished;
    action a = act(step::done, path_, std::move(deletes));
    a.acquired = acquired;
    a.error = error;
    // Creates whose outcome no listing settled may still have made a node: look for them once more.
    a.sweep_prefixes = std::move(unknown_prefixes_);
    return a;
}

acquire_fsm::action acquire_fsm::finish_abandoned(std::vector<std::string> deletes) {
    if (!path_.empty() && std::find(deletes.begin(), deletes.end(), path_) == deletes.end()) deletes.push_back(path_);
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
    std::vector<std::string> stale = stale_nodes(children);
    // Our own leftovers are being deleted: waiting on them would only cost a round trip.
    for (const auto& path : stale) prune(std::string(zkr::node_name(path)));
    return stale;
}

void acquire_fsm::prune(const std::string& name) {
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](const contender& c) { return c.name == name; }),
                 queue_.end());
}

acquire_fsm::action acquire_fsm::on_created_and_listed(zkr::error_code create_error, const create_result& created,
                                                       zkr::error_code list_error,
                                                       const std::vector<std::string>& children, std::int64_t session) {
    if (phase_ != phase::creating) return {};
    if (create_error == errc::no_node) {
        if (abandoned_) return finish_abandoned();
        phase_ = phase::making_parents;
        return act(step::create_parents, options_.lock_path);
    }
    if (!create_error) {
        path_ = created.path;
        node_ = std::string(zkr::node_name(path_));
        czxid_ = created.stat.czxid;
        session_ = created.stat.ephemeral_owner;
        if (abandoned_) return finish_abandoned(list_error ? std::vector<std::string>{} : stale_nodes(children));
        if (list_error) {
            phase_ = phase::listing;
            return act(step::list, options_.lock_path);
        }
        return evaluate(session, take_listing(children));
    }
    if (outcome_unknown(create_error)) {
        unknown_prefixes_.push_back(prefix_);
        // The create may have been applied with its reply lost. A listing sent after it tells:
        // the one that came with it if it got through, else a new one.
        if (!list_error) return recover(children);
        phase_ = phase::recovering;
        return act(step::list, options_.lock_path);
    }
    return finish(false, create_error);
}

acquire_fsm::action acquire_fsm::on_parents_created(zkr::error_code error) {
    if (phase_ != phase::making_parents) return {};
    if (abandoned_) return finish_abandoned();
    if (error && error != errc::node_exists) return finish(false, error);
    // Nothing was created under this name (its parent was missing): send it again.
    phase_ = phase::creating;
    return act(step::create_and_list, full(prefix_ + std::string(lock_marker(options_.kind))));
}

acquire_fsm::action acquire_fsm::recover(const std::vector<std::string>& children) {
    // This listing settles the current attempt's create: found (below) or not applied.
    std::erase(unknown_prefixes_, prefix_);
    std::vector<std::string> deletes = stale_nodes(children);
    candidate_.clear();
    for (const auto& child : children) {
        if (has_prefix(child, prefix_)) candidate_ = child;
    }
    if (candidate_.empty()) {
        // Not applied. Start over under a new name, in case it still lands later.
        if (abandoned_) return finish_abandoned(std::move(deletes));
        return new_attempt(std::move(deletes));
    }
    if (abandoned_) {
        deletes.push_back(full(candidate_));
        return finish_abandoned(std::move(deletes));
    }
    recovered_children_ = children;
    phase_ = phase::checking_owner;
    return act(step::check_owner, full(candidate_), std::move(deletes));
}

acquire_fsm::action acquire_fsm::on_listed(zkr::error_code error, const std::vector<std::string>& children,
                                           std::int64_t session) {
    if (phase_ != phase::listing && phase_ != phase::recovering) return {};
    bool recovering = phase_ == phase::recovering;
    if (error) {
        if (error == errc::no_node) {
            // The lock path itself is gone (a container reaped): so is any node of ours.
            return restart({}, make_error_code(errc::lock_lost));
        }
        if (outcome_unknown(error) && options_.wait && !abandoned_) {
            std::vector<std::string> deletes;
            if (!path_.empty() && !recovering) deletes.push_back(path_);
            return restart(std::move(deletes), error);
        }
        std::vector<std::string> deletes;
        if (!path_.empty()) deletes.push_back(path_);
        if (abandoned_) return finish_abandoned(std::move(deletes));
        return finish(false, error, std::move(deletes));
    }
    if (recovering) return recover(children);
    if (abandoned_) return finish_abandoned(stale_nodes(children));
    return evaluate(session, take_listing(children));
}

acquire_fsm::action acquire_fsm::on_owner(zkr::error_code error, const exists_result& result, std::int64_t session) {
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
    // Made by a session that is gone (or going): never adopt it (CURATOR-604), remove it.
    std::vector<std::string> deletes;
    if (!error && result.exists) {
        deletes.push_back(candidate_path);
        ++stale_deleted_;
    }
    if (error && !outcome_unknown(error)) return finish(false, error, std::move(deletes));
    // For a try this round is over without a node of ours: simply not acquired.
    return restart(std::move(deletes), options_.wait || session == 0 ? make_error_code(errc::session_expired) : zkr::error_code{});
}

acquire_fsm::action acquire_fsm::evaluate(std::int64_t session, std::vector<std::string> deletes) {
    auto ours = std::find_if(queue_.begin(), queue_.end(), [&](const contender& c) { return c.name == node_; });
    if (ours == queue_.end() || session == 0 || session != session_) {
        // Our node went with its session, or it is of a session we no longer have: it can hold
        // nothing for us. Start over with a node of the current session.
        if (ours != queue_.end()) deletes.push_back(path_);
        return restart(std::move(deletes), make_error_code(errc::session_expired));
    }
    decision d = decide(queue_, node_, options_.ignore);
    if (d.holds) {
        if (!options_.ignore.empty()) pins_write_node_ = writer_between(queue_, options_.ignore, node_);
        return finish(true, {}, std::move(deletes));
    }
    if (!options_.wait) {
        deletes.push_back(path_);  // a try leaves nothing behind
        return finish(false, {}, std::move(deletes));
    }
    watched_ = d.watch;
    phase_ = phase::setting_watch;
    return act(step::watch, full(watched_), std::move(deletes));
}

acquire_fsm::action acquire_fsm::on_watch_set(zkr::error_code error, std::int64_t session) {
    if (phase_ != phase::setting_watch) return {};
    if (abandoned_) {
        if (!error) {
            phase_ = phase::removing_watch;
            return act(step::remove_watch, full(watched_));
        }
        return finish_abandoned();
    }
    if (error == errc::no_node) return after_departure(session);  // gone before we could watch it
    if (error) {
        if (is_session_lost(error) && error != errc::client_closed) return restart({}, error);
        return finish(false, error, {path_});
    }
    phase_ = phase::waiting;
    return act(step::wait, full(watched_));
}

acquire_fsm::action acquire_fsm::on_watch_event(zkr::error_code error, event_type type, std::int64_t session) {
    if (phase_ != phase::waiting) return {};
    if (error) {
        if (error == errc::client_closed) return finish(false, error);
        // The watch ended with its session: so did our node.
        return restart({}, error);
    }
    if (type == event_type::deleted) return after_departure(session);
    // Changed data, or the watch was dropped with others on its path: look again.
    phase_ = phase::setting_watch;
    return act(step::watch, full(watched_));
}

acquire_fsm::action acquire_fsm::after_departure(std::int64_t session) {
    // Nodes below ours can only leave, never arrive: if the last listing minus the departed
    // node says we hold, we do, with no new listing. Otherwise that listing is stale (most of
    // what it shows ahead of us may be long gone): one fresh listing beats probing each entry.
    prune(watched_);
    auto ours = std::find_if(queue_.begin(), queue_.end(), [&](const contender& c) { return c.name == node_; });
    if (ours != queue_.end() && decide(queue_, node_, options_.ignore).holds) return evaluate(session);
    phase_ = phase::listing;
    return act(step::list, options_.lock_path);
}

acquire_fsm::action acquire_fsm::on_watch_removed() {
    if (phase_ != phase::removing_watch) return {};
    return finish_abandoned();
}

acquire_fsm::action acquire_fsm::abandon(zkr::error_code reason) {
    if (phase_ == phase::finished || abandoned_) return {};
    abandoned_ = reason;
    if (phase_ == phase::waiting) {
        phase_ = phase::removing_watch;
        return act(step::remove_watch, full(watched_));
    }
    if (phase_ == phase::idle) return finish_abandoned();
    return {};  // a reply is due; the cleanup follows it
}

}  // namespace zkr::detail
