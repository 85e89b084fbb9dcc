// zkr::double_barrier: the driver of double_barrier_fsm (the algorithm and the layout are there).
// One call (enter or leave) at a time per member: the blocking calls and the async ones run the
// same machine, the blocking ones waiting for its answer.
//
// Threads: the machine runs on whichever thread answers its last request (often the C client's
// completion thread) and only sends the next one; the deadline and the bound on a give-up's
// delete fire on the session thread. The answer goes to a blocked caller's slot, or is posted to
// the async handler's executor: no user code runs here.
#include "zkr/double_barrier.hpp"

#include "completion.hpp"
#include "double_barrier_fsm.hpp"
#include "runtime.hpp"
#include "session_port.hpp"
#include "toolkit/blocking.hpp"
#include "toolkit/cleanup.hpp"
#include "toolkit/observed_operation.hpp"
#include "toolkit/recipe_path.hpp"
#include "watch_registry.hpp"
#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/system_executor.hpp>

#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

// What outlives the object while a call of its runs: the member's identity and whether it is in.
struct barrier_member {
    std::weak_ptr<session_port> port;
    asio::any_io_executor executor;
    std::string path, name;
    int member_count = 0;
    bool reusable = false;

    std::mutex mutex;  // a leaf
    std::string node;   // this member's node; reusable: in the round last entered (empty before)
    std::string round;  // reusable: the round last entered, for the leave
    bool entered = false;
    bool busy = false;      // a call runs
    bool orphaned = false;  // the object is gone: a call that enters deletes its node at once

    void delete_node() {
        std::string ours;
        {
            std::lock_guard lock(mutex);
            ours = node;
        }
        if (ours.empty()) return;
        if (auto p = port.lock(); p && !p->closed()) {
            try {
                cleanup_service::of(*p)->guaranteed_delete(ours);
            } catch (const zkr::system_error&) {
                // closed meanwhile: the session, and our ephemeral node with it, is gone
            }
        }
    }
};

namespace {

barrier_reply barrier_error_reply(error_code ec) {
    barrier_reply r;
    r.error = ec;
    return r;
}

// The reusable layout's transactions (double_barrier_fsm.hpp says what each checks).
std::vector<multi_op> transaction(const barrier_step::join& s) {
    return {op::check{s.path, s.version}, op::create{s.node, "", create_mode::ephemeral}};
}
std::vector<multi_op> transaction(const barrier_step::close_round& s) {
    std::vector<multi_op> ops;
    for (const auto& m : s.members) ops.push_back(op::check{m, any_version});
    ops.push_back(op::create{s.ready, "", create_mode::persistent});
    ops.push_back(op::set_data{s.path, s.data, s.version});
    return ops;
}

class barrier_call : public std::enable_shared_from_this<barrier_call> {
public:
    using answer_fn = std::function<void(error_code, const std::string& what, bool passed)>;

    // `round`: the reusable mode's round a leave is in.
    barrier_call(std::shared_ptr<barrier_member> m, bool leaving, bool once, std::string round, answer_fn answer,
                 observed_operation observed)
        : member_(std::move(m)),
          machine_(member_->path, member_->name, member_->member_count, leaving, once, member_->reusable, std::move(round)),
          leaving_(leaving),
          answer_(std::move(answer)),
          observed_(std::move(observed)) {}

    void start(std::optional<std::chrono::steady_clock::time_point> deadline) {
        auto port = member_->port.lock();
        if (!port || port->closed()) return finish(barrier_step::done{false, make_error_code(errc::client_closed),
                                                                       "zkr::double_barrier " + quoted_path(member_->path), {}, {}});
        threads_ = port->threads();
        double_barrier_fsm::request first;
        {
            std::lock_guard lock(mutex_);
            first = machine_.start();
        }
        // Armed once the machine has started (a give-up before it would be one it cannot place).
        if (deadline) {
            auto timer = arm(*deadline, [](barrier_call& self) { self.give_up(make_error_code(errc::timed_out)); });
            std::lock_guard lock(mutex_);
            deadline_timer_ = std::move(timer);
        }
        run(std::move(first));
    }

