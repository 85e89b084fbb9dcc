#include "lock_engine.hpp"

#include "toolkit/owner_data.hpp"
#include "toolkit/queue_reader.hpp"
#include "zkr/lock_protocol.hpp"
#include "zkr/path.hpp"

namespace zkr::detail {

namespace {
std::atomic<std::uint64_t> next_owner{1};
}  // namespace

std::uint64_t current_thread_owner() {
    thread_local const std::uint64_t id = next_owner++;
    return id;
}

std::uint64_t new_async_owner() { return next_owner++; }

acquire_outcome outcome_of(error_code ec) {
    if (ec == errc::timed_out) return acquire_outcome::timed_out;
    if (ec == errc::cancelled) return acquire_outcome::cancelled;
    return acquire_outcome::failed;
}

lock_engine::lock_engine(session_port& port)
    : port_(port.weak_port()),
      executor_(port.executor()),
      holds_(hold_registry::of(port)),
      cleanup_(cleanup_service::of(port)) {}

std::shared_ptr<lock_engine::runner> lock_engine::acquire(queue_options options, std::uint64_t owner, bool async_owned,
                                                          std::optional<std::chrono::steady_clock::time_point> deadline,
                                                          done_fn done, std::optional<recipe_kind> observed) {
    auto port = port_.lock();
    if (!port) {
        done(make_error_code(errc::client_closed), nullptr);
        return nullptr;
    }
    std::string lock_path = options.path;
    // What the observer is told: the acquisition's start here, its end in the answer.
    std::shared_ptr<observer_channel> observer = observed ? port->observer_events() : nullptr;
    std::uint64_t observe_id = 0;
    auto started = std::chrono::steady_clock::now();
    if (observer) {
        observe_id = observer->next_id();
        observer->acquire_started({observe_id, *observed, lock_path});
    }
    auto tell = [observer, observe_id, started, recipe = observed.value_or(recipe_kind::mutex)](
                    const std::string& path, acquire_outcome outcome) {
        if (observer)
            observer->acquire_finished({observe_id, recipe, path, outcome == acquire_outcome::acquired ? 1u : 0u}, outcome,
                                       std::chrono::steady_clock::now() - started);
    };
    runner::hooks hooks;
    auto self = shared_from_this();
    auto counted = std::make_shared<std::atomic<bool>>(false);
    // The path, kind and data are the machine's (m.options()): a queued waiter keeps one copy.
    hooks.answer = [self, done = std::move(done), counted, owner, async_owned, tell, observer, observe_id, observed](
                       error_code reason, const step::done* d, const queue_fsm& m) {
        if (!d) {
            tell(m.options().path, outcome_of(reason));
            done(reason, nullptr);  // given up: counted when it ends
            return true;
        }
        counted->store(true);
        self->count(m, d->acquired);
        if (!d->acquired) {
            // No error: a try found the lock taken (a deadline of zero).
            tell(m.options().path, d->error ? outcome_of(d->error) : acquire_outcome::timed_out);
            done(d->error, nullptr);
            return true;
        }
        const auto& o = m.options();
        tell(o.path, acquire_outcome::acquired);
        auto h = std::make_shared<lock_claim>(o.path, m.node_path(), m.session(), m.czxid(), o.kind, owner, async_owned);
        if (observer) h->observe(observer, *observed, observe_id);
        // Sent before the caller learns it holds, so before its release: the server applies the
        // mark first; and before the hold's own watch on its node, which must not see it.
        if (d->mark) self->mark_holding(h->node_path, o.data);
        self->register_hold(h, m.pins_write_node());
        done({}, std::move(h));
        return true;
    };
    hooks.ended = [self, counted](const step::done& d, const queue_fsm& m) {
        if (!counted->exchange(true)) self->count(m, false);
        self->cleanup_->sweep(m.options().path, d.sweep);
    };
    auto r = std::make_shared<runner>(port, cleanup_, std::move(lock_path), queue_fsm(std::move(options), &random_uuid),
                                      std::move(hooks));
    r->start(deadline);
    return r;
}

void lock_engine::cancel(const std::shared_ptr<runner>& r) {
    if (r) r->give_up(make_error_code(errc::cancelled));
}

void lock_engine::count(const queue_fsm& m, bool acquired) {
    counters_.wakeups += static_cast<std::uint64_t>(m.departures());
    counters_.nodes_created += static_cast<std::uint64_t>(m.nodes_created());
    counters_.stale_nodes_deleted += static_cast<std::uint64_t>(m.stale_deleted());
    if (m.adopted()) ++counters_.nodes_adopted;
    if (acquired) counters_.handoffs_without_listing += static_cast<std::uint64_t>(m.listing_free_handoffs());
}

void lock_engine::mark_holding(const std::string& node_path, const std::string& owner_data) {
    // Best effort: should it fail, the successor lists when we go, as without it.
    auto port = port_.lock();
    if (!port) return;
    ++counters_.holding_marks;
    port->set_data(node_path, holding_mark(owner_data), 0,
                   completion<zkr::stat>(completion<zkr::stat>::inline_fn([](error_code, zkr::stat) {})));
}

// ---------------------------------------------------------------- holds

void lock_engine::register_hold(const std::shared_ptr<lock_claim>& h, bool pins_write_node) {
    ++counters_.acquisitions;
    {
        std::lock_guard lock(mutex_);
        if (pins_write_node) {
            auto [first, last] = claims_.equal_range(h->group);
            for (auto it = first; it != last; ++it) {
                auto& w = it->second;
                if (w->kind == queue_kind::write && w->owner == h->owner && holds_->state_of(*w) != lock_state::lost) {
                    w->keep_node = true;
                    h->pinned_write = w;
                }
            }
        }
        claims_.emplace(h->group, h);
    }
    holds_->add(h);
}

std::shared_ptr<lock_claim> lock_engine::find(const std::string& lock_path, queue_kind kind, std::uint64_t owner) const {
    std::lock_guard lock(mutex_);
    auto [first, last] = claims_.equal_range(lock_path);
    for (auto it = first; it != last; ++it) {
        if (it->second->kind == kind && it->second->owner == owner) return it->second;
    }
    return nullptr;
}

bool lock_engine::any_hold(const std::string& lock_path) const {
    std::lock_guard lock(mutex_);
    return claims_.count(lock_path) > 0;
}

error_code lock_engine::reenter(lock_claim& h) {
    if (state_of(h) == lock_state::lost) return make_error_code(errc::lock_lost);
    std::lock_guard lock(mutex_);
    ++h.count;
    ++counters_.reentries;
    return {};
}

int lock_engine::hold_count(const lock_claim& h) const {
    if (state_of(h) == lock_state::not_held) return 0;
    std::lock_guard lock(mutex_);
    return h.count;
}

error_code lock_engine::release(const std::string& lock_path, queue_kind kind, std::uint64_t owner) {
    std::shared_ptr<lock_claim> h;
    {
        std::lock_guard lock(mutex_);
        auto [first, last] = claims_.equal_range(lock_path);
        auto it = std::find_if(first, last, [&](const auto& e) { return e.second->kind == kind && e.second->owner == owner; });
        if (it == last) return make_error_code(errc::not_owner);
        if (--it->second->count > 0) return {};
        h = it->second;
    }
    release_all(h, std::nullopt);
    return {};
}

void lock_engine::release_all(const std::shared_ptr<lock_claim>& h, std::optional<completion<>> done) {
    bool lost = false;
    if (!holds_->release(h, &lost)) {
        if (done) (*done)(make_error_code(errc::not_owner));
        return;
    }
    bool delete_node;
    std::string kept_write_node;
    {
        std::lock_guard lock(mutex_);
        h->count = 0;
        auto [first, last] = claims_.equal_range(h->group);
        for (auto it = first; it != last; ++it) {
            if (it->second == h) {
                claims_.erase(it);
                break;
            }
        }
        // A downgraded write node stays while the read hold that pinned it lasts.
        delete_node = !h->keep_node;
        if (auto& pinned = h->pinned_write) {
            if (holds_->state_of(*pinned) != lock_state::not_held) pinned->keep_node = false;  // its own release deletes it
            else kept_write_node = pinned->node_path;
            pinned.reset();
        }
    }
    // A lost hold's node went (or goes) with its session, or someone deleted it. Its name
    // carries our uuid, so deleting it can never hit another owner's node; it only frees the lock
    // sooner if that old session still lingers on the server. Sent on the session current now;
    // with none, nothing is sent (a session zkr gave up is closed on the server by the session
    // layer as soon as one answers, and its nodes with it).
    if (!kept_write_node.empty()) cleanup_->guaranteed_delete(std::move(kept_write_node));
    if (lost) {
        cleanup_->guaranteed_delete(h->node_path);
        if (done) (*done)(make_error_code(errc::lock_lost));
    } else if (delete_node) {
        cleanup_->guaranteed_delete(h->node_path, std::move(done));
    } else if (done) {
        (*done)({});  // the node stays for the owner's read hold
    }
}

// ---------------------------------------------------------------- participants

std::vector<participant> lock_engine::participants(const std::string& lock_path, bool read_write) {
    auto port = client();
    if (!port) throw zkr::system_error(make_error_code(errc::client_closed), "zkr: participants of " + quoted_path(lock_path));
    auto nodes = read_queue(*port, lock_path, read_write ? queue_kind::write : queue_kind::exclusive, "participants");
    if (const auto& observer = port->observer_events())
        observer->queue_depth({observer->next_id(), read_write ? recipe_kind::write_lock : recipe_kind::mutex, lock_path},
                              nodes.size());
    std::vector<lock_protocol::queued> queue;
    queue.reserve(nodes.size());
    for (auto& n : nodes) {
        auto name = lock_protocol::parse_node_name(n.node.name);
        queue.push_back(lock_protocol::queued{*name, n.read_error ? lock_owner{} : decode_owner(n.data)});
    }
    auto holding = lock_protocol::holders(queue);
    std::vector<participant> out;
    out.reserve(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        participant p;
        p.node = nodes[i].node.name;
        p.sequence = nodes[i].node.sequence;
        p.reader = nodes[i].node.kind == queue_kind::read;
        // A node we may not read (its ACL) still has its place in the queue: report what is known.
        p.owner_error = nodes[i].read_error;
        p.owner = std::move(queue[i].owner);
        p.holds = holding[i];
        out.push_back(std::move(p));
    }
    return out;
}

lock_statistics lock_engine::statistics() const {
    lock_statistics s;
    s.acquisitions = counters_.acquisitions.load();
    s.reentries = counters_.reentries.load();
    s.wakeups = counters_.wakeups.load();
    s.handoffs_without_listing = counters_.handoffs_without_listing.load();
    s.holding_marks = counters_.holding_marks.load();
    s.nodes_created = counters_.nodes_created.load();
    s.nodes_adopted = counters_.nodes_adopted.load();
    s.stale_nodes_deleted = counters_.stale_nodes_deleted.load() + cleanup_->swept();
    s.delete_retries = cleanup_->delete_retries();
    s.holds_lost = holds_->holds_lost();
    s.unowned_unlocks = counters_.unowned_unlocks.load();
    return s;
}

}  // namespace zkr::detail
