// zkr::semaphore on the recipe toolkit: the mutex `path/locks` is the lock engine's (an async
// hold of its own), the leases are a lease_fsm run by fsm_runner while that hold stands, each
// lease is a hold of the registry, and the cleanup service deletes what is left. The semaphore
// itself only chains the two and answers once.
//
// Threads: as the toolkit's (replies on the C client's completion thread, deadlines on the session
// thread); handlers are posted to the client's executor. Lock order: lease_acquisition::mutex_
// before the toolkit's; nothing is called under it.
#include "zkr/semaphore.hpp"

#include "count_impl.hpp"
#include "lease_fsm.hpp"
#include "lock/lock_engine.hpp"
#include "toolkit/owner_data.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/system_executor.hpp>

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

struct lease_access {
    static lease make(std::shared_ptr<semaphore_impl> s, std::shared_ptr<hold> h) { return lease(std::move(s), std::move(h)); }
};

class semaphore_impl : public std::enable_shared_from_this<semaphore_impl> {
public:
    using done_fn = std::function<void(error_code, std::vector<std::shared_ptr<hold>>)>;

    semaphore_impl(session_port& port, std::string path, std::function<std::int32_t()> max)
        : port_(port.weak_port()),
          executor_(port.executor()),
          holds_(hold_registry::of(port)),
          cleanup_(cleanup_service::of(port)),
          engine_(lock_engine::of(port)),
          path_(std::move(path)),
          locks_(join_path(path_, "locks")),
          leases_(join_path(path_, "leases")),
          max_(std::move(max)) {}

    void follow(const std::shared_ptr<count_impl>& count) {
        count_ = count;
        std::weak_ptr<semaphore_impl> weak = weak_from_this();
        // A new maximum wakes whoever waits for a lease to come back.
        count_subscription_ = count->listen_inline([weak](std::int32_t) {
            if (auto self = weak.lock()) self->recount();
        });
    }

    const std::string& path() const noexcept { return path_; }
    const asio::any_io_executor& executor() const noexcept { return executor_; }
    std::int32_t max() const { return max_(); }
    hold_registry& holds() const { return *holds_; }

    void acquire(int count, bool once, std::optional<std::chrono::steady_clock::time_point> deadline, done_fn done,
                 asio::cancellation_slot slot);

    void release(const std::shared_ptr<hold>& h) {
        if (!h) return;
        holds_->release(h);
        cleanup_->guaranteed_delete(h->node_path);
    }

    std::int64_t fencing_token(const std::shared_ptr<hold>& h) const {
        auto port = port_.lock();
        auto bound = port ? port->session_timeout() : std::chrono::milliseconds(0);
        return holds_->fencing_token(h, bound);
    }

    std::vector<std::string> lease_nodes() const {
        auto port = port_.lock();
        if (!port) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::semaphore " + quoted_path(path_));
        sync_slot<children_result> slot;
        port->get_children(leases_, false, completion<children_result>(&slot));
        error_code ec;
        auto [r] = slot.wait(ec);
        if (ec == errc::no_node) return {};
        if (ec) throw zkr::system_error(ec, "zkr::semaphore: listing " + quoted_path(leases_));
        // In the order they were made: by the number after the last "lease-".
        auto sequence = [](const std::string& name) {
            std::int64_t n = -1;
            if (auto at = name.rfind("lease-"); at != std::string::npos)
                std::from_chars(name.data() + at + 6, name.data() + name.size(), n);
            return n;
        };
        std::sort(r.children.begin(), r.children.end(), [&](const std::string& a, const std::string& b) {
            auto sa = sequence(a), sb = sequence(b);
            return sa != sb ? sa < sb : a < b;
        });
        return std::move(r.children);
    }

    subscription on_lost(std::function<void(const std::string&)> fn) { return holds_->on_lost(path_, std::move(fn)); }

private:
    friend class lease_acquisition;
    void recount();
    void track(const std::shared_ptr<fsm_runner<lease_fsm>>& r) {
        std::lock_guard lock(mutex_);
        std::erase_if(waiting_, [](const auto& w) { return w.expired(); });
        waiting_.push_back(r);
    }

    std::weak_ptr<session_port> port_;
    asio::any_io_executor executor_;
    std::shared_ptr<hold_registry> holds_;
    std::shared_ptr<cleanup_service> cleanup_;
    std::shared_ptr<lock_engine> engine_;
    const std::string path_, locks_, leases_;
    std::function<std::int32_t()> max_;
    std::shared_ptr<count_impl> count_;
    subscription count_subscription_;
    std::mutex mutex_;  // a leaf
    std::vector<std::weak_ptr<fsm_runner<lease_fsm>>> waiting_;
};

