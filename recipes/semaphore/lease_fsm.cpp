#include "lease_fsm.hpp"

#include "zkr/path.hpp"

#include <algorithm>

namespace zkr::detail {

lease_fsm::lease_fsm(lease_options options, std::function<std::string()> make_uuid)
    : options_(std::move(options)), create_(options_.leases, "lease-", options_.max_attempts, std::move(make_uuid)) {}

lease_fsm::action lease_fsm::ask(decltype(action::next) next, std::vector<std::string> deletes) {
    return action{std::move(next), std::move(deletes)};
}

void lease_fsm::delete_ours(std::vector<std::string>& deletes) {
    if (nodes_deleted_) return;
    for (const auto& n : nodes_) deletes.push_back(n);
    nodes_deleted_ = true;
}

lease_fsm::action lease_fsm::start() { return new_attempt(); }

lease_fsm::action lease_fsm::new_attempt(std::vector<std::string> deletes) {
    if (!create_.next_attempt()) return finish(false, make_error_code(errc::attempts_exhausted), std::move(deletes));
    nodes_.clear();
    nodes_deleted_ = false;
    nodes_known_ = false;
    session_ = 0;
    phase_ = phase::creating;
    // The mutex node first: while it exists we hold the semaphore's mutex, and no one else makes
    // leases. One uuid for all n nodes: a lost reply is settled by one listing.
    step::multi_and_list s;
    s.ops.push_back(op::guard{options_.guard, "semaphore mutex"});
    for (int i = 0; i < options_.count; ++i)
        s.ops.push_back(op::create{create_.creation_path(), options_.data, create_mode::ephemeral_sequential});
    s.list = options_.leases;
    return ask(std::move(s), std::move(deletes));
}

lease_fsm::action lease_fsm::restart(std::vector<std::string> deletes, error_code why) {
    if (abandoned_) return finish(false, *abandoned_, std::move(deletes));
    if (!options_.wait) return finish(false, why, std::move(deletes));
    return new_attempt(std::move(deletes));
}

lease_fsm::action lease_fsm::finish(bool acquired, error_code error, std::vector<std::string> deletes) {
    if (abandoned_) {
        acquired = false;
        error = *abandoned_;
    }
    if (!acquired) delete_ours(deletes);
    done_type d;
    d.acquired = acquired;
    d.error = acquired ? error_code{} : error;
    if (acquired) {
        d.nodes = nodes_;
        d.session = session_;
    }
    d.sweep = create_.take_unsettled();
    if (watch_armed_) {
        // No watch of ours may outlive the machine: take it off first.
        watch_armed_ = false;
        pending_ = std::move(d);
        phase_ = phase::removing_watch;
        return ask(step::remove_watch{options_.leases}, std::move(deletes));
    }
    phase_ = phase::finished;
    return ask(std::move(d), std::move(deletes));
}

lease_fsm::action lease_fsm::on(const any_reply& r, std::int64_t session) {
    return std::visit(
        [&](const auto& x) -> action {
            using R = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<R, reply::multi_and_listed>) {
                return on_multi(x, session);
            } else if constexpr (std::is_same_v<R, reply::multi_answered>) {
                return on_multi_answered(x, session);
            } else if constexpr (std::is_same_v<R, reply::parents_created>) {
                if (phase_ != phase::making_parents) return {};
                if (abandoned_) return finish(false, *abandoned_);
                if (x.error && x.error != errc::node_exists) return finish(false, x.error);
                return new_attempt();
            } else if constexpr (std::is_same_v<R, reply::listed>) {
                return on_listed(x, session);
            } else if constexpr (std::is_same_v<R, reply::owner>) {
                return on_owner(x, session);
            } else if constexpr (std::is_same_v<R, reply::watch_fired>) {
                return on_fired(x);
            } else if constexpr (std::is_same_v<R, reply::watch_removed>) {
                if (phase_ != phase::removing_watch || !pending_) return {};
                phase_ = phase::finished;
                auto d = std::move(*pending_);
                pending_.reset();
                if (d.acquired && ((x.error && x.error != errc::client_closed) || session != session_)) {
                    // The session went while the watch was taken off: so did our leases.
                    d.acquired = false;
                    d.error = make_error_code(errc::session_expired);
                    d.nodes.clear();
                }
                return ask(std::move(d));
            } else {
                return {};  // steps this machine never asks for
            }
        },
        r);
}