    void give_up(error_code reason) {
        std::optional<double_barrier_fsm::request> next;
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            next = machine_.abandon(reason);
            if (!next) return;  // not where it may give up: the reply due decides (abandon())
            ++seq_;             // the reply still due is of no use any more
        }
        run(std::move(*next));
    }

private:
    using timer_ptr = std::shared_ptr<asio::steady_timer>;

    // A timer on the session thread that calls `fn` at `when`, unless this call is gone first.
    template <class Fn>
    timer_ptr arm(std::chrono::steady_clock::time_point when, Fn fn) {
        auto timer = std::make_shared<asio::steady_timer>(threads_->session);
        asio::post(threads_->session, [weak = weak_from_this(), timer, when, fn] {
            timer->expires_at(when);
            timer->async_wait([weak, fn](error_code ec) {
                if (auto self = weak.lock(); self && !ec) fn(*self);
            });
        });
        return timer;
    }
    void disarm(const timer_ptr& t) {
        if (t && threads_) asio::post(threads_->session, [t] { t->cancel(); });
    }

    std::shared_ptr<watch_state> take_ready_watch() {
        std::lock_guard lock(mutex_);
        return std::exchange(ready_watch_, nullptr);
    }
    // Keeps the ready watch (watch_ready) for the rest of the call, if that read is still the
    // machine's; drops it else.
    void keep_ready_watch(std::uint64_t seq, const std::shared_ptr<watch_state>& ws) {
        {
            std::lock_guard lock(mutex_);
            if (!finished_ && seq == seq_) {
                ready_watch_ = ws;
                return;
            }
        }
        drop(ws);
    }

    // Takes the watch the last watched read left (to wait on, or to drop).
    std::shared_ptr<watch_state> take_watch() {
        std::lock_guard lock(mutex_);
        return std::exchange(watch_, nullptr);
    }
    void drop(const std::shared_ptr<watch_state>& ws) {
        if (!ws) return;
        ws->clear_inline();
        if (auto port = member_->port.lock()) port->remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
    }

    // A reply is the machine's only if it answers the last request sent (and only the first
    // such: a wait has two watches that may both fire).
    void on_reply(std::uint64_t seq, barrier_reply r) {
        // Read as the reply came: a drop before it is counted (session_port::connection_drops).
        if (auto port = member_->port.lock()) r.drops = port->connection_drops();
        double_barrier_fsm::request next;
        {
            std::lock_guard lock(mutex_);
            if (finished_ || seq != seq_) return;
            ++seq_;
            if (ready_watch_) {
                std::lock_guard wl(ready_watch_->mutex);
                if (ready_watch_->done) {
                    r.ready_created = !ready_watch_->error && ready_watch_->fired == event_type::created;
                    r.ready_watch_ended = !r.ready_created;
                }
            }
            next = machine_.on(r);
        }
        run(std::move(next));
    }

    // Keeps the watch a watched read left, if that read is still the machine's; drops it else.
    void keep_watch(std::uint64_t seq, const std::shared_ptr<watch_state>& ws) {
        {
            std::lock_guard lock(mutex_);
            if (!finished_ && seq == seq_) {
                watch_ = ws;
                return;
            }
        }
        drop(ws);
    }

