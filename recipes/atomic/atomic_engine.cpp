#include "atomic_engine.hpp"

#include "completion.hpp"
#include "lock/lock_engine.hpp"
#include "toolkit/blocking.hpp"
#include "toolkit/cleanup.hpp"
#include "toolkit/observed_operation.hpp"
#include "toolkit/owner_data.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/detail/lock_ops.hpp"
#include "zkr/path.hpp"

#include <deque>
#include <map>
#include <stdexcept>

namespace zkr::detail {

/// The operations of one counter path among the objects of one client, run one at a time.
struct counter_queue {
    void submit(std::function<void()> start) {
        {
            std::lock_guard lock(mutex);
            if (busy) {
                waiting.push_back(std::move(start));
                return;
            }
            busy = true;
        }
        start();
    }
    void next() {
        // A trampoline: an operation that ends inline (a closed client answers at once) calls
        // next() from inside start(); that call only asks this loop to go on, so a long queue
        // drains in a loop instead of one stack frame per operation.
        thread_local counter_queue* draining = nullptr;
        thread_local bool again = false;
        if (draining == this) {
            again = true;
            return;
        }
        auto* outer = std::exchange(draining, this);
        auto outer_again = std::exchange(again, false);
        do {
            again = false;
            std::function<void()> start;
            {
                std::lock_guard lock(mutex);
                if (waiting.empty()) {
                    busy = false;
                    break;
                }
                start = std::move(waiting.front());
                waiting.pop_front();
            }
            start();
        } while (again);
        draining = outer;
        again = outer_again;
    }
    std::mutex mutex;  // a leaf
    bool busy = false;
    std::deque<std::function<void()>> waiting;
};

namespace {
counter_reply reply_error(error_code ec) {
    counter_reply r;
    r.error = ec;
    return r;
}

// The per-client table of counters' queues, one per path in use.
struct counter_queues {
    explicit counter_queues(session_port&) {}
    void attach() {}
    std::shared_ptr<counter_queue> of(const std::string& path) {
        std::lock_guard lock(mutex);
        auto& weak = by_path[path];
        auto held = weak.lock();
        if (!held) weak = held = std::make_shared<counter_queue>();
        for (auto it = by_path.begin(); it != by_path.end();) it = it->second.expired() ? by_path.erase(it) : std::next(it);
        return held;
    }
    std::mutex mutex;
    std::map<std::string, std::weak_ptr<counter_queue>> by_path;
};
}  // namespace

// One operation: its machine, the requests it asks for, and the promoted lock while held.
struct atomic_engine::operation : std::enable_shared_from_this<operation> {
    operation(std::shared_ptr<atomic_engine> e, counter_change c, answer_fn a, observed_operation o)
        : engine(std::move(e)), change(c), answer(std::move(a)), observed(std::move(o)) {}

    void start() {
        auto port = engine->port_.lock();
        if (!port || port->closed())
            return engine->finish(shared_from_this(), make_error_code(errc::client_closed),
                                  std::string(engine->who_) + " " + quoted_path(engine->path_), {});
        atomic_fsm::action a;
        {
            std::lock_guard lock(mutex);
            counter_memory memory;
            {
                std::lock_guard engine_lock(engine->mutex_);
                memory = engine->memory_;
            }
            const auto& promote = engine->options_.promote_to_lock;
            machine.emplace(engine->path_, engine->width_, change, engine->options_.max_attempts, promote ? promote->max_attempts : 0,
                            std::move(memory), &blocking::member_uuid, engine->who_);
            a = machine->start(session_of(*port));
        }
        run(std::move(a));
    }

    counter_session session_of(session_port& port) const {
        return {port.session_id(), port.health(machine->memory().writer_session) == session_health::live};
    }

    void feed(counter_reply r) {
        atomic_fsm::action a;
        {
            std::lock_guard lock(mutex);
            auto port = engine->port_.lock();
            a = machine->on(r, port ? session_of(*port) : counter_session{});
        }
        run(std::move(a));
    }

    template <class... Values>
    completion<Values...> reply_to() {
        return completion<Values...>(typename completion<Values...>::inline_fn(
            [self = shared_from_this()](error_code ec, Values... v) {
                auto r = reply_error(ec);
                if constexpr (sizeof...(Values) == 1) r.value = std::move(v...);
                self->feed(std::move(r));
            }));
    }

    void run(atomic_fsm::action a) {
        auto port = engine->port_.lock();
        if (port && !port->closed()) {
            for (auto& path : a.deletes) {
                try {
                    cleanup_service::of(*port)->guaranteed_delete(std::move(path));
                } catch (const zkr::system_error&) {
                    // closed meanwhile: the record went with the session
                }
            }
        }
        if (auto* d = std::get_if<counter_step::done>(&a.next)) return engine->finish(shared_from_this(), d->error, d->what, d->result);
        if (!port) return feed(reply_error(make_error_code(errc::client_closed)));
        std::visit(
            [&](const auto& s) {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, counter_step::read>) port->get_data(s.path, false, reply_to<data_result>());
                else if constexpr (std::is_same_v<S, counter_step::make_parents>)
                    port->create_parents(s.path, create_mode::container, reply_to<>());
                else if constexpr (std::is_same_v<S, counter_step::create>) port->create(s.path, s.data, s.mode, reply_to<create_result>());
                else if constexpr (std::is_same_v<S, counter_step::exists>) port->exists(s.path, false, reply_to<exists_result>());
                else if constexpr (std::is_same_v<S, counter_step::write>) port->multi(s.ops, reply_to<std::vector<multi_op_result>>());
                else if constexpr (std::is_same_v<S, counter_step::promote>) promote(*port);
            },
            a.next);
    }

