// zkr::tree_cache: drives tree_sync (the sans-io machine) through the session port.
//
// Threads: replies and watch events arrive on the C client's completion thread, session events
// on the session thread; each is fed to the machine under mutex_ (a leaf: nothing is called under
// it), and the reads it asks for are sent after. Listeners run on a strand of the cache's
// executor, fed from one queue in the order the machine produced the events, so a slow listener
// holds up only later listener calls, never the machine. The retry timer runs on the session
// thread.
//
// Watches: every read leaves one. Those armed are kept in armed_ so close() can remove them from
// the server; a watch's event reaches the machine only while the cache is open (a late event of
// a closed cache, or of one destroyed, is dropped: the waiter holds the cache weakly). Replies
// hold the cache strongly, so a reply's watch arriving after close() is removed at once.
#include "zkr/tree_cache.hpp"

#include "nodes/unobserved_waits.hpp"
#include "session_port.hpp"
#include "toolkit/observed_operation.hpp"
#include "toolkit/recipe_path.hpp"
#include "toolkit/retry_timer.hpp"
#include "toolkit/waiters.hpp"
#include "tree_sync.hpp"
#include "zkr/log.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace zkr {

const char* to_string(cache_event_type t) noexcept {
    switch (t) {
        case cache_event_type::created: return "created";
        case cache_event_type::changed: return "changed";
        case cache_event_type::deleted: return "deleted";
        case cache_event_type::initialized: return "initialized";
    }
    return "unknown";
}

}  // namespace zkr

namespace zkr::detail {
namespace asio = boost::asio;

class cache_impl : public std::enable_shared_from_this<cache_impl> {
public:
    cache_impl(session_port& port, std::string path, const tree_cache_options& o)
        : port_(port.weak_port()),
          executor_(o.executor ? *o.executor : port.executor()),
          strand_(asio::make_strand(executor_)),
          path_(path),
          sync_(std::move(path), o.max_depth, o.max_reads_in_flight),
          retry_(port.threads()) {}

    const std::string& path() const noexcept { return path_; }
    const std::weak_ptr<session_port>& port() const noexcept { return port_; }
    const asio::any_io_executor& executor() const noexcept { return executor_; }

