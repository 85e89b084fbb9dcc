#include "lock_engine.hpp"

#include "owner_data.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/post.hpp>
#include <boost/uuid/uuid_generators.hpp>
#include <boost/uuid/uuid_io.hpp>

namespace zkr::detail {
namespace asio = boost::asio;

std::string random_uuid() {
    thread_local boost::uuids::random_generator generate;
    return boost::uuids::to_string(generate());
}

namespace {

// Creates `path` and its missing ancestors as container nodes (persistent where the server has
// no containers), one after the other, then calls `done`.
struct parents_maker : std::enable_shared_from_this<parents_maker> {
    client_impl& client;
    std::vector<std::string> prefixes;
    std::size_t next = 0;
    create_mode mode = create_mode::container;
    std::function<void(zkr::error_code)> done;

    parents_maker(client_impl& c, const std::string& path, std::function<void(zkr::error_code)> d)
        : client(c), done(std::move(d)) {
        for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
            prefixes.push_back(slash == std::string::npos ? path : path.substr(0, slash));
            if (slash == std::string::npos) break;
        }
    }
    void step() {
        if (next == prefixes.size()) return done({});
        client.create(prefixes[next], {}, mode,
                      completion<create_result>([self = shared_from_this()](zkr::error_code ec, create_result) {
                          if (ec == errc::unimplemented && self->mode == create_mode::container) {
                              self->mode = create_mode::persistent;  // a server without containers
                              return self->step();
                          }
                          if (ec && ec != errc::node_exists) return self->done(ec);
                          ++self->next;
                          self->step();
                      }));
    }
};

}  // namespace

// ---------------------------------------------------------------- acquisition

class lock_engine::acquisition : public std::enable_shared_from_this<acquisition> {
public:
    acquisition(std::shared_ptr<lock_engine> engine, acquire_options options, std::thread::id thread, done_fn done)
        : engine_(std::move(engine)),
          client_(engine_->client()),
          lock_path_(options.lock_path),
          owner_data_(options.owner_data),
          kind_(options.kind),
          thread_(thread),
          fsm_(std::move(options), &random_uuid),
          done_(std::move(done)) {}

    void start(std::optional<std::chrono::steady_clock::time_point> deadline) {
        if (deadline) {
            timer_ = std::make_shared<asio::steady_timer>(client_.internal_executor(), *deadline);
            timer_->async_wait([weak = weak_from_this()](zkr::error_code ec) {
                if (auto self = weak.lock(); self && !ec) self->give_up(make_error_code(errc::timed_out));
            });
        }
        feed([](acquire_fsm& f) { return f.start(); });
    }

    void give_up(zkr::error_code reason) {
        feed([&](acquire_fsm& f) { return f.abandon(reason); });
    }

private:
    using action = acquire_fsm::action;
    using step = acquire_fsm::step;

    struct create_and_list_replies {
        std::mutex mutex;
        int pending = 2;
        zkr::error_code create_error, list_error;
        create_result created;
        std::vector<std::string> children;
    };

    std::int64_t session() const { return client_.session_id(); }