lease_fsm::action lease_fsm::on_multi(const reply::multi_and_listed& r, std::int64_t session) {
    if (phase_ != phase::creating) return {};
    if (!r.error && (session == 0 || session != options_.session)) {
        // Applied, but a multi's reply does not say on which session, and the client's is not
        // the one our mutex node was made on: settle it as a lost reply (the listing, then the
        // owner check: nodes of another session are never adopted).
        create_.in_doubt(session);
        if (!r.list_error) return recover(r.children.children());
        if (!node_session_gone(r.list_error)) return finish(false, r.list_error);
        phase_ = phase::recovering;
        return ask(step::list{options_.leases});
    }
    if (!r.error) {
        if (!std::exchange(nodes_known_, true)) {
            for (std::size_t i = 1; i < r.results.size(); ++i) nodes_.push_back(r.results[i].path);
            session_ = session;
        }
        if (abandoned_) return finish(false, *abandoned_, r.list_error ? std::vector<std::string>{} : create_.stale_children(r.children.children()));
        if (r.list_error) {
            // Our leases went with the session the listing lost, and our mutex hold with them:
            // the caller starts over from the mutex.
            if (node_session_gone(r.list_error) || r.list_error == errc::no_node) return finish(false, make_error_code(errc::session_expired));
            return finish(false, r.list_error);
        }
        return evaluate(r.children.children(), session, create_.stale_children(r.children.children()));
    }
    if (!r.results.empty()) {
        // The server answered: nothing was made. Which op failed says why.
        if (r.results.front().error == errc::lock_lost) return finish(false, r.error);  // our mutex hold is gone
        bool parent_missing = std::any_of(r.results.begin() + 1, r.results.end(),
                                          [](const multi_op_result& x) { return x.error == errc::no_node; });
        if (parent_missing) {
            if (abandoned_) return finish(false, *abandoned_);
            phase_ = phase::making_parents;
            return ask(step::create_parents{options_.leases});
        }
        return finish(false, r.error);
    }
    if (may_have_been_applied(r.error)) {
        // The transaction may have been applied with its reply lost: a listing after it tells.
        create_.in_doubt(session);
        if (!r.list_error) return recover(r.children.children());
        if (!node_session_gone(r.list_error)) return finish(false, r.list_error);
        phase_ = phase::recovering;
        return ask(step::list{options_.leases});
    }
    return finish(false, r.error);
}

lease_fsm::action lease_fsm::on_multi_answered(const reply::multi_answered& r, std::int64_t session) {
    // Only a transaction applied on the session our mutex node is of names leases of ours for
    // sure; anything else waits for the listing (on_multi).
    if (phase_ != phase::creating || nodes_known_ || r.error || session == 0 || session != options_.session) return {};
    for (std::size_t i = 1; i < r.results.size(); ++i) nodes_.push_back(r.results[i].path);
    session_ = session;
    nodes_known_ = true;
    if (!abandoned_) return {};
    // Given up while the transaction was due: our leases go now, before anything else.
    std::vector<std::string> deletes;
    delete_ours(deletes);
    return ask(step::none{}, std::move(deletes));
}

lease_fsm::action lease_fsm::recover(const std::vector<std::string>& children) {
    auto found = create_.settle_all(children);
    std::vector<std::string> deletes = create_.stale_children(children);
    candidates_.clear();
    for (auto& f : found) candidates_.push_back(join_path(options_.leases, f));
    if (candidates_.empty()) return restart(std::move(deletes), make_error_code(errc::connection_loss));
    if (abandoned_) {
        for (auto& c : candidates_) deletes.push_back(c);
        return finish(false, *abandoned_, std::move(deletes));
    }
    recovered_children_ = children;
    phase_ = phase::checking_owner;
    return ask(step::check_owner{candidates_.front()}, std::move(deletes));
}

lease_fsm::action lease_fsm::on_owner(const reply::owner& r, std::int64_t session) {
    if (phase_ != phase::checking_owner) return {};
    auto children = std::exchange(recovered_children_, {});
    auto found = std::exchange(candidates_, {});
    // One transaction made them all: one of them says which session did.
    if (!r.error && r.result.exists && session != 0 && r.result.stat.ephemeral_owner == session) {
        nodes_ = std::move(found);
        session_ = session;
        nodes_deleted_ = false;
        if (abandoned_) return finish(false, *abandoned_);
        return evaluate(children, session, create_.stale_children(children));
    }
    // Of a session that is gone: never adopted (CURATOR-604); ours by name, so ours to delete.
    std::vector<std::string> deletes = std::move(found);
    if (r.error && !node_session_gone(r.error)) return finish(false, r.error, std::move(deletes));
    return restart(std::move(deletes), make_error_code(errc::session_expired));
}

