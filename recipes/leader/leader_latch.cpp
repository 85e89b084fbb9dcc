// zkr::leader_latch on the recipe toolkit: a queue_fsm of `latch` nodes (no holding marks: a
// latch node's data is its id, which Curator's participants read) run by fsm_runner; the node
// it leads with is a hold (hold_registry: lost with its session or its node); the cleanup
// service deletes what it leaves. The latch itself only says when to join again and tells the
// listeners what changed.
//
// Threads: joins, answers and losses run wherever the toolkit runs them (the C client's
// completion thread, the session thread); listeners and handlers are posted to the client's
// executor, through a strand so that they run in order. Lock order: latch_impl::mutex_ before
// the toolkit's leaf mutexes and the session's live health read (hold_registry::state_of); the
// listeners' calls are posted under it (a post runs nothing here); nothing that sends a request or
// runs user code is called under it.
#include "zkr/leader_latch.hpp"

#include "toolkit/cleanup.hpp"
#include "toolkit/fsm_runner.hpp"
#include "toolkit/hold.hpp"
#include "toolkit/hold_monitor.hpp"
#include "toolkit/queue_fsm.hpp"
#include "toolkit/queue_reader.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/log.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>

#include <condition_variable>
#include <map>
#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

class latch_impl : public std::enable_shared_from_this<latch_impl> {
public:
    using runner = fsm_runner<queue_fsm>;

    latch_impl(session_port& port, std::string path, std::string id, close_mode on_close)
        : port_(port.weak_port()),
          threads_(port.threads()),
          executor_(port.executor()),
          strand_(asio::make_strand(executor_)),
          holds_(hold_registry::of(port)),
          cleanup_(cleanup_service::of(port)),
          path_(std::move(path)),
          id_(std::move(id)),
          on_close_(on_close),
          observer_(port.observer_events()),
          observe_id_(observer_ ? observer_->next_id() : 0),
          retry_timer_(threads_->session) {}

    void attach(session_port& port) {
        std::weak_ptr<latch_impl> weak = weak_from_this();
        // Suspended, reconnected, past the lease: leadership follows the connection, read live.
        monitor_ = std::make_shared<hold_monitor>(port, holds_, [weak] {
            auto self = weak.lock();
            return self ? self->refresh() : lock_state::not_held;
        });
        monitor_->attach(port);
    }

    const std::string& path() const noexcept { return path_; }
    const std::string& id() const noexcept { return id_; }
    close_mode default_close_mode() const noexcept { return on_close_; }
    const asio::any_io_executor& executor() const noexcept { return executor_; }

    void start() {
        {
            std::lock_guard lock(mutex_);
            if (started_) throw std::logic_error("zkr::leader_latch::start: \"" + path_ + "\" was started already (a latch starts once)");
            started_ = true;
        }
        join();
    }

