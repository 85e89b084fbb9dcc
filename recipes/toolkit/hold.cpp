#include "hold.hpp"

#include "zkr/log.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <utility>

namespace zkr::detail {
namespace asio = boost::asio;

hold_registry::hold_registry(session_port& port) : port_(port.weak_port()), executor_(port.executor()) {}

void hold_registry::attach() {
    auto port = port_.lock();
    if (!port) return;
    std::weak_ptr<hold_registry> weak = weak_from_this();
    // On the session thread, as the session layer learns of it: a lost session's holds are lost
    // before any user code runs, however busy the user's executor is.
    session_subscription_ = port->on_session_event([weak](const session_event& ev) {
        if (auto self = weak.lock()) self->on_session(ev);
    });
}

void hold_registry::add(const std::shared_ptr<hold>& h) {
    {
        std::lock_guard lock(mutex_);
        holds_.insert(h);
    }
    // The watch costs the server a request, and a short hold never needs it: it is sent once the
    // hold has lasted own_watch_delay (its release first: never). A lease's czxid, which its
    // transaction's reply does not carry, is read by this watch too: a fencing_token() asked for
    // before the delay ran out sends it at once (send_watch_once, whichever comes first).
    auto port = port_.lock();
    if (!port) return;
    if (own_watch_delay.count() == 0) return send_watch_once(h);
    auto timer = std::make_shared<asio::steady_timer>(port->threads()->session, own_watch_delay);
    std::weak_ptr<hold_registry> weak_self = weak_from_this();
    std::weak_ptr<hold> weak_hold = h;
    // A fresh timer, touched only here and by its own handler; the runtime it runs on is kept
    // while it waits.
    timer->async_wait([timer, threads = port->threads(), weak_self, weak_hold](boost::system::error_code ec) {
        if (ec) return;
        auto self = weak_self.lock();
        auto h = weak_hold.lock();
        if (self && h) self->send_watch_once(h);
    });
}

void hold_registry::send_watch_once(const std::shared_ptr<hold>& h) {
    {
        std::lock_guard lock(mutex_);
        if (h->released || h->lost || h->node_gone || std::exchange(h->watch_sent, true)) return;
    }
    watch_node(h);
}

void hold_registry::watch_node(const std::shared_ptr<hold>& h) {
    auto port = port_.lock();
    if (!port) return;
    std::weak_ptr<hold_registry> weak_self = weak_from_this();
    std::weak_ptr<hold> weak_hold = h;
    // A child watch: the node is ephemeral and has no children, so it fires only when the node
    // goes — not when someone writes its data (the holding mark, Curator's Revoker).
    port->get_children(h->node_path, true,
                       completion<children_result>(completion<children_result>::inline_fn(
                           [weak_self, weak_hold](error_code ec, children_result r) {
                               auto self = weak_self.lock();
                               auto h = weak_hold.lock();
                               if (!self || !h) return;
                               if (ec == errc::no_node) return self->on_node_gone(h);
                               // Any other failure is its session's (reported by session events) or
                               // the client's closing.
                               if (ec) return;
                               auto ws = watch_access::state(r.watch);
                               {
                                   std::lock_guard lock(self->mutex_);
                                   // get_children's stat is the listed node's own: ours.
                                   if (r.stat.czxid != 0) h->observed_czxid = r.stat.czxid;
                                   self->stat_read_.notify_all();
                                   if (h->released || h->lost) return;  // the watch ends with the node
                                   h->node_watch = ws;
                               }
                               ws->wait_inline([weak_self, weak_hold](error_code wec, const watch_event& ev) {
                                   auto self = weak_self.lock();
                                   auto h = weak_hold.lock();
                                   if (!self || !h) return;
                                   if (!wec && ev.type == event_type::deleted) return self->on_node_gone(h);
                                   if (wec && wec != errc::watch_removed) return;  // the session's end
                                   // Dropped with another watch of ours on this path: set it again.
                                   {
                                       std::lock_guard lock(self->mutex_);
                                       if (h->released || h->lost) return;
                                       h->node_watch.reset();
                                   }
                                   self->watch_node(h);
                               });
                           })));
}

void hold_registry::on_node_gone(const std::shared_ptr<hold>& h) {
    std::map<std::uint64_t, completion<>> waiters;
    {
        std::lock_guard lock(mutex_);
        if (h->released || h->lost || std::exchange(h->node_gone, true)) return;
        waiters.swap(h->lost_waiters);
        stat_read_.notify_all();
    }
    // Lost now, whoever deleted it.
    for (auto& [key, w] : waiters) w(make_error_code(errc::lock_lost));
    // But a server ending the session deletes its nodes before it tells the session's connection
    // (and before a frozen client reads the news): the delete alone does not say someone else
    // made it. The session itself does: a request on it is answered while it stands, and fails
    // with session_expired once it is gone.
    auto port = port_.lock();
    if (!port) return node_gone_because(h, loss_cause::session);
    port->exists_on_session(h->session, h->node_path,
                            completion<exists_result>(completion<exists_result>::inline_fn(
                                [weak_self = weak_from_this(), h](error_code ec, const exists_result&) {
                                    if (auto self = weak_self.lock())
                                        self->node_gone_because(h, ec ? loss_cause::session : loss_cause::node_deleted);
                                })));
}

void hold_registry::node_gone_because(const std::shared_ptr<hold>& h, loss_cause cause) {
    if (cause == loss_cause::node_deleted) {
        ++nodes_deleted_;
        log::write(log::level::warning, "zkr: the node " + h->node_path +
                                            " was deleted by someone else while it was held: the hold is lost");
    }
    report({h}, cause);
}

void hold_registry::report(std::vector<std::shared_ptr<hold>> candidates, loss_cause cause) {
    std::vector<completion<>> waiters;
    std::vector<std::function<void(loss_cause)>> reactions;
    std::vector<std::pair<std::shared_ptr<listener>, std::string>> calls;
    std::vector<std::shared_ptr<hold>> observed;
    {
        std::lock_guard lock(mutex_);
        stat_read_.notify_all();
        for (auto& h : candidates) {
            // A hold released after its node's delete was seen was still lost (release() did not
            // report it released): only its listeners, who released it, are not told.
            if (h->lost || (h->released && !h->node_gone)) continue;
            h->lost = true;
            if (h->observer) observed.push_back(h);
            h->cause = cause;
            ++holds_lost_;
            if (h->released) continue;
            for (auto& [key, w] : h->lost_waiters) waiters.push_back(std::move(w));
            h->lost_waiters.clear();
            if (h->on_lost) reactions.push_back(std::exchange(h->on_lost, {}));
            auto [first, last] = listeners_.equal_range(h->group);
            for (auto it = first; it != last; ++it) calls.emplace_back(it->second, h->node_path);
        }
    }
    auto now = std::chrono::steady_clock::now();
    for (auto& h : observed)
        h->observer->lost(h->observed, cause == loss_cause::node_deleted ? loss_reason::node_deleted : loss_reason::session,
                          now - h->held_since);
    for (auto& w : waiters) w(make_error_code(errc::lock_lost));
    for (auto& react : reactions) react(cause);
    if (calls.empty()) return;
    asio::post(executor_, [calls = std::move(calls)] {
        for (auto& [l, node] : calls) {
            if (!l->active) continue;
            try {
                l->fn(node);
            } catch (const std::exception& e) {
                log::write(log::level::error, std::string("zkr: a lost-hold handler threw: ") + e.what());
            }
        }
    });
}

// Runs on the session thread: marks holds and hands the news on, never calling user code here.
void hold_registry::on_session(const session_event& ev) {
    if (ev.state != connection_state::lost && ev.state != connection_state::closed &&
        ev.state != connection_state::connected)
        return;
    std::vector<std::shared_ptr<hold>> gone;
    {
        std::lock_guard lock(mutex_);
        for (auto& h : holds_) {
            // Only the holds of the session this event is about: a late event must never mark a
            // hold of a newer session lost. A new session means every older one is gone.
            bool lost = ev.state == connection_state::closed ||
                        (ev.state == connection_state::lost && h->session == ev.session) ||
                        (ev.state == connection_state::connected && h->session != ev.session);
            if (lost) gone.push_back(h);
        }
    }
    report(std::move(gone), loss_cause::session);
}

bool hold_registry::release(const std::shared_ptr<hold>& h, bool* was_lost) {
    std::map<std::uint64_t, completion<>> waiters;
    bool observe = false;
    {
        std::lock_guard lock(mutex_);
        if (was_lost) *was_lost = h->lost || h->node_gone;
        if (h->released) return false;
        h->released = true;
        observe = h->observer && !h->lost && !h->node_gone;
        h->on_lost = {};
        holds_.erase(h);
        waiters.swap(h->lost_waiters);
        h->node_watch.reset();  // it ends with the node's delete (or stays armed on a node kept)
    }
    if (observe) h->observer->released(h->observed, std::chrono::steady_clock::now() - h->held_since);
    for (auto& [key, w] : waiters) w(make_error_code(errc::cancelled));
    return true;
}

lock_state hold_registry::state_of(const hold& h) const {
    {
        std::lock_guard lock(mutex_);
        if (h.released) return lock_state::not_held;
        if (h.lost || h.node_gone) return lock_state::lost;
    }
    auto port = port_.lock();
    if (!port) return lock_state::lost;
    // Live truth, not the last event: the C client's view of the handle, and the lease.
    switch (port->health(h.session)) {
        case session_health::live: return lock_state::held;
        case session_health::suspect: return lock_state::uncertain;
        case session_health::gone: return lock_state::lost;
    }
    return lock_state::lost;
}

std::chrono::steady_clock::time_point hold_registry::valid_until(const hold& h) const {
    if (state_of(h) != lock_state::held) return {};
    auto port = port_.lock();
    return port ? port->lease_until(h.session) : std::chrono::steady_clock::time_point{};
}

void hold_registry::wait_lost(const std::shared_ptr<hold>& h, completion<> done, boost::asio::cancellation_slot slot) {
    auto state = state_of(*h);
    error_code now;
    {
        std::lock_guard lock(mutex_);
        if (h->released) {
            now = make_error_code(errc::not_owner);
        } else if (!h->lost && !h->node_gone && state != lock_state::lost) {
            auto key = ++next_waiter_;
            h->lost_waiters.emplace(key, std::move(done));
            if (slot.is_connected()) {
                slot.assign([weak_self = weak_from_this(), weak_hold = std::weak_ptr<hold>(h), key](boost::asio::cancellation_type) {
                    auto self = weak_self.lock();
                    auto h = weak_hold.lock();
                    if (!self || !h) return;
                    std::map<std::uint64_t, completion<>> cancelled;
                    {
                        std::lock_guard lock(self->mutex_);
                        if (auto node = h->lost_waiters.extract(key)) cancelled.insert(std::move(node));
                    }
                    for (auto& [k, w] : cancelled) w(make_error_code(errc::cancelled));
                });
            }
            return;
        } else {
            now = make_error_code(errc::lock_lost);
        }
    }
    done(now);
}

subscription hold_registry::on_lost(const std::string& group, std::function<void(const std::string&)> fn) {
    auto l = std::make_shared<listener>();
    l->group = group;
    l->fn = std::move(fn);
    {
        std::lock_guard lock(mutex_);
        listeners_.emplace(group, l);
    }
    return subscription([weak = weak_from_this(), l] {
        l->active = false;
        if (auto self = weak.lock()) {
            std::lock_guard lock(self->mutex_);
            auto [first, last] = self->listeners_.equal_range(l->group);
            for (auto it = first; it != last; ++it) {
                if (it->second == l) {
                    self->listeners_.erase(it);
                    break;
                }
            }
        }
    });
}

std::int64_t hold_registry::fencing_token(const std::shared_ptr<hold>& h, std::chrono::milliseconds timeout) {
    if (h->czxid != 0) return h->czxid;
    if (h->observed_czxid.load() != 0) return h->observed_czxid.load();
    // Read by the own-node watch: no reason to wait for its delay to run out.
    send_watch_once(h);
    std::unique_lock lock(mutex_);
    stat_read_.wait_for(lock, timeout, [&] { return h->observed_czxid.load() != 0 || h->lost || h->node_gone || h->released; });
    return h->observed_czxid.load();
}

std::size_t hold_registry::size() const {
    std::lock_guard lock(mutex_);
    return holds_.size();
}

}  // namespace zkr::detail