    subscription listen(std::function<void(const cache_event&)> fn) {
        if (!fn) throw std::invalid_argument("zkr::tree_cache::on_change: the listener is empty");
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

    void start() {
        auto port = port_.lock();
        {
            std::lock_guard lock(mutex_);
            if (closed_) throw std::logic_error("zkr::tree_cache::start: the cache \"" + path_ + "\" is closed");
            if (started_) throw std::logic_error("zkr::tree_cache::start: the cache \"" + path_ + "\" was started already");
            started_ = true;
        }
        if (!port || port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::tree_cache::start");
        std::weak_ptr<cache_impl> weak = weak_from_this();
        auto sub = port->on_session_event([weak](const session_event& ev) {
            if (auto self = weak.lock()) self->on_session(ev);
        });
        {
            std::lock_guard lock(mutex_);
            session_subscription_ = std::move(sub);
        }
        // Connected already: no `connected` event comes for this session.
        if (port->is_connected()) {
            if (auto session = port->session_id()) on_session({connection_state::connected, session});
        }
    }

    void close() {
        std::vector<std::shared_ptr<watch_state>> armed;
        std::map<std::uint64_t, completion<>> waiters;
        subscription sub;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            closed_ = true;
            for (auto& [raw, ws] : armed_) armed.push_back(ws);
            armed_.clear();
            waiters.swap(init_waiters_);
            sub = std::move(session_subscription_);
        }
        retry_.cancel();
        initialized_cv_.notify_all();
        sub.reset();
        if (auto port = port_.lock()) {
            for (auto& ws : armed) {
                ws->clear_inline();
                port->remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
            }
        }
        for (auto& [key, w] : waiters) w(make_error_code(errc::cancelled));
    }

    bool initialized() const {
        std::lock_guard lock(mutex_);
        return sync_.initialized();
    }

    bool wait_initialized(std::chrono::steady_clock::time_point deadline) {
        std::unique_lock lock(mutex_);
        wait_until(initialized_cv_, lock, deadline, [&] { return closed_ || sync_.initialized(); });
        return !closed_ && sync_.initialized();
    }

    void wait_initialized_async(completion<> done, asio::cancellation_slot slot) {
        {
            std::lock_guard lock(mutex_);
            if (!closed_ && !sync_.initialized()) {
                auto key = ++next_key_;
                init_waiters_.emplace(key, std::move(done));
                if (slot.is_connected()) {
                    slot.assign([weak = weak_from_this(), key](asio::cancellation_type) {
                        if (auto self = weak.lock()) self->cancel_wait(key);
                    });
                }
                return;
            }
        }
        bool ok = initialized();
        done(ok ? error_code{} : make_error_code(errc::cancelled));
    }

    std::optional<cached_node> get(const std::string& path) const {
        std::lock_guard lock(mutex_);
        return sync_.get(path);
    }
    std::vector<std::string> children(const std::string& path) const {
        std::lock_guard lock(mutex_);
        return sync_.children(path);
    }
    std::size_t size() const {
        std::lock_guard lock(mutex_);
        return sync_.size();
    }

private:
    struct listener {
        std::function<void(const cache_event&)> fn;
        std::atomic<bool> active{true};
    };
    // What one step of the machine leaves to do once mutex_ is released.
    struct followup {
        std::vector<cache_read> reads;
        std::map<std::uint64_t, completion<>> ready;  // async waits for initialized
        bool drain = false;
        bool notify = false;
        bool retry_timer = false;
        std::string unreadable;  // said once per session: the first read that failed for good
    };

    void cancel_wait(std::uint64_t key) {
        std::optional<completion<>> w;
        {
            std::lock_guard lock(mutex_);
            auto node = init_waiters_.extract(key);
            if (!node) return;
            w.emplace(std::move(node.mapped()));
        }
        (*w)(make_error_code(errc::cancelled));
    }

    // Under mutex_: collects what the machine asks for after it was fed.
    followup collect_locked() {
        followup f;
        f.reads = sync_.next_reads();
        auto events = sync_.take_events();
        bool initialized_now = false;
        for (auto& ev : events) {
            if (ev.type == cache_event_type::initialized) initialized_now = true;
            pending_.push_back(std::move(ev));
        }
        if (!pending_.empty() && !draining_) {
            draining_ = true;
            f.drain = true;
        }
        if (initialized_now) {
            f.notify = true;
            f.ready.swap(init_waiters_);
        }
        if (sync_.unreadable() > 0 && !unreadable_said_) {
            unreadable_said_ = true;
            f.unreadable = sync_.first_unreadable() + (sync_.unreadable() > 1 ? ", and " + std::to_string(sync_.unreadable() - 1) + " more" : "");
        }
        if (sync_.has_failed_reads() && !retry_armed_) {
            retry_armed_ = true;
            f.retry_timer = true;
        }
        return f;
    }

    void carry_out(followup f) {
        if (f.notify) initialized_cv_.notify_all();
        for (auto& [key, w] : f.ready) w({});
        if (f.drain) asio::post(strand_, [self = shared_from_this()] { self->drain(); });
        if (f.retry_timer) arm_retry();
        if (!f.unreadable.empty())
            log::write(log::level::error, "zkr::tree_cache \"" + path_ + "\": a node cannot be read on this session (" +
                                              f.unreadable + "); the cache stays uninitialized until a new session");
        send_all(std::move(f.reads));
    }

    // Sends reads one at a time from a queue: a read can complete on this very thread (a watch
    // refused at once), and its follow-ups must join the queue, not recurse (thousands deep
    // over a large tree: a stack overflow, seen with 30,000 nodes).
    void send_all(std::vector<cache_read> reads) {
        {
            std::lock_guard lock(mutex_);
            for (auto& r : reads) outbox_.push_back(std::move(r));
            if (sending_) return;  // the thread sending now takes them
            sending_ = true;
        }
        for (;;) {
            cache_read r;
            {
                std::lock_guard lock(mutex_);
                if (outbox_.empty()) {
                    sending_ = false;
                    return;
                }
                r = std::move(outbox_.front());
                outbox_.pop_front();
            }
            send(r);
        }
    }

    // Feeds the machine under the mutex, then carries out what it asks for.
    template <class Fn>
    void feed(Fn&& fn) {
        followup f;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            fn();
            f = collect_locked();
        }
        carry_out(std::move(f));
    }