    // Hands one event to the state machine and carries out what it says. Never called with the
    // mutex held: replies may come back on this very thread.
    template <class Event>
    void feed(Event&& event) {
        action a;
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            a = event(fsm_);
            if (a.what == step::done) finished_ = true;
        }
        run(std::move(a));
    }

    void run(action a) {
        for (auto& path : a.deletes) engine_->guaranteed_delete(std::move(path));
        auto self = shared_from_this();
        const std::string& lock_path = fsm_lock_path();
        switch (a.what) {
            case step::none:
                return;
            case step::create_and_list: {
                // Sent back to back: the server answers a session's requests in order, so the
                // listing already contains our node. One round trip when uncontended.
                auto replies = std::make_shared<create_and_list_replies>();
                client_.create(a.path, owner_data(), create_mode::ephemeral_sequential,
                               completion<create_result>([self, replies](zkr::error_code ec, create_result r) {
                                   {
                                       std::lock_guard lock(replies->mutex);
                                       replies->create_error = ec;
                                       replies->created = std::move(r);
                                   }
                                   if (!ec) ++self->engine_->counters_.nodes_created;
                                   self->joined(replies);
                               }));
                client_.get_children(lock_path, false,
                                     completion<children_result>([self, replies](zkr::error_code ec, children_result r) {
                                         {
                                             std::lock_guard lock(replies->mutex);
                                             replies->list_error = ec;
                                             replies->children = std::move(r.children);
                                         }
                                         self->joined(replies);
                                     }));
                return;
            }
            case step::create_parents: {
                auto maker = std::make_shared<parents_maker>(client_, lock_path, [self](zkr::error_code ec) {
                    self->feed([&](acquire_fsm& f) { return f.on_parents_created(ec); });
                });
                maker->step();
                return;
            }
            case step::list:
                client_.get_children(lock_path, false, completion<children_result>([self](zkr::error_code ec, children_result r) {
                    self->feed([&](acquire_fsm& f) { return f.on_listed(ec, r.children, self->session()); });
                }));
                return;
            case step::check_owner:
                client_.exists(a.path, false, completion<exists_result>([self](zkr::error_code ec, exists_result r) {
                    self->feed([&](acquire_fsm& f) { return f.on_owner(ec, r, self->session()); });
                }));
                return;
            case step::watch:
                client_.get_data(a.path, true, completion<data_result>([self](zkr::error_code ec, data_result r) {
                    if (!ec) {
                        std::lock_guard lock(self->mutex_);
                        self->watch_ = watch_access::state(r.watch);
                    }
                    self->feed([&](acquire_fsm& f) { return f.on_watch_set(ec, self->session()); });
                }));
                return;
            case step::wait: {
                std::shared_ptr<watch_state> ws;
                {
                    std::lock_guard lock(mutex_);
                    ws = watch_;
                }
                ws->wait_inline([self](zkr::error_code ec, const watch_event& ev) {
                    if (!ec) self->engine_->count_wakeup();
                    self->feed([&](acquire_fsm& f) { return f.on_watch_event(ec, ev.type, self->session()); });
                });
                return;
            }
            case step::remove_watch: {
                std::shared_ptr<watch_state> ws;
                {
                    std::lock_guard lock(mutex_);
                    ws = watch_;
                }
                client_.remove_watch(ws, completion<>([self](zkr::error_code) {
                    self->feed([](acquire_fsm& f) { return f.on_watch_removed(); });
                }));
                return;
            }
            case step::done:
                finish(std::move(a));
                return;
        }
    }

    void joined(const std::shared_ptr<create_and_list_replies>& replies) {
        {
            std::lock_guard lock(replies->mutex);
            if (--replies->pending > 0) return;
        }
        feed([&](acquire_fsm& f) {
            return f.on_created_and_listed(replies->create_error, replies->created, replies->list_error,
                                           replies->children, session());
        });
    }

    void finish(action a) {
        if (!a.sweep_prefixes.empty()) engine_->sweep(lock_path_, std::move(a.sweep_prefixes));
        if (timer_) asio::post(client_.internal_executor(), [t = timer_] { t->cancel(); });
        engine_->counters_.stale_nodes_deleted += static_cast<std::uint64_t>(fsm_.stale_deleted());
        if (fsm_.adopted()) ++engine_->counters_.nodes_adopted;
        std::shared_ptr<hold> h;
        if (a.acquired) {
            h = std::make_shared<hold>();
            h->lock_path = fsm_lock_path();
            h->node_path = fsm_.node_path();
            h->kind = kind_;
            h->thread = thread_;
            h->session = fsm_.session();
            h->czxid = fsm_.czxid();
            engine_->register_hold(h, fsm_.pins_write_node());
        }
        auto done = std::move(done_);
        done(a.error, std::move(h));
    }

    const std::string& fsm_lock_path() const { return lock_path_; }
    const std::string& owner_data() const { return owner_data_; }

    std::shared_ptr<lock_engine> engine_;
    client_impl& client_;
    const std::string lock_path_, owner_data_;
    const lock_kind kind_;
    const std::thread::id thread_;
    acquire_fsm fsm_;
    done_fn done_;

    std::mutex mutex_;
    bool finished_ = false;
    std::shared_ptr<watch_state> watch_;
    std::shared_ptr<asio::steady_timer> timer_;
};

// ---------------------------------------------------------------- engine

lock_engine::lock_engine(client_impl& c) : client_(c) {}

void lock_engine::count_wakeup() { ++counters_.wakeups; }

lock_engine::~lock_engine() {
    state_subscription_.reset();
    std::lock_guard lock(mutex_);
    for (auto& weak : retry_timers_) {
        if (auto t = weak.lock()) t->cancel();
    }
}

std::shared_ptr<lock_engine> lock_engine::of(client_impl& c) {
    static const int key = 0;
    auto engine = std::static_pointer_cast<lock_engine>(c.extension(&key, [&c]() -> std::shared_ptr<void> {
        auto e = std::make_shared<lock_engine>(c);
        std::weak_ptr<lock_engine> weak = e;
        e->state_subscription_ = c.on_state_change([weak](connection_state s) {
            if (auto self = weak.lock()) self->on_state(s);
        });
        return e;
    }));
    return engine;
}

