#include "lock_engine.hpp"

#include "acquisition.hpp"
#include "owner_data.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/post.hpp>
#include <boost/uuid/uuid_generators.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <condition_variable>

namespace zkr::detail {
namespace asio = boost::asio;

std::string random_uuid() {
    thread_local boost::uuids::random_generator generate;
    return boost::uuids::to_string(generate());
}

namespace {
std::atomic<std::uint64_t> next_owner{1};
}  // namespace

std::uint64_t current_thread_owner() {
    thread_local const std::uint64_t id = next_owner++;
    return id;
}

std::uint64_t new_async_owner() { return next_owner++; }

lock_engine::lock_engine(client_impl& c)
    : client_(c.weak_from_this()), threads_(c.threads()), executor_(c.executor()) {}

lock_engine::~lock_engine() = default;

std::shared_ptr<lock_engine> lock_engine::of(client_impl& c) {
    static const int key = 0;
    auto engine = std::static_pointer_cast<lock_engine>(c.extension(&key, [&c]() -> std::shared_ptr<void> {
        auto e = std::make_shared<lock_engine>(c);
        std::weak_ptr<lock_engine> weak = e;
        // On the session thread, as the session layer learns of it: a lost session's holds are
        // lost before any user code runs, however busy the user's executor is.
        e->session_subscription_ = c.on_session_event([weak](const session_event& ev) {
            if (auto self = weak.lock()) self->on_session(ev);
        });
        return e;
    }));
    if (!engine) throw zkr::system_error(make_error_code(errc::client_closed), "zkr: a lock on a closed client");
    return engine;
}

std::shared_ptr<acquisition> lock_engine::acquire(acquire_options options, std::uint64_t owner, bool async_owned,
                                                  std::optional<std::chrono::steady_clock::time_point> deadline,
                                                  done_fn done) {
    auto a = std::make_shared<acquisition>(shared_from_this(), std::move(options), owner, async_owned, std::move(done));
    a->start(deadline);
    return a;
}

void lock_engine::cancel(const std::shared_ptr<acquisition>& a) {
    if (a) a->give_up(make_error_code(errc::cancelled));
}

void lock_engine::count_acquisition_stats(int stale_deleted, bool adopted, int handoffs_without_listing) {
    counters_.stale_nodes_deleted += static_cast<std::uint64_t>(stale_deleted);
    counters_.handoffs_without_listing += static_cast<std::uint64_t>(handoffs_without_listing);
    if (adopted) ++counters_.nodes_adopted;
}

// ---------------------------------------------------------------- holds

void lock_engine::register_hold(const std::shared_ptr<hold>& h, bool pins_write_node) {
    ++counters_.acquisitions;
    std::lock_guard lock(mutex_);
    if (pins_write_node) {
        auto [first, last] = holds_.equal_range(h->lock_path);
        for (auto it = first; it != last; ++it) {
            auto& w = it->second;
            if (w->kind == lock_kind::write && w->owner == h->owner && !w->lost) {
                w->keep_node = true;
                h->pinned_write = w;
            }
        }
    }
    holds_.emplace(h->lock_path, h);
}

std::shared_ptr<hold> lock_engine::find(const std::string& lock_path, lock_kind kind, std::uint64_t owner) const {
    std::lock_guard lock(mutex_);
    auto [first, last] = holds_.equal_range(lock_path);
    for (auto it = first; it != last; ++it) {
        if (it->second->kind == kind && it->second->owner == owner) return it->second;
    }
    return nullptr;
}

bool lock_engine::any_hold(const std::string& lock_path) const {
    std::lock_guard lock(mutex_);
    return holds_.count(lock_path) > 0;
}

error_code lock_engine::reenter(hold& h) {
    if (state_of(h) == lock_state::lost) return make_error_code(errc::lock_lost);
    std::lock_guard lock(mutex_);
    ++h.count;
    ++counters_.reentries;
    return {};
}

int lock_engine::hold_count(const hold& h) const {
    std::lock_guard lock(mutex_);
    return h.released ? 0 : h.count;
}

lock_state lock_engine::state_of(const hold& h) const {
    {
        std::lock_guard lock(mutex_);
        if (h.released) return lock_state::not_held;
        if (h.lost) return lock_state::lost;
    }
    auto c = client();
    if (!c) return lock_state::lost;
    // Live truth, not the last event: the C client's view of the handle, and the lease.
    switch (c->health(h.session)) {
        case session_health::live: return lock_state::held;
        case session_health::suspect: return lock_state::uncertain;
        case session_health::gone: return lock_state::lost;
    }
    return lock_state::lost;
}

std::chrono::steady_clock::time_point lock_engine::valid_until(const hold& h) const {
    if (state_of(h) != lock_state::held) return {};
    auto c = client();
    return c ? c->lease_until(h.session) : std::chrono::steady_clock::time_point{};
}

error_code lock_engine::release(const std::string& lock_path, lock_kind kind, std::uint64_t owner) {
    std::shared_ptr<hold> h;
    {
        std::lock_guard lock(mutex_);
        auto [first, last] = holds_.equal_range(lock_path);
        auto it = std::find_if(first, last, [&](const auto& e) { return e.second->kind == kind && e.second->owner == owner; });
        if (it == last) return make_error_code(errc::not_owner);
        if (--it->second->count > 0) return {};
        h = it->second;
    }
    release_all(h, std::nullopt);
    return {};
}

void lock_engine::release_all(const std::shared_ptr<hold>& h, std::optional<completion<>> done) {
    std::vector<completion<>> waiters;
    bool delete_node, lost;
    std::string kept_write_node;
    {
        std::lock_guard lock(mutex_);
        if (h->released) {
            if (done) (*done)(make_error_code(errc::not_owner));
            return;
        }
        h->released = true;
        h->count = 0;
        auto [first, last] = holds_.equal_range(h->lock_path);
        for (auto it = first; it != last; ++it) {
            if (it->second == h) {
                holds_.erase(it);
                break;
            }
        }
        waiters.swap(h->lost_waiters);
        lost = h->lost;
        // A downgraded write node stays while the read hold that pinned it lasts.
        delete_node = !h->keep_node;
        if (auto& pinned = h->pinned_write) {
            if (!pinned->released) pinned->keep_node = false;  // still held: its own release deletes it
            else kept_write_node = pinned->node_path;
            pinned.reset();
        }
    }
    for (auto& w : waiters) w(make_error_code(errc::cancelled));
    // A lost hold's node went (or goes) with its session. Its name carries our uuid, so deleting
    // it can never hit another owner's node; it only frees the lock sooner if that old session
    // still lingers on the server.
    if (!kept_write_node.empty()) guaranteed_delete(std::move(kept_write_node));
    if (lost) {
        guaranteed_delete(h->node_path);
        if (done) (*done)(make_error_code(errc::lock_lost));
    } else if (delete_node) {
        guaranteed_delete(h->node_path, std::move(done));
    } else if (done) {
        (*done)({});  // the node stays for the owner's read hold
    }
}

void lock_engine::wait_lost(const std::shared_ptr<hold>& h, completion<> done) {
    auto state = state_of(*h);
    {
        std::lock_guard lock(mutex_);
        if (h->released) return done(make_error_code(errc::not_owner));
        if (!h->lost && state != lock_state::lost) {
            h->lost_waiters.push_back(std::move(done));
            return;
        }
    }
    done(make_error_code(errc::lock_lost));
}

subscription lock_engine::on_lost(const std::string& lock_path, std::function<void(const std::string&)> fn) {
    auto l = std::make_shared<lost_listener>();
    l->lock_path = lock_path;
    l->fn = std::move(fn);
    {
        std::lock_guard lock(mutex_);
        listeners_.emplace(lock_path, l);
    }
    return subscription([weak = weak_from_this(), l] {
        l->active = false;
        if (auto self = weak.lock()) {
            std::lock_guard lock(self->mutex_);
            auto [first, last] = self->listeners_.equal_range(l->lock_path);
            for (auto it = first; it != last; ++it) {
                if (it->second == l) {
                    self->listeners_.erase(it);
                    break;
                }
            }
        }
    });
}

// Runs on the session thread: marks holds and hands the news on, never calling user code here.
void lock_engine::on_session(const session_event& ev) {
    if (ev.state != connection_state::lost && ev.state != connection_state::closed &&
        ev.state != connection_state::connected)
        return;
    std::vector<completion<>> waiters;
    std::vector<std::pair<std::shared_ptr<lost_listener>, std::string>> calls;
    std::vector<std::shared_ptr<asio::steady_timer>> timers;
    {
        std::lock_guard lock(mutex_);
        for (auto& [path, h] : holds_) {
            if (h->lost) continue;
            // Only the holds of the session this event is about: a late event must never mark a
            // hold of a newer session lost. A new session means every older one is gone.
            bool gone = ev.state == connection_state::closed ||
                        (ev.state == connection_state::lost && h->session == ev.session) ||
                        (ev.state == connection_state::connected && h->session != ev.session);
            if (!gone) continue;
            h->lost = true;
            ++counters_.holds_lost;
            for (auto& w : h->lost_waiters) waiters.push_back(std::move(w));
            h->lost_waiters.clear();
            auto [first, last] = listeners_.equal_range(path);
            for (auto it = first; it != last; ++it) calls.emplace_back(it->second, h->node_path);
        }
        if (ev.state == connection_state::closed) {
            // Nothing of ours is left to retry: the session and its nodes are gone.
            closed_ = true;
            for (auto& w : retry_timers_) {
                if (auto t = w.lock()) timers.push_back(std::move(t));
            }
            retry_timers_.clear();
        }
    }
    for (auto& t : timers) t->cancel();
    for (auto& w : waiters) w(make_error_code(errc::lock_lost));
    if (calls.empty()) return;
    asio::post(executor_, [calls = std::move(calls)] {
        for (auto& [l, node] : calls) {
            if (!l->active) continue;
            try {
                l->fn(node);
            } catch (const std::exception& e) {
                log::write(log::level::error, std::string("zkr: a lock-lost handler threw: ") + e.what());
            }
        }
    });
}

// ---------------------------------------------------------------- participants

std::vector<participant> lock_engine::participants(const std::string& lock_path, bool read_write) {
    auto c = client();
    if (!c) throw zkr::system_error(make_error_code(errc::client_closed), "zkr: participants of \"" + lock_path + "\"");
    std::vector<participant> out;
    sync_slot<children_result> listed;
    c->get_children(lock_path, false, completion<children_result>(&listed));
    error_code ec;
    auto [children] = listed.wait(ec);
    if (ec == errc::no_node) return out;
    if (ec) throw zkr::system_error(ec, "zkr: listing the lock path \"" + lock_path + "\"");
    auto queue = sorted_contenders(children.children, read_write);

    // Every read sent at once (one round trip for the lot), into storage that outlives every
    // reply: we wait for all of them, whatever each one says.
    struct batch {
        std::mutex mutex;
        std::condition_variable all_in;
        std::size_t pending = 0;
        std::vector<std::pair<error_code, std::string>> replies;
    };
    auto reads = std::make_shared<batch>();
    reads->pending = queue.size();
    reads->replies.resize(queue.size());
    for (std::size_t i = 0; i < queue.size(); ++i) {
        c->get_data(join_path(lock_path, queue[i].name), false,
                    completion<data_result>([reads, i](error_code read_ec, data_result r) {
                        std::lock_guard lock(reads->mutex);
                        reads->replies[i] = {read_ec, std::move(r.data)};
                        if (--reads->pending == 0) reads->all_in.notify_all();
                    }));
    }
    {
        std::unique_lock lock(reads->mutex);
        reads->all_in.wait(lock, [&] { return reads->pending == 0; });
    }
    bool writer_seen = false;
    for (std::size_t i = 0; i < queue.size(); ++i) {
        auto& [read_ec, data] = reads->replies[i];
        if (read_ec == errc::no_node) continue;  // left meanwhile
        participant p;
        p.node = queue[i].name;
        p.sequence = queue[i].sequence;
        p.reader = queue[i].kind == lock_kind::read;
        // A node we may not read (its ACL) still has its place in the queue: report what is known.
        if (read_ec) p.owner_error = read_ec;
        else p.owner = decode_owner(data);
        if (queue[i].kind == lock_kind::read) p.holds = !writer_seen;
        else p.holds = out.empty();
        if (queue[i].kind != lock_kind::read) writer_seen = true;
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
    s.stale_nodes_deleted = counters_.stale_nodes_deleted.load();
    s.delete_retries = counters_.delete_retries.load();
    s.holds_lost = counters_.holds_lost.load();
    s.unowned_unlocks = counters_.unowned_unlocks.load();
    return s;
}

}  // namespace zkr::detail