// One acquisition: the mutex, then the leases under it, then the mutex released; started over
// (within the deadline) when the mutex hold is lost on the way. Answers once.
class lease_acquisition : public std::enable_shared_from_this<lease_acquisition> {
public:
    lease_acquisition(std::shared_ptr<semaphore_impl> s, int count, bool once,
                      std::optional<std::chrono::steady_clock::time_point> deadline, semaphore_impl::done_fn done)
        : sem_(std::move(s)), count_(count), once_(once), deadline_(deadline), done_(std::move(done)) {}

    /// The client's observer sees this acquisition as `id` (set before start(); its start is told
    /// already): its end is told before any of its leases is a hold (whose loss the observer may
    /// then hear of), and only if the acquisition is still unanswered.
    void observe(std::shared_ptr<observer_channel> observer, std::uint64_t id) {
        observer_ = std::move(observer);
        observe_id_ = id;
        observe_started_ = std::chrono::steady_clock::now();
    }

    void start() {
        queue_options o;
        o.path = sem_->locks_;
        o.kind = queue_kind::exclusive;
        o.data = current_owner_data(true);
        o.wait = !once_;
        // The acquisition lives as long as one of its steps runs: each holds it.
        auto r = sem_->engine_->acquire(std::move(o), new_async_owner(), true, deadline_,
                                        [self = shared_from_this()](error_code ec, std::shared_ptr<lock_claim> claim) {
                                            self->mutex_held(ec, std::move(claim));
                                        });
        std::lock_guard lock(mutex_);
        mutex_runner_ = r;
        if (cancelled_ && r) lock_engine::cancel(r);
    }

    void cancel() {
        std::shared_ptr<lock_engine::runner> m;
        std::shared_ptr<fsm_runner<lease_fsm>> l;
        {
            std::lock_guard lock(mutex_);
            cancelled_ = true;
            m = mutex_runner_.lock();
            l = lease_runner_;
        }
        if (l) l->give_up(make_error_code(errc::cancelled));
        else if (m) lock_engine::cancel(m);
    }

private:
    void mutex_held(error_code ec, std::shared_ptr<lock_claim> claim) {
        if (!claim) return answer(ec, {});  // none: a try found the mutex taken
        bool cancelled;
        {
            std::lock_guard lock(mutex_);
            cancelled = cancelled_;
            claim_ = claim;
        }
        if (cancelled) {
            release_mutex();
            return answer(make_error_code(errc::cancelled), {});
        }
        auto port = sem_->port_.lock();
        if (!port) {
            release_mutex();
            return answer(make_error_code(errc::client_closed), {});
        }
        lease_options o;
        o.leases = sem_->leases_;
        o.guard = claim->node_path;
        o.session = claim->session;
        o.data = current_owner_data(true);
        o.count = count_;
        o.max = [sem = sem_] { return sem->max(); };
        o.wait = !once_;
        fsm_runner<lease_fsm>::hooks hooks;
        hooks.answer = [self = shared_from_this()](error_code reason, const step::leases_done* d, const lease_fsm&) {
            self->leases_done(reason, d);
            return true;
        };
        hooks.ended = [cleanup = sem_->cleanup_, leases = sem_->leases_](const step::leases_done& d, const lease_fsm&) {
            cleanup->sweep(leases, d.sweep);
        };
        auto r = std::make_shared<fsm_runner<lease_fsm>>(port, sem_->cleanup_, sem_->leases_,
                                                         lease_fsm(std::move(o), &random_uuid), std::move(hooks));
        {
            std::lock_guard lock(mutex_);
            lease_runner_ = r;
        }
        sem_->track(r);
        r->start(deadline_);
        bool cancelled_meanwhile;
        {
            std::lock_guard lock(mutex_);
            cancelled_meanwhile = cancelled_;
        }
        // Cancelled between the two: give the leases up too (idempotent).
        if (cancelled_meanwhile) r->give_up(make_error_code(errc::cancelled));
    }

    void leases_done(error_code reason, const step::leases_done* d) {
        {
            std::lock_guard lock(mutex_);
            lease_runner_.reset();
        }
        // Whatever came of it, the mutex goes now (after the leases' own deletes, if any).
        release_mutex();
        if (!d) return answer(reason, {});  // given up: deadline or cancellation
        if (d->acquired) {
            std::vector<std::shared_ptr<hold>> made;
            bool unanswered;
            {
                std::lock_guard lock(mutex_);
                unanswered = done_ != nullptr;  // answer() below takes it: nothing else answers meanwhile
            }
            bool observed = observer_ && unanswered;
            if (observed) tell(acquire_outcome::acquired, d->nodes.size());
            for (const auto& node : d->nodes) {
                auto h = std::make_shared<hold>(sem_->path_, node, d->session, 0);
                if (observed) h->observe(observer_, recipe_kind::semaphore, observe_id_);
                sem_->holds_->add(h);
                made.push_back(std::move(h));
            }
            return answer({}, std::move(made));
        }
        // Our mutex hold went with a session on the way: start over, within the deadline.
        bool again = (d->error == errc::session_expired || d->error == errc::lock_lost) && !once_ && ++restarts_ < 8 &&
                     (!deadline_ || std::chrono::steady_clock::now() < *deadline_);
        {
            std::lock_guard lock(mutex_);
            again = again && !cancelled_;
        }
        if (again) return start();
        answer(d->error, {});
    }