    void run(double_barrier_fsm::request next) {
        if (auto* d = std::get_if<barrier_step::done>(&next)) return finish(std::move(*d));
        // Any step but a wait ends the watch of the last watched read.
        if (!std::holds_alternative<barrier_step::wait>(next)) drop(take_watch());
        if (std::holds_alternative<barrier_step::watch_ready>(next)) drop(take_ready_watch());
        auto port = member_->port.lock();
        std::uint64_t seq;
        {
            std::lock_guard lock(mutex_);
            seq = ++seq_;
        }
        auto self = shared_from_this();
        if (!port || port->closed()) {
            if (std::holds_alternative<barrier_step::remove_own>(next)) return on_reply(seq, {});  // gone with the session
            return on_reply(seq, barrier_error_reply(make_error_code(errc::client_closed)));
        }
        std::visit(
            [&](const auto& s) {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, barrier_step::make_parents>) {
                    port->create_parents(s.path, create_mode::container, completion<>(completion<>::inline_fn([self, seq](error_code ec) {
                                             self->on_reply(seq, barrier_error_reply(ec));
                                         })));
                } else if constexpr (std::is_same_v<S, barrier_step::create>) {
                    port->create(s.path, "", s.mode, completion<create_result>(completion<create_result>::inline_fn(
                                                         [self, seq](error_code ec, create_result) { self->on_reply(seq, barrier_error_reply(ec)); })));
                } else if constexpr (std::is_same_v<S, barrier_step::list>) {
                    port->get_children(s.path, s.watch,
                                       completion<children_result>(completion<children_result>::inline_fn(
                                           [self, seq](error_code ec, children_result r) {
                                               if (auto ws = watch_access::state(r.watch)) self->keep_watch(seq, ws);
                                               auto reply = barrier_error_reply(ec);
                                               reply.children = std::move(r.children);
                                               reply.cversion = r.stat.cversion;
                                               self->on_reply(seq, std::move(reply));
                                           })));
                } else if constexpr (std::is_same_v<S, barrier_step::watch_node>) {
                    port->exists(s.path, true, completion<exists_result>(completion<exists_result>::inline_fn(
                                                   [self, seq](error_code ec, exists_result r) {
                                                       if (auto ws = watch_access::state(r.watch)) self->keep_watch(seq, ws);
                                                       auto reply = barrier_error_reply(ec);
                                                       reply.exists = r.exists;
                                                       self->on_reply(seq, std::move(reply));
                                                   })));
                } else if constexpr (std::is_same_v<S, barrier_step::watch_ready>) {
                    port->exists(s.path, true, completion<exists_result>(completion<exists_result>::inline_fn(
                                                   [self, seq](error_code ec, exists_result r) {
                                                       if (auto ws = watch_access::state(r.watch)) self->keep_ready_watch(seq, ws);
                                                       auto reply = barrier_error_reply(ec);
                                                       reply.exists = r.exists;
                                                       self->on_reply(seq, std::move(reply));
                                                   })));
                } else if constexpr (std::is_same_v<S, barrier_step::remove_ready>) {
                    port->remove(s.path, any_version, completion<>(completion<>::inline_fn([self, seq](error_code ec) {
                                     self->on_reply(seq, barrier_error_reply(ec));
                                 })));
                } else if constexpr (std::is_same_v<S, barrier_step::read_round>) {
                    port->exists(s.path, false, completion<exists_result>(completion<exists_result>::inline_fn(
                                                    [self, seq](error_code ec, exists_result r) {
                                                        auto reply = barrier_error_reply(ec);
                                                        reply.exists = r.exists;
                                                        reply.version = r.stat.version;
                                                        self->on_reply(seq, std::move(reply));
                                                    })));
                } else if constexpr (std::is_same_v<S, barrier_step::remove_round>) {
                    port->remove(s.path, any_version, completion<>(completion<>::inline_fn([self, seq](error_code ec) {
                                     self->on_reply(seq, barrier_error_reply(ec));
                                 })));
                } else if constexpr (std::is_same_v<S, barrier_step::join> || std::is_same_v<S, barrier_step::close_round>) {
                    port->multi(transaction(s), completion<std::vector<multi_op_result>>(
                                                    completion<std::vector<multi_op_result>>::inline_fn(
                                                        [self, seq](error_code ec, std::vector<multi_op_result>) {
                                                            self->on_reply(seq, barrier_error_reply(ec));
                                                        })));
                } else if constexpr (std::is_same_v<S, barrier_step::wait>) {
                    std::shared_ptr<watch_state> ws, ready;
                    {
                        std::lock_guard lock(mutex_);
                        ws = watch_;
                        ready = ready_watch_;
                    }
                    if (!ws) return on_reply(seq, barrier_error_reply(make_error_code(errc::too_many_watches)));
                    if (ready) {
                        // "ready" made wakes the wait too (the machine reads why: ready_created).
                        ready->wait_inline([self, seq](error_code wec, const watch_event&) {
                            if (wec == errc::watch_removed) return;  // dropped by us
                            auto reply = barrier_error_reply(wec == errc::client_closed ? wec : error_code{});
                            reply.fired = !wec;
                            self->on_reply(seq, std::move(reply));
                        });
                    }
                    ws->wait_inline([self, seq](error_code wec, const watch_event&) {
                        if (wec == errc::watch_removed) return;  // dropped by us
                        auto reply = barrier_error_reply(wec == errc::client_closed ? wec : error_code{});
                        reply.fired = !wec;
                        self->on_reply(seq, std::move(reply));
                    });
                } else if constexpr (std::is_same_v<S, barrier_step::remove_own>) {
                    // Waited for, at most a session timeout: with the server unreachable that
                    // long, the node goes with its session.
                    auto bound = arm(std::chrono::steady_clock::now() + port->session_timeout(),
                                     [seq](barrier_call& c) { c.on_reply(seq, {}); });
                    {
                        std::lock_guard lock(mutex_);
                        remove_bound_ = std::move(bound);
                    }
                    try {
                        cleanup_service::of(*port)->guaranteed_delete(
                            s.path, completion<>(completion<>::inline_fn([self, seq](error_code) { self->on_reply(seq, {}); })));
                    } catch (const zkr::system_error&) {
                        on_reply(seq, {});  // the client closed: its session, and our node, are gone
                    }
                }
            },
            next);
    }

    void finish(barrier_step::done d) {
        timer_ptr deadline, bound;
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            finished_ = true;
            deadline = std::move(deadline_timer_);
            bound = std::move(remove_bound_);
        }
        drop(take_watch());
        drop(take_ready_watch());
        disarm(deadline);
        disarm(bound);
        if (!d.delete_after.empty()) {
            // Everyone has left: "ready" goes, so that the next round on this path waits for its
            // own members. A persistent node: resent on any session until it is gone (left, it
            // would let the next round through at once).
            if (auto p = member_->port.lock(); p && !p->closed()) {
                try {
                    cleanup_service::of(*p)->delete_persistent(d.delete_after);
                } catch (const zkr::system_error&) {
                }
            }
        }
        bool orphan_in = false;
        {
            std::lock_guard lock(member_->mutex);
            member_->busy = false;
            member_->entered = !leaving_ && d.passed && !d.error;
            if (member_->entered && member_->reusable) {
                member_->round = d.round;
                member_->node = join_path(d.round, member_->name);
            }
            orphan_in = member_->entered && member_->orphaned;
        }
        if (orphan_in) member_->delete_node();  // its object went while it entered: nobody would leave
        // Not passed without an error: its deadline passed first (a deadline already past too).
        observed_.finish(d.error ? d.error : d.passed ? error_code{} : make_error_code(errc::timed_out));
        answer_(d.error, d.what, d.passed);
    }

    std::shared_ptr<barrier_member> member_;
    std::shared_ptr<runtime> threads_;  // keeps the timers' io_context alive
    std::mutex mutex_;                  // the machine, seq_, watch_, finished_; never held while sending
    double_barrier_fsm machine_;
    const bool leaving_;
    answer_fn answer_;
    observed_operation observed_;  // told once, in finish()
    std::uint64_t seq_ = 0;
    std::shared_ptr<watch_state> watch_;
    std::shared_ptr<watch_state> ready_watch_;  // Curator's layout, enter: kept for the whole call
    bool finished_ = false;
    timer_ptr deadline_timer_, remove_bound_;  // under mutex_
};