std::shared_ptr<lock_engine::acquisition> lock_engine::acquire(acquire_options options, std::thread::id thread,
                                                               std::optional<std::chrono::steady_clock::time_point> deadline,
                                                               done_fn done) {
    auto a = std::make_shared<acquisition>(shared_from_this(), std::move(options), thread, std::move(done));
    a->start(deadline);
    return a;
}

void lock_engine::cancel(const std::shared_ptr<acquisition>& a) {
    if (a) a->give_up(make_error_code(errc::cancelled));
}

void lock_engine::register_hold(const std::shared_ptr<hold>& h, bool pins_write_node) {
    ++counters_.acquisitions;
    std::lock_guard lock(mutex_);
    if (pins_write_node) {
        auto [first, last] = holds_.equal_range(h->lock_path);
        for (auto it = first; it != last; ++it) {
            if (it->second->kind == lock_kind::write && it->second->thread == h->thread) {
                it->second->keep_node = true;
                h->pinned_write = it->second;
            }
        }
    }
    holds_.emplace(h->lock_path, h);
}

std::shared_ptr<hold> lock_engine::find(const std::string& lock_path, lock_kind kind, std::thread::id thread) const {
    std::lock_guard lock(mutex_);
    auto [first, last] = holds_.equal_range(lock_path);
    for (auto it = first; it != last; ++it) {
        if (it->second->kind == kind && it->second->thread == thread) return it->second;
    }
    return nullptr;
}

bool lock_engine::any_hold(const std::string& lock_path) const {
    std::lock_guard lock(mutex_);
    return holds_.count(lock_path) > 0;
}

zkr::error_code lock_engine::reenter(hold& h) {
    if (state_of(h) == lock_state::lost) return make_error_code(errc::lock_lost);
    std::lock_guard lock(mutex_);
    ++h.count;
    ++counters_.reentries;
    return {};
}

int lock_engine::hold_count(const hold& h) const {
    std::lock_guard lock(mutex_);
    return h.count;
}

lock_state lock_engine::state_of(const hold& h) const {
    {
        std::lock_guard lock(mutex_);
        if (h.lost) return lock_state::lost;
    }
    // The client knows first: its session id changes (or drops to 0) the moment it is lost.
    if (client_.session_id() != h.session) return lock_state::lost;
    return client_.is_connected() ? lock_state::held : lock_state::uncertain;
}

zkr::error_code lock_engine::release(const std::string& lock_path, lock_kind kind, std::thread::id thread) {
    std::shared_ptr<hold> released;
    std::vector<completion<>> waiters;
    bool delete_node = true;
    std::string kept_write_node;
    {
        std::lock_guard lock(mutex_);
        auto [first, last] = holds_.equal_range(lock_path);
        auto it = std::find_if(first, last, [&](const auto& e) { return e.second->kind == kind && e.second->thread == thread; });
        if (it == last) return make_error_code(errc::not_owner);
        if (--it->second->count > 0) return {};
        released = it->second;
        holds_.erase(it);
        waiters.swap(released->lost_waiters);
        // A downgraded write node stays while the read hold that pinned it lasts.
        delete_node = !released->keep_node;
        if (auto& pinned = released->pinned_write) {
            if (pinned->count > 0) pinned->keep_node = false;  // still held: its own release deletes it
            else kept_write_node = pinned->node_path;
            pinned.reset();
        }
    }
    for (auto& w : waiters) w(make_error_code(errc::cancelled));
    // A lost hold's node went (or goes) with its session. Its name carries our uuid, so deleting
    // it can never hit another owner's node; it only frees the lock sooner if that old session
    // still lingers on the server.
    if (delete_node) guaranteed_delete(released->node_path);
    if (!kept_write_node.empty()) guaranteed_delete(std::move(kept_write_node));
    return {};
}