    void close(close_mode mode) {
        std::shared_ptr<runner> r;
        std::shared_ptr<hold> h;
        std::map<std::uint64_t, completion<>> waiters;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            closed_ = true;
            ++generation_;
            r = std::exchange(runner_, nullptr);
            h = std::exchange(leadership_, nullptr);
            bool was_leading = std::exchange(leading_, false);
            waiters.swap(await_waiters_);
            if (mode == close_mode::notify_leader && was_leading) notify_locked(false);
            if (was_leading) observe_locked(false);
        }
        leading_changed_.notify_all();
        // Our node goes either way: the queued one with its acquisition, the leading one here.
        if (r) r->give_up(make_error_code(errc::cancelled));
        if (h) {
            bool lost = false;
            holds_->release(h, &lost);
            cleanup_->guaranteed_delete(h->node_path);
        }
        monitor_->stop();
        asio::post(threads_->session, [self = shared_from_this()] { self->retry_timer_.cancel(); });
        for (auto& [key, w] : waiters) w(make_error_code(errc::cancelled));
    }

    bool wait_leadership(std::chrono::steady_clock::time_point deadline) {
        std::unique_lock lock(mutex_);
        // The flag says what listeners were told; the answer is read live as well, like
        // has_leadership(), so it is never older than the connection's last change.
        auto settled = [&] { return (leading_ && leading_now_locked()) || closed_; };
        if (detail::is_forever(deadline)) leading_changed_.wait(lock, settled);
        else leading_changed_.wait_until(lock, deadline, settled);
        return !closed_ && leading_ && leading_now_locked();
    }

    void await_async(completion<> done, asio::cancellation_slot slot) {
        {
            std::lock_guard lock(mutex_);
            if (closed_) {
                done(make_error_code(errc::cancelled));
                return;
            }
            if (!leading_ || !leading_now_locked()) {
                std::uint64_t key = ++next_waiter_;
                await_waiters_.emplace(key, std::move(done));
                if (slot.is_connected()) {
                    slot.assign([weak = weak_from_this(), key](asio::cancellation_type) {
                        if (auto self = weak.lock()) self->cancel_await(key);
                    });
                }
                return;
            }
        }
        done({});
    }

    lock_state state() const {
        std::shared_ptr<hold> h;
        {
            std::lock_guard lock(mutex_);
            h = leadership_;
        }
        return h ? holds_->state_of(*h) : lock_state::not_held;
    }

    std::chrono::steady_clock::time_point valid_until() const {
        auto h = current();
        return h ? holds_->valid_until(*h) : std::chrono::steady_clock::time_point{};
    }

    /// The leadership, while it stands (held or uncertain).
    std::shared_ptr<hold> standing() const {
        auto h = current();
        if (!h) return nullptr;
        auto s = holds_->state_of(*h);
        return s == lock_state::held || s == lock_state::uncertain ? h : nullptr;
    }

    std::string node_path() const {
        auto h = standing();
        return h ? h->node_path : std::string();
    }

    void wait_lost(completion<> done, asio::cancellation_slot slot) {
        auto h = standing();
        if (!h) return done(make_error_code(errc::not_owner));
        holds_->wait_lost(h, std::move(done), slot);
    }

    subscription listen(bool leadership, std::function<void()> fn) {
        if (!fn) throw std::invalid_argument("zkr::leader_latch: the listener is empty");
        auto l = std::make_shared<listener>();
        l->leadership = leadership;
        l->fn = std::move(fn);
        std::uint64_t key;
        {
            std::lock_guard lock(mutex_);
            key = ++next_listener_;
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

    std::vector<election_participant> participants() const {
        auto port = port_.lock();
        if (!port) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::leader_latch: participants of \"" + path_ + "\"");
        auto nodes = read_queue(*port, path_, queue_kind::latch, "zkr::leader_latch: participants");
        std::vector<election_participant> out;
        out.reserve(nodes.size());
        for (auto& n : nodes) out.push_back(election_participant{std::move(n.data), n.node.name, out.empty()});
        return out;
    }

private:
    struct listener {
        bool leadership;
        std::function<void()> fn;
        std::atomic<bool> active{true};
    };

    std::shared_ptr<hold> current() const {
        std::lock_guard lock(mutex_);
        return leadership_;
    }

    void join() {
        auto port = port_.lock();
        if (!port) return;
        queue_options o;
        o.path = path_;
        o.kind = queue_kind::latch;
        o.data = id_;
        o.wait = true;
        o.mark_holding = false;
        std::uint64_t generation;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            generation = ++generation_;
        }
        runner::hooks hooks;
        std::weak_ptr<latch_impl> weak = weak_from_this();
        hooks.answer = [weak, generation](error_code reason, const step::done* d, const queue_fsm& m) {
            auto self = weak.lock();
            if (!self) return false;  // closed and gone: the runner deletes our node
            self->joined(generation, reason, d, m);
            return true;
        };
        hooks.ended = [cleanup = cleanup_, path = path_](const step::done& d, const queue_fsm&) { cleanup->sweep(path, d.sweep); };
        auto r = std::make_shared<runner>(port, cleanup_, path_, queue_fsm(std::move(o), &random_uuid), std::move(hooks));
        {
            std::lock_guard lock(mutex_);
            if (closed_ || generation != generation_) return;
            runner_ = r;
        }
        r->start(std::nullopt);
    }

    void joined(std::uint64_t generation, error_code reason, const step::done* d, const queue_fsm& m) {
        if (!d) return;  // given up: only close() gives a join up
        bool current;
        {
            std::lock_guard lock(mutex_);
            current = !closed_ && generation == generation_;
            if (current) runner_.reset();
        }
        if (!current) {
            if (d->acquired) cleanup_->guaranteed_delete(m.node_path());  // closed meanwhile
            return;
        }
        if (!d->acquired) return rejoin_later(d->error ? d->error : reason);
        failures_ = 0;
        auto h = std::make_shared<hold>(path_, m.node_path(), m.session(), m.czxid());
        std::weak_ptr<latch_impl> weak = weak_from_this();
        std::weak_ptr<hold> weak_hold = h;
        h->on_lost = [weak, weak_hold](loss_cause cause) {
            auto self = weak.lock();
            auto lost = weak_hold.lock();
            if (self && lost) self->leadership_lost(lost, cause);
        };
        std::shared_ptr<hold> previous;
        {
            std::lock_guard lock(mutex_);
            if (closed_) {
                cleanup_->guaranteed_delete(h->node_path);
                return;
            }
            previous = std::exchange(leadership_, h);
        }
        if (previous) holds_->release(previous);  // lost already: only its bookkeeping goes
        holds_->add(h);
        monitor_->monitor(h);
    }

    void leadership_lost(const std::shared_ptr<hold>& h, loss_cause cause) {
        {
            std::lock_guard lock(mutex_);
            if (closed_ || leadership_ != h) return;
        }
        log::write(log::level::info, "zkr::leader_latch \"" + path_ + "\": leadership lost (" +
                                         (cause == loss_cause::node_deleted ? "its node was deleted" : "its session ended") +
                                         "); queueing again");
        refresh();
        join();
    }

    void rejoin_later(error_code why) {
        if (why == errc::client_closed) return;
        int n = ++failures_;
        auto delay = std::chrono::milliseconds(std::min(5000, 100 << std::min(n, 6)));
        if (n == 1 || n % 10 == 0)
            log::write(log::level::warning, "zkr::leader_latch \"" + path_ + "\": could not join (" + why.message() +
                                                "); trying again in " + std::to_string(delay.count()) + " ms");
        asio::post(threads_->session, [weak = weak_from_this(), delay] {
            auto self = weak.lock();
            if (!self) return;
            self->retry_timer_.expires_after(delay);
            self->retry_timer_.async_wait([weak](error_code ec) {
                if (auto self = weak.lock(); self && !ec) self->join();
            });
        });
    }

    void cancel_await(std::uint64_t key) {
        std::map<std::uint64_t, completion<>> cancelled;
        {
            std::lock_guard lock(mutex_);
            if (auto node = await_waiters_.extract(key)) cancelled.insert(std::move(node));
        }
        for (auto& [k, w] : cancelled) w(make_error_code(errc::cancelled));
    }

    // Reads the leadership live and tells whoever waits or listens what changed (the monitor calls
    // it whenever that may have changed); returns what it read. Read, and the listeners' call
    // posted, under the mutex: calls on two threads (a session event, a join answered) must not
    // let the earlier reading be written, or told, last.
    lock_state refresh() {
        lock_state read;
        bool now, changed;
        std::map<std::uint64_t, completion<>> waiters;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return lock_state::not_held;
            read = leadership_ ? holds_->state_of(*leadership_) : lock_state::not_held;
            now = read == lock_state::held;
            changed = now != leading_;
            leading_ = now;
            if (now) waiters.swap(await_waiters_);
            if (changed) {
                notify_locked(now);
                observe_locked(now);
            }
        }
        if (changed || now) leading_changed_.notify_all();
        for (auto& [key, w] : waiters) w({});
        return read;
    }

    // Under the mutex: whether the current leadership is held now, read live.
    bool leading_now_locked() const { return leadership_ && holds_->state_of(*leadership_) == lock_state::held; }

    // Under the mutex (so the observer hears the changes in their order; its channel's mutex is a leaf).
    void observe_locked(bool leadership) {
        if (observer_) observer_->leadership({observe_id_, recipe_kind::leader_latch, path_}, leadership);
    }

    // Under the mutex: posts the listeners' calls to the strand (a post never runs them here), so
    // they run in the order of the readings that made them.
    void notify_locked(bool leadership) {
        std::vector<std::shared_ptr<listener>> calls;
        for (auto& [key, l] : listeners_) {
            if (l->leadership == leadership) calls.push_back(l);
        }
        if (calls.empty()) return;
        asio::post(strand_, [calls = std::move(calls), path = path_] {
            for (auto& l : calls) {
                if (!l->active) continue;
                try {
                    l->fn();
                } catch (const std::exception& e) {
                    log::write(log::level::error, "zkr::leader_latch \"" + path + "\": a listener threw: " + e.what());
                }
            }
        });
    }

    std::weak_ptr<session_port> port_;
    std::shared_ptr<runtime> threads_;  // our timers run on its session thread
    asio::any_io_executor executor_;
    asio::strand<asio::any_io_executor> strand_;
    std::shared_ptr<hold_registry> holds_;
    std::shared_ptr<cleanup_service> cleanup_;
    const std::string path_, id_;
    const close_mode on_close_;
    const std::shared_ptr<observer_channel> observer_;
    const std::uint64_t observe_id_;
    std::shared_ptr<hold_monitor> monitor_;

    mutable std::mutex mutex_;
    std::condition_variable leading_changed_;
    bool started_ = false, closed_ = false;
    std::uint64_t generation_ = 0;       // of the current join: answers of an earlier one are stale
    std::shared_ptr<runner> runner_;     // the join in progress
    std::shared_ptr<hold> leadership_;   // the current leadership, or the last one (lost)
    bool leading_ = false;               // what waiters and listeners were last told
    std::map<std::uint64_t, completion<>> await_waiters_;  // by key, for per-operation cancellation
    std::uint64_t next_waiter_ = 0, next_listener_ = 0;
    std::map<std::uint64_t, std::shared_ptr<listener>> listeners_;
    std::atomic<int> failures_{0};
    asio::steady_timer retry_timer_;  // session thread only
};