// Claims the member for one call: an error when one runs, or when it is (not) in already.
error_code claim(barrier_member& m, bool leaving, std::string& what) {
    std::lock_guard lock(m.mutex);
    std::string who = m.node.empty() ? "member " + m.name + " of " + quoted_path(m.path) : quoted_path(m.node);
    if (m.busy) {
        what = "a call of this member is still running";
        return make_error_code(errc::bad_arguments);
    }
    if (!leaving && m.entered) {
        what = who + " has entered already";
        return make_error_code(errc::bad_arguments);
    }
    if (leaving && !m.entered) {
        what = who + " has not entered";
        return make_error_code(errc::bad_arguments);
    }
    m.busy = true;
    return {};
}

// Starts a call; `deadline` time_point::max() waits for ever.
void start_call(const std::shared_ptr<barrier_member>& m, bool leaving, std::chrono::steady_clock::time_point deadline,
                barrier_call::answer_fn answer, asio::cancellation_slot slot = {}) {
    std::optional<std::chrono::steady_clock::time_point> bound;
    bool once = false;
    if (deadline != std::chrono::steady_clock::time_point::max()) {
        const auto now = std::chrono::steady_clock::now();
        bound = deadline;
        if (deadline <= now && !leaving) {
            // Already past: make the node and list once, bounded as a try is.
            auto port = m->port.lock();
            once = true;
            bound = now + (port ? port->session_timeout() : std::chrono::milliseconds(0));
        }
    }
    std::string round;
    {
        std::lock_guard lock(m->mutex);
        round = m->round;
    }
    observed_operation observed;
    if (auto port = m->port.lock())
        observed = observed_operation(*port, recipe_kind::double_barrier, m->path, leaving ? recipe_operation::leave : recipe_operation::enter);
    auto call = std::make_shared<barrier_call>(m, leaving, once, std::move(round), std::move(answer), std::move(observed));
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<barrier_call>(call)](asio::cancellation_type) {
            if (auto c = weak.lock()) c->give_up(make_error_code(errc::cancelled));
        });
    }
    call->start(bound);
}

}  // namespace