void lock_engine::wait_lost(const std::shared_ptr<hold>& h, completion<> done) {
    {
        std::lock_guard lock(mutex_);
        if (!h->lost && client_.session_id() == h->session) {
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

// Runs on the client's executor (a state listener): user callbacks may run here.
void lock_engine::on_state(connection_state s) {
    if (s != connection_state::lost && s != connection_state::closed && s != connection_state::connected) return;
    std::int64_t session = client_.session_id();
    std::vector<completion<>> waiters;
    std::vector<std::pair<std::shared_ptr<lost_listener>, std::string>> calls;
    {
        std::lock_guard lock(mutex_);
        for (auto& [path, h] : holds_) {
            if (h->lost || (s == connection_state::connected && h->session == session)) continue;
            h->lost = true;
            ++counters_.holds_lost;
            for (auto& w : h->lost_waiters) waiters.push_back(std::move(w));
            h->lost_waiters.clear();
            auto [first, last] = listeners_.equal_range(path);
            for (auto it = first; it != last; ++it) calls.emplace_back(it->second, h->node_path);
        }
    }
    for (auto& w : waiters) w(make_error_code(errc::lock_lost));
    for (auto& [l, node] : calls) {
        if (!l->active) continue;
        try {
            l->fn(node);
        } catch (const std::exception& e) {
            log::write(log::level::error, std::string("zkr: a lock-lost handler threw: ") + e.what());
        }
    }
}

void lock_engine::guaranteed_delete(std::string path) { delete_attempt(std::move(path), client_.session_id(), 0); }

void lock_engine::delete_attempt(std::string path, std::int64_t session, int attempt) {
    std::weak_ptr<lock_engine> weak = weak_from_this();
    client_.remove(path, any_version, completion<>([weak, path, session, attempt](zkr::error_code ec) {
        if (!ec || ec == errc::no_node || ec == errc::client_closed) return;
        auto self = weak.lock();
        if (!self) return;
        // While the session that made the node lives, the node lives: keep trying. Once that
        // session is gone, so is the node.
        if (session == 0 || self->client_.session_id() != session) return;
        ++self->counters_.delete_retries;
        auto timer = std::make_shared<asio::steady_timer>(self->client_.internal_executor(),
                                                          std::chrono::milliseconds(std::min(1000, 50 << std::min(attempt, 4))));
        {
            std::lock_guard lock(self->mutex_);
            self->retry_timers_.erase(std::remove_if(self->retry_timers_.begin(), self->retry_timers_.end(),
                                                     [](const auto& w) { return w.expired(); }),
                                      self->retry_timers_.end());
            self->retry_timers_.push_back(timer);
        }
        timer->async_wait([weak, timer, path, session, attempt](zkr::error_code wait_ec) {
            if (wait_ec) return;
            if (auto again = weak.lock()) again->delete_attempt(path, session, attempt + 1);
        });
    }));
}

void lock_engine::sweep(const std::string& lock_path, std::vector<std::string> prefixes) {
    std::weak_ptr<lock_engine> weak = weak_from_this();
    client_.get_children(lock_path, false,
                         completion<children_result>([weak, lock_path, prefixes = std::move(prefixes)](zkr::error_code ec,
                                                                                                       children_result r) {
                             auto self = weak.lock();
                             if (!self || ec) return;  // no listing: the session (and any such node) is gone
                             for (const auto& child : r.children) {
                                 for (const auto& p : prefixes) {
                                     if (has_prefix(child, p)) {
                                         ++self->counters_.stale_nodes_deleted;
                                         self->guaranteed_delete(join_path(lock_path, child));
                                     }
                                 }
                             }
                         }));
}

std::vector<participant> lock_engine::participants(const std::string& lock_path, bool read_write) {
    std::vector<participant> out;
    sync_slot<children_result> listed;
    client_.get_children(lock_path, false, completion<children_result>(&listed));
    zkr::error_code ec;
    auto [children] = listed.wait(ec);
    if (ec == errc::no_node) return out;
    if (ec) throw zkr::system_error(ec, "zkr: listing the lock path \"" + lock_path + "\"");
    auto queue = sorted_contenders(children.children, read_write);
    // Every read sent at once: one round trip for the lot.
    std::vector<std::unique_ptr<sync_slot<data_result>>> reads;
    for (const auto& c : queue) {
        reads.push_back(std::make_unique<sync_slot<data_result>>());
        client_.get_data(join_path(lock_path, c.name), false, completion<data_result>(reads.back().get()));
    }
    bool writer_seen = false;
    for (std::size_t i = 0; i < queue.size(); ++i) {
        zkr::error_code read_ec;
        auto [data] = reads[i]->wait(read_ec);
        if (read_ec == errc::no_node) continue;  // left meanwhile
        if (read_ec) throw zkr::system_error(read_ec, "zkr: reading lock node " + queue[i].name);
        participant p;
        p.node = queue[i].name;
        p.sequence = queue[i].sequence;
        p.reader = queue[i].kind == lock_kind::read;
        p.owner = decode_owner(data.data);
        if (queue[i].kind == lock_kind::read) p.holds = !writer_seen;
        else p.holds = out.empty();
        if (queue[i].kind != lock_kind::read) writer_seen = true;
        out.push_back(std::move(p));
    }
    return out;
}

lock_statistics lock_engine::statistics() const {
    return {counters_.acquisitions.load(), counters_.reentries.load(), counters_.wakeups.load(),
            counters_.nodes_created.load(), counters_.nodes_adopted.load(), counters_.stale_nodes_deleted.load(),
            counters_.delete_retries.load(), counters_.holds_lost.load()};
}

}  // namespace zkr::detail