    void on_session(const session_event& ev) {
        feed([&] {
            switch (ev.state) {
                case connection_state::connected:
                    if (ev.session != session_) {
                        session_ = ev.session;
                        unreadable_said_ = false;
                        sync_.new_session();
                    }
                    break;
                case connection_state::reconnected: sync_.retry_failed(); break;
                case connection_state::lost: sync_.session_lost(); break;
                default: break;
            }
        });
    }

    // Failed reads go out again after a pause while the connection is up (a reconnection sends
    // them at once).
    void arm_retry() {
        retry_.arm(std::chrono::milliseconds(500), [weak = weak_from_this()] {
            auto self = weak.lock();
            if (!self) return;
            auto port = self->port_.lock();
            bool up = port && port->is_connected();
            self->feed([&] {
                self->retry_armed_ = false;
                if (up) self->sync_.retry_failed();
            });
        });
    }

    void send(const cache_read& r) {
        auto port = port_.lock();
        if (!port) return;  // the client is gone, and with it every watch and reply
        auto self = shared_from_this();
        switch (r.what) {
            case cache_read::kind::data:
                port->get_data(r.path, true, completion<data_result>(completion<data_result>::inline_fn(
                                                 [self, r](error_code ec, data_result res) {
                                                     self->replied(r, res.watch, [&] {
                                                         self->sync_.data_read(r, ec, std::move(res.data), res.stat);
                                                     });
                                                 })));
                break;
            case cache_read::kind::children:
                port->get_children(r.path, true, completion<children_result>(completion<children_result>::inline_fn(
                                                     [self, r](error_code ec, children_result res) {
                                                         self->replied(r, res.watch, [&] {
                                                             self->sync_.children_read(r, ec, std::move(res.children), res.stat);
                                                         });
                                                     })));
                break;
            case cache_read::kind::exists:
                port->exists(r.path, true, completion<exists_result>(completion<exists_result>::inline_fn(
                                               [self, r](error_code ec, exists_result res) {
                                                   self->replied(r, res.watch, [&] {
                                                       self->sync_.exists_read(r, ec, res.exists);
                                                   });
                                               })));
                break;
        }
    }

    // A reply: the machine takes it, and the watch it left is kept (or removed, once closed).
    template <class Fn>
    void replied(const cache_read& r, const zkr::watch& w, Fn&& take) {
        auto ws = watch_access::state(w);
        followup f;
        bool closed;
        {
            std::lock_guard lock(mutex_);
            closed = closed_;
            if (!closed) {
                take();
                if (ws) armed_.emplace(ws.get(), ws);
                f = collect_locked();
            }
        }
        if (closed) {
            if (auto port = port_.lock(); port && ws)
                port->remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
            return;
        }
        carry_out(std::move(f));
        if (!ws) return;
        ws->wait_inline([weak = weak_from_this(), r, raw = ws.get()](error_code ec, const watch_event& ev) {
            auto self = weak.lock();
            if (!self) return;
            self->feed([&] {
                self->armed_.erase(raw);
                // Ended without an event (session lost, removed, client closed): the session
                // events drive what follows.
                if (!ec) self->sync_.watch_fired(r, ev.type);
            });
        });
    }