lease_fsm::action lease_fsm::on_listed(const reply::listed& r, std::int64_t session) {
    if (phase_ == phase::recovering) {
        if (!r.error) return recover(r.children.children());
        if (r.error == errc::no_node) {
            create_.settled();
            return restart({}, r.error);
        }
        if (node_session_gone(r.error)) return restart({}, r.error);
        return finish(false, r.error);
    }
    if (phase_ != phase::counting) return {};
    if (r.error) {
        watch_armed_ = false;
        // Our leases went with the session, and our mutex hold with them: the caller starts over.
        if (node_session_gone(r.error) || r.error == errc::no_node) return finish(false, make_error_code(errc::session_expired));
        return finish(false, r.error);
    }
    return evaluate(r.children.children(), session, {});
}

lease_fsm::action lease_fsm::evaluate(const std::vector<std::string>& children, std::int64_t session,
                                      std::vector<std::string> deletes) {
    // Ours, all of them, of the session now: anything else and they (and our mutex hold) went
    // with a session; the caller starts over from the mutex.
    bool all_there = std::all_of(nodes_.begin(), nodes_.end(), [&](const std::string& n) {
        return std::find(children.begin(), children.end(), std::string(node_name(n))) != children.end();
    });
    if (session == 0 || session != session_ || !all_there) {
        delete_ours(deletes);
        return finish(false, make_error_code(errc::session_expired), std::move(deletes));
    }
    // Every child counts (Curator's rule, ours included), but our own leftovers being deleted.
    auto count = static_cast<long>(children.size() - deletes.size());
    if (count <= options_.max()) return finish(true, {}, std::move(deletes));
    if (!options_.wait) return finish(false, {}, std::move(deletes));  // a try leaves nothing behind
    if (watch_armed_) {
        phase_ = phase::waiting;
        return ask(step::wait{options_.leases}, std::move(deletes));
    }
    // Full: wait for a lease to be returned. The listing that sets the watch is the one we count.
    phase_ = phase::counting;
    watch_armed_ = true;
    return ask(step::list{options_.leases, true}, std::move(deletes));
}

lease_fsm::action lease_fsm::on_fired(const reply::watch_fired& r) {
    if (phase_ != phase::waiting) {
        // Our child watch ended while we count without setting one (the maximum changed): it is
        // spent, and the count under way may have been read before what it saw. Should that
        // count find us still full, count again with a new watch rather than wait on none.
        if (phase_ == phase::counting && (r.child_watch || r.error)) watch_armed_ = false;
        return {};
    }
    if (r.error) {
        watch_armed_ = false;
        if (r.error == errc::client_closed) return finish(false, r.error);
        return finish(false, make_error_code(errc::session_expired));  // the watch ended with its session
    }
    phase_ = phase::counting;
    if (r.child_watch) {
        // A lease came or went: count again, watching again.
        watch_armed_ = true;
        return ask(step::list{options_.leases, true});
    }
    // The maximum may have changed (a shared count): count again; the child watch stays set.
    watch_armed_ = true;
    return ask(step::list{options_.leases, false});
}

lease_fsm::action lease_fsm::abandon(error_code reason) {
    if (phase_ == phase::finished || abandoned_) return {};
    abandoned_ = reason;
    if (phase_ == phase::idle) return finish(false, reason);
    std::vector<std::string> deletes;
    // Our leases go now wherever we know them, before the caller is told.
    if (phase_ == phase::waiting) {
        delete_ours(deletes);
        return finish(false, reason, std::move(deletes));
    }
    if (phase_ == phase::counting || phase_ == phase::removing_watch || (phase_ == phase::creating && nodes_known_))
        delete_ours(deletes);
    else if (phase_ == phase::checking_owner) deletes = std::exchange(candidates_, {});
    if (pending_) {
        // Done already, but for the watch's removal: an abandoned machine holds nothing.
        pending_->acquired = false;
        pending_->error = reason;
        pending_->nodes.clear();
    }
    return ask(step::none{}, std::move(deletes));
}

}  // namespace zkr::detail