void start_await_leadership(const std::shared_ptr<latch_impl>& latch, latch_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    latch->await_async(completion<>(std::move(handler), latch->executor()), slot);
}

void start_latch_wait_lost(const std::shared_ptr<latch_impl>& latch, latch_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    latch->wait_lost(completion<>(std::move(handler), latch->executor()), slot);
}

asio::any_io_executor latch_executor(const latch_impl& latch) { return latch.executor(); }

}  // namespace zkr::detail

namespace zkr {

leader_latch::leader_latch(client& c, std::string path, std::string id, close_mode on_close) {
    detail::check_recipe_path(c, path, "zkr::leader_latch", "election path");
    detail::check_node_data(c, path, id, "zkr::leader_latch", "the participant id");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::leader_latch on a closed client");
    impl_ = std::make_shared<detail::latch_impl>(*port, std::move(path), std::move(id), on_close);
    impl_->attach(*port);
}

leader_latch::~leader_latch() { impl_->close(impl_->default_close_mode()); }

void leader_latch::start() { impl_->start(); }
void leader_latch::close() { impl_->close(impl_->default_close_mode()); }
void leader_latch::close(close_mode mode) { impl_->close(mode); }
bool leader_latch::wait_leadership(std::chrono::steady_clock::time_point deadline) { return impl_->wait_leadership(deadline); }
bool leader_latch::has_leadership() const { return impl_->state() == lock_state::held; }
lock_state leader_latch::state() const { return impl_->state(); }
std::chrono::steady_clock::time_point leader_latch::valid_until() const { return impl_->valid_until(); }

std::int64_t leader_latch::fencing_token() const {
    auto h = impl_->standing();
    if (!h) throw zkr::system_error(make_error_code(errc::not_owner), "zkr::leader_latch \"" + path() + "\": not leading");
    return h->czxid;
}

op::guard leader_latch::guard() const {
    auto h = impl_->standing();
    if (!h) throw zkr::system_error(make_error_code(errc::not_owner), "zkr::leader_latch \"" + path() + "\": not leading");
    return op::guard{h->node_path, "leadership of " + path()};
}

std::string leader_latch::node_path() const { return impl_->node_path(); }
subscription leader_latch::on_leadership(std::function<void()> fn) { return impl_->listen(true, std::move(fn)); }
subscription leader_latch::on_not_leader(std::function<void()> fn) { return impl_->listen(false, std::move(fn)); }
std::vector<election_participant> leader_latch::participants() const { return impl_->participants(); }

std::optional<election_participant> leader_latch::leader() const {
    auto all = impl_->participants();
    if (all.empty()) return std::nullopt;
    return std::move(all.front());
}

const std::string& leader_latch::path() const noexcept { return impl_->path(); }
const std::string& leader_latch::id() const noexcept { return impl_->id(); }

}  // namespace zkr