    void drain() {
        for (;;) {
            std::vector<cache_event> batch;
            std::vector<std::shared_ptr<listener>> calls;
            {
                std::lock_guard lock(mutex_);
                if (pending_.empty()) {
                    draining_ = false;
                    return;
                }
                batch.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
                pending_.clear();
                for (auto& [key, l] : listeners_) calls.push_back(l);
            }
            for (const auto& ev : batch) {
                for (auto& l : calls) {
                    if (!l->active) continue;
                    {
                        std::lock_guard lock(mutex_);
                        if (closed_) return;  // listeners are not called after close()
                    }
                    try {
                        l->fn(ev);
                    } catch (const std::exception& e) {
                        log::write(log::level::error, "zkr::tree_cache \"" + path_ + "\": a listener threw: " + e.what());
                    }
                }
            }
        }
    }

    std::weak_ptr<session_port> port_;
    asio::any_io_executor executor_;
    asio::strand<asio::any_io_executor> strand_;
    const std::string path_;

    mutable std::mutex mutex_;  // a leaf
    std::condition_variable initialized_cv_;
    tree_sync sync_;
    bool started_ = false, closed_ = false;
    std::int64_t session_ = 0;  // the session the machine reads on
    subscription session_subscription_;
    std::unordered_map<watch_state*, std::shared_ptr<watch_state>> armed_;
    std::deque<cache_event> pending_;
    bool draining_ = false;
    bool retry_armed_ = false;
    bool unreadable_said_ = false;
    std::deque<cache_read> outbox_;  // reads to send, in order (send_all)
    bool sending_ = false;
    retry_timer retry_;
    std::uint64_t next_key_ = 0;
    std::map<std::uint64_t, std::shared_ptr<listener>> listeners_;
    std::map<std::uint64_t, completion<>> init_waiters_;
};

void start_wait_initialized(const std::shared_ptr<cache_impl>& c, cache_init_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    c->wait_initialized_async(
        observed_completion(observed_wait(c->port(), recipe_kind::tree_cache, c->path()), completion<>(std::move(handler), c->executor())),
        slot);
}

observed_operation observed_group_wait(const cache_impl& group_cache) {
    return observed_wait(group_cache.port(), recipe_kind::group_member, group_cache.path());
}

void start_unobserved_wait_initialized(const std::shared_ptr<cache_impl>& c, cache_init_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    c->wait_initialized_async(completion<>(std::move(handler), c->executor()), slot);
}

asio::any_io_executor cache_executor(const cache_impl& c) { return c.executor(); }

}  // namespace zkr::detail

namespace zkr {

tree_cache::tree_cache(client& c, std::string path, tree_cache_options options) {
    detail::check_recipe_path(c, path, "zkr::tree_cache", "cached path");
    if (options.max_depth < -1)
        throw std::invalid_argument("zkr::tree_cache: max_depth " + std::to_string(options.max_depth) +
                                    " (0: the path's node, 1: with its children, -1: every depth)");
    if (options.max_reads_in_flight == 0) throw std::invalid_argument("zkr::tree_cache: max_reads_in_flight is 0 (at least 1)");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::tree_cache on a closed client");
    impl_ = std::make_shared<detail::cache_impl>(*port, std::move(path), options);
}

tree_cache::~tree_cache() { impl_->close(); }

subscription tree_cache::on_change(std::function<void(const cache_event&)> fn) { return impl_->listen(std::move(fn)); }
void tree_cache::start() { impl_->start(); }
void tree_cache::close() { impl_->close(); }
bool tree_cache::initialized() const { return impl_->initialized(); }
bool tree_cache::wait_initialized_unobserved(std::chrono::steady_clock::time_point deadline) { return impl_->wait_initialized(deadline); }

bool tree_cache::wait_initialized(std::chrono::steady_clock::time_point deadline) {
    return detail::observed_blocking_wait(detail::observed_wait(impl_->port(), recipe_kind::tree_cache, impl_->path()),
                                          deadline, [&] { return impl_->wait_initialized(deadline); });
}
std::optional<cached_node> tree_cache::get(const std::string& path) const { return impl_->get(path); }
std::vector<std::string> tree_cache::children(const std::string& path) const { return impl_->children(path); }
std::size_t tree_cache::size() const { return impl_->size(); }
const std::string& tree_cache::path() const noexcept { return impl_->path(); }

}  // namespace zkr