    // Curator's PromotedToLock, on the mutex layout: an async owner of its own (the operation,
    // not the calling thread, holds it), not had in time → not taken.
    void promote(session_port& port) {
        const auto& p = *engine->options_.promote_to_lock;
        queue_options o;
        o.path = p.lock_path;
        o.data = current_owner_data(true);
        std::optional<std::chrono::steady_clock::time_point> deadline = std::chrono::steady_clock::now() + p.lock_timeout;
        if (p.lock_timeout.count() == 0) {  // a try, bounded as try_lock's is
            o.wait = false;
            deadline = std::chrono::steady_clock::now() + port.session_timeout();
        }
        try {
            locks = lock_engine::of(port);
        } catch (const zkr::system_error& e) {
            return feed(reply_error(e.code()));
        }
        locks->acquire(std::move(o), new_async_owner(), true, deadline,
                       [self = shared_from_this()](error_code ec, std::shared_ptr<lock_claim> claim) {
                           counter_reply r;
                           if (claim) {
                               std::lock_guard lock(self->mutex);
                               self->held = std::move(claim);
                               r.lock_taken = true;
                           } else if (ec && ec != errc::timed_out && !is_connection_trouble(ec)) {
                               r.error = ec;  // as try_lock_for: connection trouble is "not had"
                           }
                           self->feed(std::move(r));
                       },
                       recipe_kind::mutex);
    }

    std::shared_ptr<atomic_engine> engine;
    counter_change change;
    answer_fn answer;
    observed_operation observed;
    std::mutex mutex;  // the machine and `held`; never held while sending
    std::optional<atomic_fsm> machine;
    std::shared_ptr<lock_engine> locks;
    std::shared_ptr<lock_claim> held;  // the promoted lock, once taken
};

atomic_engine::atomic_engine(client& c, std::string path, int width, atomic_options options, const char* who)
    : path_(std::move(path)), width_(width), options_(options), who_(who) {
    check_recipe_path(c, path_, who, "counter path");
    if (options.max_attempts < 1)
        throw std::invalid_argument(std::string(who) + ": atomic_options::max_attempts must be at least 1 (it is " +
                                    std::to_string(options.max_attempts) + ")");
    if (const auto& promote = options.promote_to_lock) {
        const std::string& lock = promote->lock_path;
        check_recipe_path(c, lock, who, "promoted_lock::lock_path");
        if (lock == path_ || (lock.size() > path_.size() && lock.compare(0, path_.size(), path_) == 0 && lock[path_.size()] == '/'))
            throw std::invalid_argument(std::string(who) + ": promoted_lock::lock_path " + quoted_path(lock) +
                                        " is the counter's path or under it (its nodes would be the counter's children)");
        if (promote->lock_timeout.count() < 0)
            throw std::invalid_argument(std::string(who) + ": promoted_lock::lock_timeout must not be negative (it is " +
                                        std::to_string(promote->lock_timeout.count()) + " ms)");
        if (promote->max_attempts < 1)
            throw std::invalid_argument(std::string(who) + ": promoted_lock::max_attempts must be at least 1 (it is " +
                                        std::to_string(promote->max_attempts) + ")");
    }
    auto p = port_of(c);
    if (p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), std::string(who) + " on a closed client");
    port_ = p->weak_port();
    executor_ = p->executor();
    queue_ = per_client<counter_queues>(*p)->of(path_);
}

atomic_engine::~atomic_engine() {
    // No operation runs (each keeps us alive): the record is ours alone.
    if (memory_.writer.empty()) return;
    if (auto p = port_.lock(); p && !p->closed()) {
        try {
            cleanup_service::of(*p)->guaranteed_delete(memory_.writer);
        } catch (const zkr::system_error&) {
            // closed meanwhile: the record went with the session
        }
    }
}

std::int64_t atomic_engine::wrap(std::int64_t v) const noexcept {
    return width_ == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v))) : v;
}

void atomic_engine::run(counter_change change, answer_fn answer) {
    // Observed from when it is queued: the wait behind this client's other operations is its cost too.
    observed_operation observed;
    if (auto port = port_.lock()) observed = observed_operation(*port, recipe_kind::counter, path_, recipe_operation::change);
    auto op = std::make_shared<operation>(shared_from_this(), change, std::move(answer), std::move(observed));
    queue_->submit([op] { op->start(); });
}

void atomic_engine::finish(const std::shared_ptr<operation>& op, error_code ec, const std::string& what,
                           const atomic_result<std::int64_t>& result) {
    std::shared_ptr<lock_claim> held;
    {
        std::lock_guard lock(op->mutex);
        held = std::exchange(op->held, nullptr);
        if (op->machine) {
            std::lock_guard engine_lock(mutex_);
            memory_ = op->machine->memory();
        }
    }
    // The promoted lock is released before the caller hears (its delete is sent first).
    if (held) release_hold(op->locks, held);
    op->observed.finish(ec);
    op->answer(ec, what, result);
    queue_->next();
}

atomic_result<std::int64_t> atomic_engine::call(counter_change change) {
    sync_slot<std::string, atomic_result<std::int64_t>> slot;
    run(change, [&slot](error_code ec, const std::string& what, const atomic_result<std::int64_t>& r) { slot.set(ec, what, r); });
    error_code ec;
    auto [what, result] = slot.wait(ec);
    if (ec) throw zkr::system_error(ec, what);
    return result;
}

}  // namespace zkr::detail