    void release_mutex() {
        std::shared_ptr<lock_claim> claim;
        {
            std::lock_guard lock(mutex_);
            claim = std::exchange(claim_, nullptr);
        }
        if (claim) sem_->engine_->release_all(claim, std::nullopt);
    }

    void tell(acquire_outcome outcome, std::size_t holds) {
        observer_->acquire_finished({observe_id_, recipe_kind::semaphore, sem_->path_, holds}, outcome,
                                    std::chrono::steady_clock::now() - observe_started_);
    }

    void answer(error_code ec, std::vector<std::shared_ptr<hold>> made) {
        semaphore_impl::done_fn done;
        {
            std::lock_guard lock(mutex_);
            done = std::exchange(done_, nullptr);
        }
        // Acquired: told in leases_done(), before the leases became holds. Else: not acquired.
        // No error and nothing made: a try found too few leases free.
        if (done && observer_ && made.empty()) tell(ec ? outcome_of(ec) : acquire_outcome::timed_out, 0);
        if (done) done(ec, std::move(made));
        else for (auto& h : made) sem_->release(h);  // answered already: nobody owns them
    }

    std::shared_ptr<semaphore_impl> sem_;
    std::shared_ptr<observer_channel> observer_;
    std::uint64_t observe_id_ = 0;
    std::chrono::steady_clock::time_point observe_started_{};
    const int count_;
    const bool once_;
    const std::optional<std::chrono::steady_clock::time_point> deadline_;
    int restarts_ = 0;
    std::mutex mutex_;
    semaphore_impl::done_fn done_;
    bool cancelled_ = false;
    std::weak_ptr<lock_engine::runner> mutex_runner_;
    std::shared_ptr<fsm_runner<lease_fsm>> lease_runner_;
    std::shared_ptr<lock_claim> claim_;
};

void semaphore_impl::acquire(int count, bool once, std::optional<std::chrono::steady_clock::time_point> deadline,
                             done_fn done, asio::cancellation_slot slot) {
    auto port = port_.lock();
    auto observer = port ? port->observer_events() : nullptr;
    std::uint64_t id = 0;
    if (observer) {
        id = observer->next_id();
        observer->acquire_started({id, recipe_kind::semaphore, path_});
    }
    auto a = std::make_shared<lease_acquisition>(shared_from_this(), count, once, deadline, std::move(done));
    if (observer) a->observe(observer, id);
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<lease_acquisition>(a)](asio::cancellation_type) {
            if (auto a = weak.lock()) a->cancel();
        });
    }
    a->start();
}

void semaphore_impl::recount() {
    std::vector<std::shared_ptr<fsm_runner<lease_fsm>>> runners;
    {
        std::lock_guard lock(mutex_);
        for (auto& w : waiting_) {
            if (auto r = w.lock()) runners.push_back(std::move(r));
        }
    }
    // As a data watch's event: a waiting machine counts again.
    for (auto& r : runners) r->inject(reply::watch_fired{{}, event_type::changed, false});
}

void start_acquire_leases(const std::shared_ptr<semaphore_impl>& s, int count, leases_handler handler) {
    if (count < 1) {
        return post_handler(std::move(handler), s->executor(), make_error_code(errc::bad_arguments), std::vector<lease>{});
    }
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto done = std::make_shared<completion<std::vector<lease>>>(std::move(handler), s->executor());
    s->acquire(count, false, std::nullopt,
               [done, s](error_code ec, std::vector<std::shared_ptr<hold>> made) {
                   std::vector<lease> out;
                   for (auto& h : made) out.push_back(lease_access::make(s, std::move(h)));
                   (*done)(ec, std::move(out));
               },
               slot);
}

void start_lease_wait_lost(const std::shared_ptr<semaphore_impl>& s, const std::shared_ptr<hold>& h, lease_handler handler) {
    if (!s || !h) return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::not_owner));
    auto slot = asio::get_associated_cancellation_slot(handler);
    s->holds().wait_lost(h, completion<>(std::move(handler), s->executor()), slot);
}

asio::any_io_executor semaphore_executor(const semaphore_impl& s) { return s.executor(); }

}  // namespace zkr::detail

