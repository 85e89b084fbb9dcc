// The one driver of the recipes' sans-io state machines: it sends each step a machine asks for
// through the session port, feeds the replies back, and answers the caller once — with the
// machine's outcome, or with the reason it was given up (deadline, cancellation) at the latest —
// while a given-up machine's cleanup goes on in the background.
//
// Threads: a step's replies arrive on the thread that completes the request (often the C
// client's completion thread: a hand-off costs no thread hop) and the machine runs right there;
// it never blocks and never calls user code. The deadline fires on the session thread. The hooks
// run on either; they must not block (lock engines post user handlers to the client's executor).
//
// Ordering: our own nodes to delete go out before the step they come with, and before the caller
// hears of a give-up. A machine given up while it may own a node it cannot name yet (a create's
// reply is due) holds its path's gate in the cleanup service until it can: runners starting on
// that path wait for it, so they never find our old node still queued.
#pragma once

#include "cleanup.hpp"
#include "steps.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace zkr::detail {

/// Sends one step of a machine and hands its reply back (the non-template part of fsm_runner).
/// It keeps the watches the last `watch` or watched `list` step left, for `wait` and
/// `remove_watch`: events of any other watch (an earlier step's) are not passed on.
class step_io {
public:
    using reply_fn = std::function<void(any_reply)>;

    void send(session_port& port, const step::create_and_list& s, reply_fn done);
    void send(session_port& port, const step::create_parents& s, reply_fn done);
    void send(session_port& port, const step::multi_and_list& s, reply_fn done);
    void send(session_port& port, const step::list& s, reply_fn done);
    void send(session_port& port, const step::check_owner& s, reply_fn done);
    void send(session_port& port, const step::watch& s, reply_fn done);
    /// step::wait: the first of the watches to fire (a departure or an error ends both).
    /// `self` keeps this (its runner) alive while a watch waits; `done` is called only while
    /// it does, so it need not keep anything alive itself (a waiter's memory: issue 23).
    void wait(std::shared_ptr<step_io> self, reply_fn done);
    /// step::remove_watch: removes what is left of them (not the watch on our own node: it ends
    /// with that node).
    void remove(session_port& port, reply_fn done);
    /// The machine is done: the watch on our own node, if still armed, is left to end with the
    /// node (a hold watches that node on its own), and no longer reports to us.
    void release_own();

private:
    void fired(const watch_state* fired, error_code ec, const watch_event& ev);

    std::mutex mutex_;  // a leaf
    std::shared_ptr<watch_state> data_watch_, child_watch_;
    std::shared_ptr<watch_state> own_watch_;  // on our own node (step::watch::own)
    reply_fn wait_done_;   // the current wait's
};

template <class Machine>
class fsm_runner : public std::enable_shared_from_this<fsm_runner<Machine>> {
public:
    using done_type = typename Machine::done_type;
    using action = typename Machine::action;
    struct hooks {
        /// Called once: with the machine's outcome, or with the reason it was given up (then
        /// `outcome` is null). The machine is done when `outcome` is set. Returns whether the
        /// outcome was taken: false when its recipe is gone (a weak owner that expired, which can
        /// happen between a give-up that found the machine done and this call). The runner then
        /// deletes what the machine acquired: nobody else knows of it.
        std::function<bool(error_code reason, const done_type* outcome, const Machine& machine)> answer;
        /// Called when the machine ends, after answer(), also for a machine given up: for the
        /// background work its outcome asks for (a sweep).
        std::function<void(const done_type& outcome, const Machine& machine)> ended;
    };

    fsm_runner(std::shared_ptr<session_port> port, std::shared_ptr<cleanup_service> cleanup, std::string gate_path,
               Machine machine, hooks h)
        : port_(port),
          threads_(port->threads()),
          cleanup_(std::move(cleanup)),
          gate_path_(std::move(gate_path)),
          machine_(std::move(machine)),
          hooks_(std::move(h)) {}

    /// Starts the machine once the gate of its path is open; gives up at `deadline`.
    void start(std::optional<std::chrono::steady_clock::time_point> deadline) {
        if (deadline) {
            timer_ = std::make_shared<boost::asio::steady_timer>(threads_->session);
            boost::asio::post(threads_->session, [weak = this->weak_from_this(), timer = timer_, deadline = *deadline] {
                timer->expires_at(deadline);
                timer->async_wait([weak](error_code ec) {
                    if (auto self = weak.lock(); self && !ec) self->give_up(make_error_code(errc::timed_out));
                });
            });
        }
        cleanup_->when_open(gate_path_, [self = this->shared_from_this()] {
            self->feed([](Machine& m) { return m.start(); });
        });
    }

