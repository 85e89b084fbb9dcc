// zkr::leader_selector on the recipe toolkit: a queue_fsm of mutex ("lock-") nodes whose data
// is the participant id (no holding marks: Curator reads the id), run by fsm_runner; each term's
// node is a hold, watched by a hold_monitor that stops the work as soon as the hold is no longer
// `held`; the cleanup service deletes what a term leaves.
//
// Threads: joins, answers and losses run where the toolkit runs them; blocking work runs on the
// selector's own thread ("zkr-selector"), coroutine work on a strand of the client's executor.
// A stop the toolkit decides (a loss, the lease) is requested on that strand, never on the
// session thread: the work's stop callbacks are user code. No stop is requested under mutex_,
// so a callback may call the selector.
// Lock order: selector_impl::mutex_ before the toolkit's leaf mutexes; nothing else under it.
#include "zkr/leader_selector.hpp"

#include "toolkit/cleanup.hpp"
#include "toolkit/fsm_runner.hpp"
#include "toolkit/hold.hpp"
#include "toolkit/hold_monitor.hpp"
#include "toolkit/queue_fsm.hpp"
#include "toolkit/queue_reader.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/log.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <pthread.h>

#include <stdexcept>
#include <thread>

namespace zkr::detail {
namespace asio = boost::asio;

class selector_impl : public std::enable_shared_from_this<selector_impl> {
public:
    using runner = fsm_runner<queue_fsm>;

    selector_impl(session_port& port, std::string path, std::string id, leader_selector::work_fn work,
                  leader_selector::async_work_fn async_work, leader_selector_options options)
        : port_(port.weak_port()),
          threads_(port.threads()),
          strand_(asio::make_strand(port.executor())),
          holds_(hold_registry::of(port)),
          cleanup_(cleanup_service::of(port)),
          path_(std::move(path)),
          id_(std::move(id)),
          work_(std::move(work)),
          async_work_(std::move(async_work)),
          options_(options),
          observer_(port.observer_events()),
          observe_id_(observer_ ? observer_->next_id() : 0),
          retry_timer_(threads_->session) {}

    ~selector_impl() {
        if (worker_.joinable()) {
            if (std::this_thread::get_id() == worker_.get_id()) worker_.detach();
            else worker_.join();
        }
    }

    void attach(session_port& port) {
        std::weak_ptr<selector_impl> weak = weak_from_this();
        monitor_ = std::make_shared<hold_monitor>(port, holds_, [weak] {
            auto self = weak.lock();
            return self ? self->refresh() : lock_state::not_held;
        });
        monitor_->attach(port);
    }

    const std::string& path() const noexcept { return path_; }
    const std::string& id() const noexcept { return id_; }

    void start() {
        {
            std::lock_guard lock(mutex_);
            if (started_) throw std::logic_error("zkr::leader_selector::start: \"" + path_ + "\" was started already");
            started_ = true;
            if (work_) {
                // Blocking work runs on a thread of ours, one term after the other.
                worker_guard_.emplace(worker_context_.get_executor());
                worker_ = std::thread([self = shared_from_this()] {
                    pthread_setname_np(pthread_self(), "zkr-selector");
                    self->worker_context_.run();
                });
            }
        }
        enqueue();
    }

    bool requeue() {
        {
            std::lock_guard lock(mutex_);
            if (closed_ || !started_ || queued_ || requeue_after_term_) return false;
            if (term_) {
                // Contends again once this term ends: terms never overlap.
                requeue_after_term_ = true;
                return true;
            }
        }
        return enqueue();
    }

    void interrupt() {
        std::shared_ptr<term> t;
        {
            std::lock_guard lock(mutex_);
            t = begin_stop_locked();
        }
        if (t) request_stop(*t);
    }

    void close() {
        std::shared_ptr<runner> r;
        std::shared_ptr<term> t;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            closed_ = true;
            ++generation_;
            r = std::exchange(runner_, nullptr);
            queued_ = false;
            t = begin_stop_locked();
            worker_guard_.reset();  // the worker ends once its term (if any) returns
        }
        if (t) request_stop(*t);
        if (r) r->give_up(make_error_code(errc::cancelled));
        asio::post(threads_->session, [self = shared_from_this()] { self->retry_timer_.cancel(); });
    }