void start_barrier_call(const std::shared_ptr<barrier_member>& m, bool leaving, std::chrono::steady_clock::time_point deadline,
                        barrier_handler handler) {
    std::string what;
    if (auto ec = claim(*m, leaving, what)) return post_handler(std::move(handler), m->executor, ec, false);
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto done = std::make_shared<completion<bool>>(std::move(handler), m->executor);
    start_call(m, leaving, deadline, [done](error_code ec, const std::string&, bool passed) { (*done)(ec, passed); }, slot);
}

asio::any_io_executor barrier_executor(const std::shared_ptr<barrier_member>& m) { return m->executor; }

}  // namespace zkr::detail

namespace zkr {

double_barrier::double_barrier(client& c, std::string path, int member_count)
    : double_barrier(c, std::move(path), member_count, double_barrier_options{}) {}

double_barrier::double_barrier(client& c, std::string path, int member_count, double_barrier_options options) {
    detail::check_recipe_path(c, path, "zkr::double_barrier", "barrier path");
    if (member_count < 1)
        throw std::invalid_argument("zkr::double_barrier: member_count must be at least 1 (it is " +
                                    std::to_string(member_count) + ")");
    auto p = detail::port_of(c);
    if (p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::double_barrier on a closed client");
    member_ = std::make_shared<detail::barrier_member>();
    member_->port = p->weak_port();
    member_->executor = p->executor();
    member_->path = std::move(path);
    member_->name = detail::blocking::member_uuid();
    member_->member_count = member_count;
    member_->reusable = options.reusable;
    if (!options.reusable) member_->node = join_path(member_->path, member_->name);
}

double_barrier::~double_barrier() {
    bool in = false;
    {
        std::lock_guard lock(member_->mutex);
        member_->orphaned = true;
        in = member_->entered && !member_->busy;  // a call still running deletes it when it ends
    }
    if (in) member_->delete_node();
}

bool double_barrier::call(bool leaving, std::chrono::steady_clock::time_point deadline) {
    std::lock_guard serial(mutex_);
    const char* name = leaving ? "zkr::double_barrier::leave: " : "zkr::double_barrier::enter: ";
    std::string what;
    if (auto ec = detail::claim(*member_, leaving, what)) throw std::logic_error(name + what);
    detail::sync_slot<std::string, bool> slot;
    detail::start_call(member_, leaving, deadline,
                       [&slot](error_code ec, const std::string& w, bool passed) { slot.set(ec, w, passed); });
    error_code ec;
    auto [failure, passed] = slot.wait(ec);
    if (ec) throw zkr::system_error(ec, failure.empty() ? name + quoted_path(member_->path) : failure);
    return passed;
}

bool double_barrier::enter_until(std::chrono::steady_clock::time_point deadline) { return call(false, deadline); }
bool double_barrier::leave_until(std::chrono::steady_clock::time_point deadline) { return call(true, deadline); }
const std::string& double_barrier::path() const noexcept { return member_->path; }
const std::string& double_barrier::node_path() const noexcept { return member_->node; }
int double_barrier::member_count() const noexcept { return member_->member_count; }

}  // namespace zkr
