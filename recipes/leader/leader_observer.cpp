// zkr::leader_observer: reads an election (one listing, then the leader's data and a child watch
// on the leader's node, back to back) and reads it again when that watch fires, when the path's
// first participant arrives (a child watch on the path while it is empty, or an exists watch
// while it is missing), and after every new session or reconnection. One read at a time: an
// event during a read asks for one more.
//
// Threads: reads complete on the C client's completion thread; session events on the session
// thread; listeners and handlers are posted to a strand of the client's executor.
#include "zkr/leader_observer.hpp"

#include "toolkit/recipe_path.hpp"
#include "toolkit/sequence_queue.hpp"
#include "session_port.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <map>
#include <mutex>

namespace zkr::detail {
namespace asio = boost::asio;

class observer_impl : public std::enable_shared_from_this<observer_impl> {
public:
    observer_impl(session_port& port, std::string path, election_recipe recipe)
        : port_(port.weak_port()),
          executor_(port.executor()),
          strand_(asio::make_strand(executor_)),
          path_(std::move(path)),
          family_(recipe == election_recipe::latch ? queue_kind::latch : queue_kind::exclusive) {}

    void attach(session_port& port) {
        std::weak_ptr<observer_impl> weak = weak_from_this();
        session_subscription_ = port.on_session_event([weak](const session_event& ev) {
            // Watches end with their session; a reconnection may have missed a change.
            if (ev.state == connection_state::connected || ev.state == connection_state::reconnected) {
                if (auto self = weak.lock()) self->read();
            }
        });
        read();
    }

    const std::string& path() const noexcept { return path_; }
    const asio::any_io_executor& executor() const noexcept { return executor_; }

    std::optional<election_participant> leader() const {
        std::lock_guard lock(mutex_);
        return leader_;
    }
    bool ready() const {
        std::lock_guard lock(mutex_);
        return ready_;
    }

    subscription listen(std::function<void(const std::optional<election_participant>&)> fn) {
        if (!fn) throw std::invalid_argument("zkr::leader_observer::on_change: the listener is empty");
        auto l = std::make_shared<listener>();
        l->fn = std::move(fn);
        std::uint64_t key;
        {
            std::lock_guard lock(mutex_);
            key = ++next_key_;
            listeners_.emplace(key, l);
        }
        return subscription([weak = weak_from_this(), l, key] {
            l->active = false;
            if (auto self = weak.lock()) {
                std::lock_guard lock(self->mutex_);
                self->listeners_.erase(key);
            }
        });
    }

    void next_change(completion<std::optional<election_participant>> done, asio::cancellation_slot slot) {
        {
            std::lock_guard lock(mutex_);
            if (!closed_) {
                auto key = ++next_key_;
                waiters_.emplace(key, std::move(done));
                if (slot.is_connected()) {
                    slot.assign([weak = weak_from_this(), key](asio::cancellation_type) {
                        if (auto self = weak.lock()) self->cancel(key);
                    });
                }
                return;
            }
        }
        done(make_error_code(errc::cancelled), std::nullopt);
    }

    void close() {
        std::map<std::uint64_t, completion<std::optional<election_participant>>> waiters;
        std::shared_ptr<watch_state> watch;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            closed_ = true;
            waiters.swap(waiters_);
            watch = std::exchange(watch_, nullptr);
        }
        session_subscription_.reset();
        if (watch) {
            if (auto port = port_.lock()) port->remove_watch(watch, completion<>(completion<>::inline_fn([](error_code) {})));
        }
        for (auto& [key, w] : waiters) w(make_error_code(errc::cancelled), std::nullopt);
    }

private:
    struct listener {
        std::function<void(const std::optional<election_participant>&)> fn;
        std::atomic<bool> active{true};
    };

    void cancel(std::uint64_t key) {
        std::map<std::uint64_t, completion<std::optional<election_participant>>> cancelled;
        {
            std::lock_guard lock(mutex_);
            if (auto node = waiters_.extract(key)) cancelled.insert(std::move(node));
        }
        for (auto& [k, w] : cancelled) w(make_error_code(errc::cancelled), std::nullopt);
    }