    /// Waits for the worker thread to end (the running work to return), unless called on it.
    void join_worker() {
        if (worker_.joinable() && std::this_thread::get_id() != worker_.get_id()) worker_.join();
    }

    lock_state state() const {
        auto h = term_hold();
        if (!h) return lock_state::not_held;
        return holds_->state_of(*h);
    }

    std::shared_ptr<hold> standing() const {
        auto h = term_hold();
        if (!h) return nullptr;
        auto s = holds_->state_of(*h);
        return s == lock_state::held || s == lock_state::uncertain ? h : nullptr;
    }

    std::uint64_t terms() const {
        std::lock_guard lock(mutex_);
        return terms_;
    }

    std::vector<election_participant> participants() const {
        auto port = port_.lock();
        if (!port) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::leader_selector: participants of \"" + path_ + "\"");
        auto nodes = read_queue(*port, path_, queue_kind::exclusive, "zkr::leader_selector: participants");
        std::vector<election_participant> out;
        out.reserve(nodes.size());
        for (auto& n : nodes) out.push_back(election_participant{std::move(n.data), n.node.name, out.empty()});
        return out;
    }

private:
    struct term {
        std::shared_ptr<hold> h;
        std::stop_source stop;
        std::shared_ptr<asio::cancellation_signal> cancel;  // coroutine work: emitted on the strand
        bool stopping = false;
    };

    std::shared_ptr<hold> term_hold() const {
        std::lock_guard lock(mutex_);
        return term_ ? term_->h : nullptr;
    }

    bool enqueue() {
        auto port = port_.lock();
        if (!port) return false;
        std::uint64_t generation;
        {
            std::lock_guard lock(mutex_);
            if (closed_ || queued_ || term_) return false;
            queued_ = true;
            generation = ++generation_;
        }
        queue_options o;
        o.path = path_;
        o.kind = queue_kind::exclusive;
        o.data = id_;
        o.mark_holding = false;  // the node's data is the id Curator's participants read
        runner::hooks hooks;
        std::weak_ptr<selector_impl> weak = weak_from_this();
        hooks.answer = [weak, generation](error_code reason, const step::done* d, const queue_fsm& m) {
            auto self = weak.lock();
            if (!self) return false;  // closed and gone: the runner deletes our node
            self->acquired(generation, reason, d, m);
            return true;
        };
        hooks.ended = [cleanup = cleanup_, path = path_](const step::done& d, const queue_fsm&) { cleanup->sweep(path, d.sweep); };
        auto r = std::make_shared<runner>(port, cleanup_, path_, queue_fsm(std::move(o), &random_uuid), std::move(hooks));
        {
            std::lock_guard lock(mutex_);
            if (closed_ || generation != generation_) return false;
            runner_ = r;
        }
        r->start(std::nullopt);
        return true;
    }

    void acquired(std::uint64_t generation, error_code reason, const step::done* d, const queue_fsm& m) {
        if (!d) return;  // given up: only close() gives a join up
        {
            std::lock_guard lock(mutex_);
            if (closed_ || generation != generation_) {
                if (d->acquired) cleanup_->guaranteed_delete(m.node_path());
                return;
            }
            runner_.reset();
            queued_ = false;
        }
        if (!d->acquired) return retry_later(d->error ? d->error : reason);
        failures_ = 0;
        auto h = std::make_shared<hold>(path_, m.node_path(), m.session(), m.czxid());
        std::weak_ptr<selector_impl> weak = weak_from_this();
        h->on_lost = [weak](loss_cause) {
            if (auto self = weak.lock()) self->refresh();
        };
        auto t = std::make_shared<term>();
        t->h = h;
        if (!work_) t->cancel = std::make_shared<asio::cancellation_signal>();
        // Registered and monitored before the term is public: its end releases the hold, and a
        // loss from now on finds the term (refresh() below covers one before it was public).
        holds_->add(h);
        monitor_->monitor(h);
        bool closed;
        {
            std::lock_guard lock(mutex_);
            closed = closed_;
            if (!closed) {
                term_ = t;
                ++terms_;
                // Posted under the mutex: close() drops the worker's guard under it too, so the
                // worker, still running, takes this term before it may end.
                run_term_locked(t);
            }
        }
        if (closed) {
            monitor_->monitor(nullptr);
            bool lost = false;
            holds_->release(h, &lost);
            cleanup_->guaranteed_delete(h->node_path);
            return;
        }
        refresh();
    }

    // Under the mutex (only posts).
    void run_term_locked(const std::shared_ptr<term>& t) {
        observe_locked(true);
        auto self = shared_from_this();
        if (work_) {
            asio::post(worker_context_, [self, t] {
                try {
                    self->work_(t->stop.get_token());
                } catch (const std::exception& e) {
                    log::write(log::level::error, "zkr::leader_selector \"" + self->path_ + "\": the work threw: " + e.what());
                } catch (...) {
                    log::write(log::level::error, "zkr::leader_selector \"" + self->path_ + "\": the work threw");
                }
                self->term_ended(t);
            });
            return;
        }
        asio::post(strand_, [self, t] {
            asio::awaitable<void> coro;
            try {
                coro = self->async_work_();
            } catch (const std::exception& e) {
                log::write(log::level::error, "zkr::leader_selector \"" + self->path_ + "\": the work threw: " + e.what());
                return self->term_ended(t);
            }
            asio::co_spawn(self->strand_, std::move(coro),
                           asio::bind_cancellation_slot(t->cancel->slot(), [self, t](std::exception_ptr e) {
                               if (e) {
                                   try {
                                       std::rethrow_exception(e);
                                   } catch (const std::exception& ex) {
                                       log::write(log::level::error, "zkr::leader_selector \"" + self->path_ +
                                                                         "\": the work threw: " + ex.what());
                                   } catch (...) {
                                   }
                               }
                               self->term_ended(t);
                           }));
        });
    }

    // The monitor, or the hold's loss (the session thread, or wherever the registry learns of
    // it): a term whose leadership is not held any more must stop. The stop itself is requested
    // on the strand: it runs the work's stop callbacks, user code. Returns what it read.
    lock_state refresh() {
        std::shared_ptr<term> t;
        {
            std::lock_guard lock(mutex_);
            t = term_;
        }
        if (!t) return lock_state::not_held;
        auto read = holds_->state_of(*t->h);
        if (read == lock_state::held) return read;
        {
            std::lock_guard lock(mutex_);
            if (term_ != t || !(t = begin_stop_locked())) return read;
        }
        asio::post(strand_, [self = shared_from_this(), t] { self->request_stop(*t); });
        return read;
    }

    // Under the mutex (the observer hears the terms in their order; its channel's mutex is a leaf).
    void observe_locked(bool leadership) {
        if (observer_) observer_->leadership({observe_id_, recipe_kind::leader_selector, path_}, leadership);
    }

    // Under the mutex: marks the running term stopping; returns it unless there is none or it
    // was stopping already.
    // The observer hears the leadership end here, not when the work returns: the work may take
    // its time to stop (or outlive the client), the leadership is over.
    std::shared_ptr<term> begin_stop_locked() {
        if (!term_ || term_->stopping) return nullptr;
        term_->stopping = true;
        observe_locked(false);
        return term_;
    }

    // Not under the mutex, on a thread that may run user code: the stop token's callbacks run
    // here.
    void request_stop(term& t) {
        t.stop.request_stop();
        if (auto cancel = t.cancel) {
            asio::post(strand_, [cancel] { cancel->emit(asio::cancellation_type::terminal); });
        }
    }

    void term_ended(const std::shared_ptr<term>& t) {
        bool again;
        {
            std::lock_guard lock(mutex_);
            if (term_ != t) return;
            term_.reset();
            if (!t->stopping) observe_locked(false);  // the work returned on its own; else told at the stop
            again = !closed_ && (options_.auto_requeue || std::exchange(requeue_after_term_, false));
        }
        monitor_->monitor(nullptr);
        // The node goes; the next participant leads.
        bool lost = false;
        holds_->release(t->h, &lost);
        cleanup_->guaranteed_delete(t->h->node_path);
        if (again) enqueue();
    }

    void retry_later(error_code why) {
        if (why == errc::client_closed) return;
        int n = ++failures_;
        auto delay = std::chrono::milliseconds(std::min(5000, 100 << std::min(n, 6)));
        if (n == 1 || n % 10 == 0)
            log::write(log::level::warning, "zkr::leader_selector \"" + path_ + "\": could not queue (" + why.message() +
                                                "); trying again in " + std::to_string(delay.count()) + " ms");
        asio::post(threads_->session, [weak = weak_from_this(), delay] {
            auto self = weak.lock();
            if (!self) return;
            self->retry_timer_.expires_after(delay);
            self->retry_timer_.async_wait([weak](error_code ec) {
                if (auto self = weak.lock(); self && !ec) self->enqueue();
            });
        });
    }

    std::weak_ptr<session_port> port_;
    std::shared_ptr<runtime> threads_;
    asio::strand<asio::any_io_executor> strand_;
    std::shared_ptr<hold_registry> holds_;
    std::shared_ptr<cleanup_service> cleanup_;
    std::shared_ptr<hold_monitor> monitor_;
    const std::string path_, id_;
    const leader_selector::work_fn work_;
    const leader_selector::async_work_fn async_work_;
    const leader_selector_options options_;
    const std::shared_ptr<observer_channel> observer_;
    const std::uint64_t observe_id_;

    mutable std::mutex mutex_;
    bool started_ = false, closed_ = false, queued_ = false, requeue_after_term_ = false;
    std::uint64_t generation_ = 0, terms_ = 0;
    std::shared_ptr<runner> runner_;
    std::shared_ptr<term> term_;
    std::atomic<int> failures_{0};

    asio::io_context worker_context_;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> worker_guard_;
    std::thread worker_;
    asio::steady_timer retry_timer_;  // session thread only
};

}  // namespace zkr::detail

