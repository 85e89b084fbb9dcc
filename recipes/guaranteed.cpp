// Cleanup that must happen even when the network does not cooperate: deleting released or
// stale lock nodes, and sweeping creates whose outcome no listing settled. Each is resent
// with backoff for as long as the session that made the node lives (CURATOR-678); once that
// session is gone, so is the node (a session zkr gave up is closed on the server by the
// session layer as soon as one answers).
#include "lock_engine.hpp"

#include "zkr/path.hpp"

#include <boost/asio/post.hpp>

namespace zkr::detail {
namespace asio = boost::asio;

void lock_engine::retry_later(int attempt, std::function<void()> again) {
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

void lock_engine::guaranteed_delete(std::string path, std::optional<completion<>> done) {
    std::shared_ptr<completion<>> shared_done = done ? std::make_shared<completion<>>(std::move(*done)) : nullptr;
    auto c = client();
    if (!c) {
        if (shared_done) (*shared_done)(make_error_code(errc::client_closed));
        return;
    }
    delete_attempt(std::move(path), c->session_id(), 0, std::move(shared_done));
}

void lock_engine::delete_attempt(std::string path, std::int64_t session, int attempt, std::shared_ptr<completion<>> done) {
    auto finish = [done](error_code ec) {
        if (done) (*done)(ec);
    };
    auto c = client();
    if (!c) return finish(make_error_code(errc::client_closed));
    std::weak_ptr<lock_engine> weak = weak_from_this();
    c->remove(path, any_version, completion<>([weak, path, session, attempt, done, finish](error_code ec) {
        if (!ec || ec == errc::no_node) return finish({});
        auto self = weak.lock();
        auto c = self ? self->client() : nullptr;
        if (ec == errc::client_closed || !c || c->closed()) return finish(make_error_code(errc::client_closed));
        // While the session that made the node lives, the node lives: keep trying. Once that
        // session is gone, so is the node.
        if (session == 0 || c->session_id() != session) return finish(make_error_code(errc::lock_lost));
        ++self->counters_.delete_retries;
        self->retry_later(attempt, [weak, path, session, attempt, done, finish] {
            if (auto again = weak.lock()) again->delete_attempt(path, session, attempt + 1, done);
            else finish(make_error_code(errc::client_closed));
        });
    }));
}

void lock_engine::sweep(const std::string& lock_path, std::vector<unsettled_create> creates) {
    sweep_attempt(lock_path, std::move(creates), 0);
}

void lock_engine::sweep_attempt(std::string lock_path, std::vector<unsettled_create> creates, int attempt) {
    auto c = client();
    if (!c) return;
    std::weak_ptr<lock_engine> weak = weak_from_this();
    c->get_children(lock_path, false,
                    completion<children_result>([weak, lock_path, creates, attempt](error_code ec, children_result r) mutable {
                        auto self = weak.lock();
                        auto c = self ? self->client() : nullptr;
                        if (!c || c->closed()) return;
                        if (ec == errc::no_node) return;  // the lock path is gone, every child with it
                        if (ec) {
                            // A listing that failed says nothing about the session: go on for the
                            // creates whose session still lives (the others' nodes went with it).
                            std::int64_t now = c->session_id();
                            std::erase_if(creates, [&](const unsettled_create& u) { return u.session == 0 || u.session != now; });
                            if (creates.empty()) return;
                            self->retry_later(attempt, [weak, lock_path, creates, attempt] {
                                if (auto again = weak.lock()) again->sweep_attempt(lock_path, creates, attempt + 1);
                            });
                            return;
                        }
                        for (const auto& child : r.children) {
                            for (const auto& u : creates) {
                                if (has_prefix(child, u.prefix)) {
                                    ++self->counters_.stale_nodes_deleted;
                                    self->guaranteed_delete(join_path(lock_path, child));
                                }
                            }
                        }
                    }));
}

}  // namespace zkr::detail
