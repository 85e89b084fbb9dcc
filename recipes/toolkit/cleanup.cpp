#include "cleanup.hpp"

#include "sequence_queue.hpp"
#include "zkr/path.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

namespace zkr::detail {
namespace asio = boost::asio;

cleanup_service::cleanup_service(session_port& port) : port_(port.weak_port()), threads_(port.threads()) {}

void cleanup_service::attach() {
    auto port = port_.lock();
    if (!port) return;
    std::weak_ptr<cleanup_service> weak = weak_from_this();
    session_subscription_ = port->on_session_event([weak](const session_event& ev) {
        if (auto self = weak.lock()) self->on_session(ev);
    });
}

void cleanup_service::on_session(const session_event& ev) {
    if (ev.state != connection_state::closed) return;
    // Nothing of ours is left to retry: the session and its nodes are gone.
    std::vector<std::shared_ptr<asio::steady_timer>> timers;
    std::vector<std::function<void()>> released;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        for (auto& w : retry_timers_) {
            if (auto t = w.lock()) timers.push_back(std::move(t));
        }
        retry_timers_.clear();
        // Nothing is left to wait for either: whatever waits on a gate learns of the close itself.
        for (auto& [path, g] : gates_) {
            for (auto& fn : g.waiting) released.push_back(std::move(fn));
        }
        gates_.clear();
    }
    for (auto& t : timers) t->cancel();
    for (auto& fn : released) fn();
}

void cleanup_service::retry_later(int attempt, std::function<void()> again) {
    auto timer = std::make_shared<asio::steady_timer>(threads_->session);
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        std::erase_if(retry_timers_, [](const auto& w) { return w.expired(); });
        retry_timers_.push_back(timer);
    }
    auto delay = std::chrono::milliseconds(std::min(1000, 50 << std::min(attempt, 4)));
    // Armed on the session thread, where on_session cancels it when the client closes.
    asio::post(threads_->session, [timer, delay, again = std::move(again)]() mutable {
        timer->expires_after(delay);
        timer->async_wait([timer, again = std::move(again)](error_code ec) {
            if (!ec) again();
        });
    });
}

void cleanup_service::guaranteed_delete(std::string path, std::optional<completion<>> done) {
    auto port = port_.lock();
    if (!port) {
        if (done) (*done)(make_error_code(errc::client_closed));
        return;
    }
    guaranteed_delete_on(port->session_id(), std::move(path), std::move(done));
}

void cleanup_service::guaranteed_delete_on(std::int64_t session, std::string path, std::optional<completion<>> done) {
    // No session now: the node went with the one it was of, and sent on the next one, the delete
    // could find another session's node at its path.
    if (session == 0) {
        if (done) (*done)(make_error_code(errc::lock_lost));
        return;
    }
    std::shared_ptr<completion<>> shared_done = done ? std::make_shared<completion<>>(std::move(*done)) : nullptr;
    delete_attempt(std::move(path), session, 0, std::move(shared_done));
}

void cleanup_service::delete_persistent(std::string path, std::optional<completion<>> done) {
    std::shared_ptr<completion<>> shared_done = done ? std::make_shared<completion<>>(std::move(*done)) : nullptr;
    delete_attempt(std::move(path), 0, 0, std::move(shared_done));
}

void cleanup_service::delete_attempt(std::string path, std::int64_t session, int attempt,
                                     std::shared_ptr<completion<>> done) {
    auto finish = [done](error_code ec) {
        if (done) (*done)(ec);
    };
    auto port = port_.lock();
    if (!port) return finish(make_error_code(errc::client_closed));
    std::weak_ptr<cleanup_service> weak = weak_from_this();
    completion<> answered([weak, path, session, attempt, done, finish](error_code ec) {
        if (!ec || ec == errc::no_node) return finish({});
        auto self = weak.lock();
        auto port = self ? self->port_.lock() : nullptr;
        if (ec == errc::client_closed || !port || port->closed()) return finish(make_error_code(errc::client_closed));
        // Someone made children under it (a TTL node's container whose child has yet to expire, a
        // registration others use as a parent): not ours to empty, and resending cannot help.
        if (ec == errc::not_empty) return finish(ec);
        if (session == 0) {
            // A node of no session outlives them all: resent on the next, unless nothing can help.
            if (!is_retryable(ec) && !is_session_lost(ec)) return finish(ec);
        } else if (ec == errc::session_expired || port->session_id() != session) {
            // While the session that made the node lives, the node lives: keep trying. Once that
            // session is gone, so is the node.
            return finish(make_error_code(errc::lock_lost));
        }
        ++self->delete_retries_;
        self->retry_later(attempt, [weak, path, session, attempt, done, finish] {
            if (auto again = weak.lock()) again->delete_attempt(path, session, attempt + 1, done);
            else finish(make_error_code(errc::client_closed));
        });
    });
    if (session != 0) port->remove_on_session(session, path, any_version, std::move(answered));
    else port->remove(path, any_version, std::move(answered));
}

void cleanup_service::sweep(const std::string& parent, std::vector<unsettled_create> creates) {
    if (!creates.empty()) sweep_attempt(parent, std::move(creates), 0);
}

void cleanup_service::sweep_attempt(std::string parent, std::vector<unsettled_create> creates, int attempt) {
    auto port = port_.lock();
    if (!port) return;
    std::weak_ptr<cleanup_service> weak = weak_from_this();
    port->get_children(parent, false,
                       completion<children_result>([weak, parent, creates, attempt](error_code ec, children_result r) mutable {
                           auto self = weak.lock();
                           auto port = self ? self->port_.lock() : nullptr;
                           if (!port || port->closed()) return;
                           if (ec == errc::no_node) return;  // the parent is gone, every child with it
                           if (ec) {
                               // A listing that failed says nothing about the session: go on for the
                               // creates whose session still lives (the others' nodes went with it),
                               // and for those of persistent nodes.
                               std::int64_t now = port->session_id();
                               std::erase_if(creates, [&](const unsettled_create& u) {
                                   return !u.persistent && (u.session == 0 || u.session != now);
                               });
                               if (creates.empty()) return;
                               self->retry_later(attempt, [weak, parent, creates, attempt] {
                                   if (auto again = weak.lock()) again->sweep_attempt(parent, creates, attempt + 1);
                               });
                               return;
                           }
                           for (const auto& child : r.children) {
                               for (const auto& u : creates) {
                                   if (has_prefix(child, u.prefix)) {
                                       ++self->swept_;
                                       if (u.persistent) self->delete_persistent(join_path(parent, child));
                                       else self->guaranteed_delete(join_path(parent, child));
                                   }
                               }
                           }
                       }));
}

std::uint64_t cleanup_service::enter_gate(const std::string& path) {
    std::lock_guard lock(mutex_);
    auto key = ++next_key_;
    if (!closed_) gates_[path].keys.push_back(key);
    return key;
}

void cleanup_service::leave_gate(const std::string& path, std::uint64_t key) {
    std::vector<std::function<void()>> ready;
    {
        std::lock_guard lock(mutex_);
        auto it = gates_.find(path);
        if (it == gates_.end()) return;
        std::erase(it->second.keys, key);
        if (!it->second.keys.empty()) return;
        ready = std::move(it->second.waiting);
        gates_.erase(it);
    }
    for (auto& fn : ready) fn();
}

void cleanup_service::when_open(const std::string& path, std::function<void()> fn) {
    {
        std::lock_guard lock(mutex_);
        auto it = gates_.find(path);
        if (it != gates_.end()) {
            it->second.waiting.push_back(std::move(fn));
            return;
        }
    }
    fn();
}

}  // namespace zkr::detail