namespace zkr {

namespace {

std::shared_ptr<detail::selector_impl> make_selector(client& c, std::string path, std::string id,
                                                     leader_selector::work_fn work, leader_selector::async_work_fn async_work,
                                                     leader_selector_options options) {
    detail::check_recipe_path(c, path, "zkr::leader_selector", "election path");
    detail::check_node_data(c, path, id, "zkr::leader_selector", "the participant id");
    if (!work && !async_work) throw std::invalid_argument("zkr::leader_selector: the work is empty");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::leader_selector on a closed client");
    auto impl = std::make_shared<detail::selector_impl>(*port, std::move(path), std::move(id), std::move(work),
                                                        std::move(async_work), options);
    impl->attach(*port);
    return impl;
}

}  // namespace

leader_selector::leader_selector(client& c, std::string path, std::string id, work_fn work, leader_selector_options options)
    : impl_(make_selector(c, std::move(path), std::move(id), std::move(work), {}, options)) {}

leader_selector::leader_selector(client& c, std::string path, std::string id, async_work_fn work,
                                 leader_selector_options options)
    : impl_(make_selector(c, std::move(path), std::move(id), {}, std::move(work), options)) {}

leader_selector::~leader_selector() {
    impl_->close();
    impl_->join_worker();
}

void leader_selector::start() { impl_->start(); }
bool leader_selector::requeue() { return impl_->requeue(); }
void leader_selector::interrupt_leadership() { impl_->interrupt(); }
void leader_selector::close() { impl_->close(); }
bool leader_selector::has_leadership() const { return impl_->state() == lock_state::held; }
lock_state leader_selector::state() const { return impl_->state(); }
std::uint64_t leader_selector::terms() const { return impl_->terms(); }

std::int64_t leader_selector::fencing_token() const {
    auto h = impl_->standing();
    if (!h) throw zkr::system_error(make_error_code(errc::not_owner), "zkr::leader_selector \"" + path() + "\": not leading");
    return h->czxid;
}

op::guard leader_selector::guard() const {
    auto h = impl_->standing();
    if (!h) throw zkr::system_error(make_error_code(errc::not_owner), "zkr::leader_selector \"" + path() + "\": not leading");
    return op::guard{h->node_path, "leadership of " + path()};
}

std::vector<election_participant> leader_selector::participants() const { return impl_->participants(); }

std::optional<election_participant> leader_selector::leader() const {
    auto all = impl_->participants();
    if (all.empty()) return std::nullopt;
    return std::move(all.front());
}

const std::string& leader_selector::path() const noexcept { return impl_->path(); }
const std::string& leader_selector::id() const noexcept { return impl_->id(); }

}  // namespace zkr