namespace zkr {

// ---------------------------------------------------------------- lease

lease& lease::operator=(lease&& other) noexcept {
    if (this != &other) {
        release();
        semaphore_ = std::move(other.semaphore_);
        hold_ = std::move(other.hold_);
    }
    return *this;
}

void lease::release() noexcept {
    if (!hold_) return;
    try {
        semaphore_->release(std::exchange(hold_, nullptr));
    } catch (...) {
        // Only allocations can throw; the node then goes with its session.
    }
}

void lease::check() const {
    if (!hold_) throw zkr::system_error(make_error_code(errc::not_owner), "zkr::lease: empty");
}

lock_state lease::state() const { return hold_ ? semaphore_->holds().state_of(*hold_) : lock_state::not_held; }

std::chrono::steady_clock::time_point lease::valid_until() const {
    return hold_ ? semaphore_->holds().valid_until(*hold_) : std::chrono::steady_clock::time_point{};
}

std::int64_t lease::fencing_token() const {
    check();
    auto token = semaphore_->fencing_token(hold_);
    if (token == 0) throw zkr::system_error(make_error_code(errc::lock_lost), "zkr::lease " + quoted_path(hold_->node_path));
    return token;
}

const std::string& lease::node_path() const {
    check();
    return hold_->node_path;
}

op::guard lease::guard() const {
    check();
    return op::guard{hold_->node_path, "lease of " + hold_->group};
}

// ---------------------------------------------------------------- semaphore

namespace {

std::shared_ptr<detail::session_port> semaphore_port(client& c, const std::string& path) {
    detail::check_recipe_path(c, path, "zkr::semaphore", "path");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::semaphore on a closed client");
    return port;
}

}  // namespace

semaphore::semaphore(client& c, std::string path, std::int32_t max_leases) {
    if (max_leases < 1)
        throw std::invalid_argument("zkr::semaphore " + quoted_path(path) + ": max_leases must be at least 1, got " +
                                    std::to_string(max_leases));
    auto port = semaphore_port(c, path);
    impl_ = std::make_shared<detail::semaphore_impl>(*port, std::move(path), [max_leases] { return max_leases; });
}

semaphore::semaphore(client& c, std::string path, const shared_count& max) {
    auto port = semaphore_port(c, path);
    auto count = max.impl_;
    impl_ = std::make_shared<detail::semaphore_impl>(*port, std::move(path), [count] { return count->get(); });
    impl_->follow(count);
}

semaphore::~semaphore() = default;

std::vector<lease> semaphore::acquire_within(int count, std::optional<std::chrono::milliseconds> timeout, bool once) {
    if (count < 1) throw std::invalid_argument("zkr::semaphore: the number of leases must be at least 1, got " + std::to_string(count));
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (timeout) {
        auto now = std::chrono::steady_clock::now();
        // A timeout that is no wait at all is a try (one round), as for the locks.
        if (*timeout <= std::chrono::milliseconds(0)) once = true;
        else deadline = now + std::min(*timeout, std::chrono::milliseconds(std::chrono::hours(24 * 365 * 100)));
    }
    detail::sync_slot<std::vector<std::shared_ptr<detail::hold>>> slot;
    impl_->acquire(count, once, deadline,
                   [&slot](error_code ec, std::vector<std::shared_ptr<detail::hold>> made) { slot.set(ec, std::move(made)); }, {});
    error_code ec;
    auto [made] = slot.wait(ec);
    std::vector<lease> out;
    for (auto& h : made) out.push_back(detail::lease_access::make(impl_, std::move(h)));
    if (!out.empty() || !ec) return out;
    // Timed and tries: connection trouble is "not acquired", as for the locks.
    if ((timeout || once) && is_connection_trouble(ec)) return out;
    throw zkr::system_error(ec, "zkr::semaphore: acquiring " + std::to_string(count) + " lease(s) of " + quoted_path(path()));
}

lease semaphore::acquire() {
    auto all = acquire(1);
    if (all.empty()) throw zkr::system_error(make_error_code(errc::attempts_exhausted), "zkr::semaphore::acquire " + quoted_path(path()));
    return std::move(all.front());
}

std::vector<lease> semaphore::acquire(int count) { return acquire_within(count, std::nullopt); }

std::optional<lease> semaphore::try_acquire() {
    auto all = acquire_within(1, std::nullopt, true);
    if (all.empty()) return std::nullopt;
    return std::move(all.front());
}

int semaphore::available() const { return impl_->max() - static_cast<int>(impl_->lease_nodes().size()); }
std::vector<std::string> semaphore::participants() const { return impl_->lease_nodes(); }
std::int32_t semaphore::max_leases() const { return impl_->max(); }
subscription semaphore::on_lost(std::function<void(const std::string&)> handler) {
    if (!handler) throw std::invalid_argument("zkr::semaphore::on_lost: the handler is empty");
    return impl_->on_lost(std::move(handler));
}
const std::string& semaphore::path() const noexcept { return impl_->path(); }

}  // namespace zkr