    // One read at a time; an event meanwhile asks for one more once it is done.
    void read() {
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            if (reading_) {
                read_again_ = true;
                return;
            }
            reading_ = true;
            read_again_ = false;
        }
        auto port = port_.lock();
        if (!port) return;
        std::weak_ptr<observer_impl> weak = weak_from_this();
        port->get_children(path_, false, completion<children_result>(completion<children_result>::inline_fn(
                                             [weak](error_code ec, children_result r) {
                                                 if (auto self = weak.lock()) self->listed(ec, std::move(r.children));
                                             })));
    }

    void listed(error_code ec, std::vector<std::string> children) {
        auto port = port_.lock();
        if (!port) return;
        std::weak_ptr<observer_impl> weak = weak_from_this();
        if (ec == errc::no_node) {
            // No election yet: wait for its path.
            port->exists(path_, true, completion<exists_result>(completion<exists_result>::inline_fn(
                                          [weak](error_code wec, exists_result r) {
                                              // Made meanwhile: read it now (the watch fires on its next change).
                                              if (auto self = weak.lock()) self->watching(wec, r.watch, std::nullopt, r.exists);
                                          })));
            return;
        }
        if (ec) return done_reading(false);  // connection trouble: the next session event reads again
        auto queue = sorted_contenders(children, family_);
        if (queue.empty()) {
            // Nobody takes part: wait for the first to join.
            port->get_children(path_, true, completion<children_result>(completion<children_result>::inline_fn(
                                                [weak, family = family_](error_code wec, children_result r) {
                                                    // Someone joined before the watch was set: read it now.
                                                    bool joined = !wec && !sorted_contenders(r.children, family).empty();
                                                    if (auto self = weak.lock()) self->watching(wec, r.watch, std::nullopt, joined);
                                                })));
            return;
        }
        // The leader's id and a watch on its departure, back to back.
        std::string head = join_path(path_, queue.front().name);
        struct replies {
            std::mutex mutex;
            int pending = 2;
            error_code data_error, watch_error;
            std::string data;
            zkr::watch watch;
        };
        auto j = std::make_shared<replies>();
        auto joined = [weak, j, name = queue.front().name] {
            {
                std::lock_guard lock(j->mutex);
                if (--j->pending > 0) return;
            }
            auto self = weak.lock();
            if (!self) return;
            if (j->data_error == errc::no_node || j->watch_error == errc::no_node) return self->done_reading(true);  // gone already
            if (j->data_error || j->watch_error) return self->done_reading(false);
            self->watching({}, j->watch, election_participant{std::move(j->data), name, true});
        };
        port->get_data(head, false, completion<data_result>(completion<data_result>::inline_fn([j, joined](error_code e, data_result r) {
                           {
                               std::lock_guard lock(j->mutex);
                               j->data_error = e;
                               j->data = std::move(r.data);
                           }
                           joined();
                       })));
        port->get_children(head, true, completion<children_result>(completion<children_result>::inline_fn(
                                           [j, joined](error_code e, children_result r) {
                                               {
                                                   std::lock_guard lock(j->mutex);
                                                   j->watch_error = e;
                                                   j->watch = std::move(r.watch);
                                               }
                                               joined();
                                           })));
    }

    // A read ended with `leader` and a watch that says when to read again (or, `stale`, the read
    // is out of date already: read again at once).
    void watching(error_code ec, const zkr::watch& w, std::optional<election_participant> leader, bool stale = false) {
        if (ec) return done_reading(false);
        auto ws = watch_access::state(w);
        {
            std::lock_guard lock(mutex_);
            if (closed_) {
                if (auto port = port_.lock(); port && ws)
                    port->remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
                return;
            }
            // The watch of a read we take as stale may fire later for nothing: it only reads again.
            watch_ = ws;
        }
        if (!stale) publish(std::move(leader));
        if (ws) {
            ws->wait_inline([weak = weak_from_this(), raw = ws.get()](error_code wec, const watch_event&) {
                auto self = weak.lock();
                if (!self) return;
                {
                    std::lock_guard lock(self->mutex_);
                    if (self->watch_.get() != raw) return;
                    self->watch_.reset();
                }
                if (wec == errc::session_expired || wec == errc::client_closed) return;  // a session event reads again
                self->read();
            });
        }
        done_reading(stale);
    }

    void done_reading(bool now_again) {
        bool again;
        {
            std::lock_guard lock(mutex_);
            reading_ = false;
            again = now_again || read_again_;
        }
        if (again) read();
    }

    void publish(std::optional<election_participant> leader) {
        std::vector<std::shared_ptr<listener>> calls;
        std::map<std::uint64_t, completion<std::optional<election_participant>>> waiters;
        {
            std::lock_guard lock(mutex_);
            bool first = !ready_;
            ready_ = true;
            bool same = leader_.has_value() == leader.has_value() && (!leader || leader_->node == leader->node);
            if (same && !first) return;
            leader_ = leader;
            if (same) return;  // the first read of an election with the same (no) leader: not a change
            for (auto& [key, l] : listeners_) calls.push_back(l);
            waiters.swap(waiters_);
        }
        for (auto& [key, w] : waiters) w({}, leader);
        if (calls.empty()) return;
        asio::post(strand_, [calls = std::move(calls), leader, path = path_] {
            for (auto& l : calls) {
                if (!l->active) continue;
                try {
                    l->fn(leader);
                } catch (const std::exception& e) {
                    log::write(log::level::error, "zkr::leader_observer \"" + path + "\": a listener threw: " + e.what());
                }
            }
        });
    }

    std::weak_ptr<session_port> port_;
    asio::any_io_executor executor_;
    asio::strand<asio::any_io_executor> strand_;
    const std::string path_;
    const queue_kind family_;
    subscription session_subscription_;

    mutable std::mutex mutex_;  // a leaf
    bool closed_ = false, reading_ = false, read_again_ = false, ready_ = false;
    std::optional<election_participant> leader_;
    std::shared_ptr<watch_state> watch_;
    std::uint64_t next_key_ = 0;
    std::map<std::uint64_t, std::shared_ptr<listener>> listeners_;
    std::map<std::uint64_t, completion<std::optional<election_participant>>> waiters_;
};

void start_next_leader(const std::shared_ptr<observer_impl>& o, leader_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    o->next_change(completion<std::optional<election_participant>>(std::move(handler), o->executor()), slot);
}

asio::any_io_executor observer_executor(const observer_impl& o) { return o.executor(); }

}  // namespace zkr::detail

namespace zkr {

leader_observer::leader_observer(client& c, std::string path, election_recipe recipe) {
    detail::check_recipe_path(c, path, "zkr::leader_observer", "election path");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::leader_observer on a closed client");
    impl_ = std::make_shared<detail::observer_impl>(*port, std::move(path), recipe);
    impl_->attach(*port);
}

leader_observer::~leader_observer() { impl_->close(); }

std::optional<election_participant> leader_observer::leader() const { return impl_->leader(); }
bool leader_observer::ready() const { return impl_->ready(); }
subscription leader_observer::on_change(std::function<void(const std::optional<election_participant>&)> fn) {
    return impl_->listen(std::move(fn));
}
void leader_observer::close() { impl_->close(); }
const std::string& leader_observer::path() const noexcept { return impl_->path(); }

}  // namespace zkr