    /// Answers the caller now with `reason` (unless it was answered already) and cleans up: our
    /// node's delete is sent before the answer whenever we know the node.
    void give_up(error_code reason) {
        action a;
        {
            std::lock_guard lock(mutex_);
            if (machine_done_ || answered_) return;
            a = machine_.abandon(reason);
            if (a.template is<done_type>()) machine_done_ = true;
            else if (machine_.cleanup_pending()) gate_key_ = cleanup_->enter_gate(gate_path_);
        }
        run(std::move(a));
        answer(reason, nullptr);
    }

    /// Hands the machine an event of the recipe's own (a semaphore's maximum changed: a data-watch
    /// event while it waits), as if a watch of its step had fired.
    void inject(any_reply r) { on_reply(std::move(r)); }

private:
    // Hands one event to the machine and carries out what it says. Never called with the mutex
    // held: replies may come back on this very thread.
    template <class Event>
    void feed(Event&& event) {
        action a;
        std::optional<std::uint64_t> open_gate;
        {
            std::lock_guard lock(mutex_);
            if (machine_done_) return;
            a = event(machine_);
            if (a.template is<done_type>()) {
                machine_done_ = true;
                open_gate = std::exchange(gate_key_, std::nullopt);
            } else if (gate_key_ && !machine_.cleanup_pending()) {
                open_gate = std::exchange(gate_key_, std::nullopt);
            }
        }
        run(std::move(a));
        if (open_gate) cleanup_->leave_gate(gate_path_, *open_gate);
    }

    void on_reply(any_reply r) {
        auto port = port_.lock();
        std::int64_t session = port ? port->session_id() : 0;
        feed([&](Machine& m) { return m.on(r, session); });
    }

    void run(action a) {
        for (auto& path : a.deletes) cleanup_->guaranteed_delete(std::move(path));
        if (a.template is<step::none>()) return;
        if (a.template is<done_type>()) return finish(a.template as<done_type>());
        auto port = port_.lock();
        if (!port) {
            // The client is gone, and its session with every node of ours.
            {
                std::lock_guard lock(mutex_);
                machine_done_ = true;
            }
            answer(make_error_code(errc::client_closed), nullptr);
            return;
        }
        step_io::reply_fn reply = [self = this->shared_from_this()](any_reply r) { self->on_reply(std::move(r)); };
        std::visit(
            [&](const auto& s) {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, step::wait>) {
                    // The watches keep us alive (as io_); the answer needs no reference of its own.
                    io_.wait(std::shared_ptr<step_io>(this->shared_from_this(), &io_),
                             [raw = this](any_reply r) { raw->on_reply(std::move(r)); });
                }
                else if constexpr (std::is_same_v<S, step::remove_watch>) io_.remove(*port, std::move(reply));
                else if constexpr (std::is_same_v<S, step::none> || std::is_same_v<S, done_type>) {}
                else io_.send(*port, s, std::move(reply));
            },
            a.next);
    }

    void finish(const done_type& d) {
        if (timer_) boost::asio::post(threads_->session, [t = timer_] { t->cancel(); });
        io_.release_own();
        // Not taken: answered already (a machine never acquires once given up, so should that
        // ever be wrong), or its recipe went meanwhile. What it holds must not outlive its owner.
        if (!answer({}, &d) && d.acquired) {
            for (const auto& node : machine_.owned_nodes()) cleanup_->guaranteed_delete(node);
        }
        if (hooks_.ended) hooks_.ended(d, machine_);
    }

    // Whether the hook took it (false when answered already).
    bool answer(error_code reason, const done_type* outcome) {
        {
            std::lock_guard lock(mutex_);
            if (answered_) return false;
            answered_ = true;
        }
        return hooks_.answer(reason, outcome, machine_);
    }

    std::weak_ptr<session_port> port_;
    std::shared_ptr<runtime> threads_;  // keeps the io_context of our timer alive
    std::shared_ptr<cleanup_service> cleanup_;
    const std::string gate_path_;

    std::mutex mutex_;  // guards the machine and the flags below
    Machine machine_;
    bool machine_done_ = false;
    bool answered_ = false;
    std::optional<std::uint64_t> gate_key_;
    hooks hooks_;
    step_io io_;
    std::shared_ptr<boost::asio::steady_timer> timer_;  // armed and cancelled on the session thread
    live_counter<&live_objects::operations> counted_;
};

}  // namespace zkr::detail
