#include "acquisition.hpp"

#include "owner_data.hpp"

#include <boost/asio/post.hpp>

namespace zkr::detail {
namespace asio = boost::asio;

namespace {

// The two replies of create_and_list, joined.
struct create_and_list_replies {
    std::mutex mutex;
    int pending = 2;
    error_code create_error, list_error;
    create_result created;
    std::vector<std::string> children;
};

}  // namespace

acquisition::acquisition(std::shared_ptr<lock_engine> engine, acquire_options options, std::uint64_t owner,
                         bool async_owned, lock_engine::done_fn done)
    : engine_(std::move(engine)),
      client_(engine_->client()),
      lock_path_(options.lock_path),
      owner_data_(options.owner_data),
      kind_(options.kind),
      owner_(owner),
      async_owned_(async_owned),
      fsm_(std::move(options), &random_uuid),
      done_(std::move(done)) {}

std::int64_t acquisition::session() const {
    auto c = client_.lock();
    return c ? c->session_id() : 0;
}

void acquisition::start(std::optional<std::chrono::steady_clock::time_point> deadline) {
    if (deadline) {
        timer_ = std::make_shared<asio::steady_timer>(engine_->session_context());
        asio::post(engine_->session_context(), [weak = weak_from_this(), timer = timer_, deadline = *deadline] {
            timer->expires_at(deadline);
            timer->async_wait([weak](error_code ec) {
                if (auto self = weak.lock(); self && !ec) self->give_up(make_error_code(errc::timed_out));
            });
        });
    }
    feed([](acquire_fsm& f) { return f.start(); });
}

void acquisition::give_up(error_code reason) {
    action a;
    {
        std::lock_guard lock(mutex_);
        if (machine_done_ || answered_) return;
        a = fsm_.abandon(reason);
        if (a.is<step::done>()) machine_done_ = true;
    }
    // The caller does not wait for the cleanup: a reply still due may take as long as the
    // network does.
    answer(reason, nullptr);
    run(std::move(a));
}

// Hands one event to the state machine and carries out what it says. Never called with the
// mutex held: replies may come back on this very thread.
template <class Event>
void acquisition::feed(Event&& event) {
    action a;
    {
        std::lock_guard lock(mutex_);
        if (machine_done_) return;
        a = event(fsm_);
        if (a.is<step::done>()) machine_done_ = true;
    }
    run(std::move(a));
}

void acquisition::run(action a) {
    for (auto& path : a.deletes) engine_->guaranteed_delete(std::move(path));
    if (a.is<step::none>()) return;
    if (a.is<step::done>()) return finish(a.as<step::done>());
    auto c = client_.lock();
    if (!c) {
        // The client is gone, and its session with every node of ours.
        {
            std::lock_guard lock(mutex_);
            machine_done_ = true;
        }
        answer(make_error_code(errc::client_closed), nullptr);
        return;
    }
    auto self = shared_from_this();
    std::visit(
        [&](const auto& s) {
            using S = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<S, step::create_and_list>) {
                send(s, *c);
            } else if constexpr (std::is_same_v<S, step::create_parents>) {
                c->create_parents(s.path, create_mode::container, completion<>(completion<>::inline_fn([self](error_code ec) {
                    self->feed([&](acquire_fsm& f) { return f.on_parents_created(ec); });
                })));
            } else if constexpr (std::is_same_v<S, step::list>) {
                c->get_children(s.path, false, completion<children_result>([self](error_code ec, children_result r) {
                    self->feed([&](acquire_fsm& f) { return f.on_listed(ec, r.children, self->session()); });
                }));
            } else if constexpr (std::is_same_v<S, step::check_owner>) {
                c->exists(s.node, false, completion<exists_result>([self](error_code ec, exists_result r) {
                    self->feed([&](acquire_fsm& f) { return f.on_owner(ec, r, self->session()); });
                }));
            } else if constexpr (std::is_same_v<S, step::watch>) {
                send(s, *c);
            } else if constexpr (std::is_same_v<S, step::wait>) {
                std::shared_ptr<watch_state> data, child;
                {
                    std::lock_guard lock(mutex_);
                    data = watch_;
                    child = child_watch_;
                }
                // Registered outside the mutex: a watch that already ended calls back at once.
                if (data) {
                    data->wait_inline([self, w = data.get()](error_code ec, const watch_event& ev) {
                        self->on_watch_fired(w, false, ec, ev);
                    });
                }
                if (child) {
                    child->wait_inline([self, w = child.get()](error_code ec, const watch_event& ev) {
                        self->on_watch_fired(w, true, ec, ev);
                    });
                }
            } else if constexpr (std::is_same_v<S, step::remove_watch>) {
                std::vector<std::shared_ptr<watch_state>> armed;
                {
                    std::lock_guard lock(mutex_);
                    for (auto* w : {&watch_, &child_watch_}) {
                        if (*w) armed.push_back(std::exchange(*w, nullptr));
                    }
                }
                if (armed.empty()) {
                    feed([](acquire_fsm& f) { return f.on_watch_removed(); });
                    return;
                }
                auto pending = std::make_shared<std::atomic<int>>(static_cast<int>(armed.size()));
                for (auto& ws : armed) {
                    c->remove_watch(ws, completion<>([self, pending](error_code) {
                        if (--*pending == 0) self->feed([](acquire_fsm& f) { return f.on_watch_removed(); });
                    }));
                }
            }
        },
        a.next);
}

void acquisition::send(const step::create_and_list& s, client_impl& c) {
    // Sent back to back: the server answers a session's requests in order, so the listing
    // already contains our node. One round trip when uncontended.
    auto self = shared_from_this();
    auto replies = std::make_shared<create_and_list_replies>();
    auto joined = [self, replies] {
        {
            std::lock_guard lock(replies->mutex);
            if (--replies->pending > 0) return;
        }
        self->feed([&](acquire_fsm& f) {
            return f.on_created_and_listed(replies->create_error, replies->created, replies->list_error,
                                           replies->children, self->session());
        });
    };
    c.create(s.path, owner_data_, create_mode::ephemeral_sequential,
             completion<create_result>([self, replies, joined](error_code ec, create_result r) {
                 if (!ec) ++self->engine_->counters_.nodes_created;
                 {
                     std::lock_guard lock(replies->mutex);
                     replies->create_error = ec;
                     replies->created = std::move(r);
                 }
                 joined();
             }));
    c.get_children(lock_path_, false, completion<children_result>([replies, joined](error_code ec, children_result r) {
        {
            std::lock_guard lock(replies->mutex);
            replies->list_error = ec;
            replies->children = std::move(r.children);
        }
        joined();
    }));
}

namespace {

// The two replies of a watch step, joined.
struct watch_replies {
    std::mutex mutex;
    int pending = 2;
    error_code data_error, child_error;
    std::string data;
    std::shared_ptr<watch_state> data_watch, child_watch;
};

}  // namespace

void acquisition::send(const step::watch& s, client_impl& c) {
    // Back to back, so waiting costs one round trip. The child watch sees the node go (a lock
    // node, being ephemeral, never has children: its child watch fires only when it goes); the
    // data watch, when the mark is wanted, sees it marked holding — the child watch still
    // waits for the departure after that.
    auto self = shared_from_this();
    auto replies = std::make_shared<watch_replies>();
    {
        // Set again after one of them fired: the other may still be armed on this node. Keep it
        // rather than set a second one, which removing ours later would not take off the server.
        std::lock_guard lock(mutex_);
        if (s.want_mark && watch_ && watch_->path == s.node) replies->data_watch = watch_;
        if (child_watch_ && child_watch_->path == s.node) replies->child_watch = child_watch_;
    }
    bool send_data = s.want_mark && !replies->data_watch;
    bool send_child = !replies->child_watch;
    replies->pending = int(send_data) + int(send_child) + 1;  // + 1: released below, once all are sent
    auto joined = [self, replies, want_mark = s.want_mark] {
        {
            std::lock_guard lock(replies->mutex);
            if (--replies->pending > 0) return;
        }
        error_code step_error = want_mark ? replies->data_error : replies->child_error;
        bool child_set = !replies->child_error && replies->child_watch;
        if (step_error && child_set) {
            // No use for it alone: the step failed. Take it off rather than leave it on the server.
            if (auto c = self->client_.lock()) c->remove_watch(replies->child_watch, completion<>([](error_code) {}));
            child_set = false;
        }
        bool data_set = want_mark && !replies->data_error;
        {
            std::lock_guard lock(self->mutex_);
            self->watch_ = data_set ? replies->data_watch : nullptr;
            self->child_watch_ = child_set ? replies->child_watch : nullptr;
        }
        bool marked = data_set && is_marked_holding(replies->data);
        bool zkr_node = data_set && is_zkr_owner_data(replies->data);
        self->feed([&](acquire_fsm& f) {
            return f.on_watch_set(step_error, self->session(), marked, child_set, zkr_node);
        });
    };
    if (send_data) {
        c.get_data(s.node, true, completion<data_result>([replies, joined](error_code ec, data_result r) {
            {
                std::lock_guard lock(replies->mutex);
                replies->data_error = ec;
                replies->data = std::move(r.data);
                if (!ec) replies->data_watch = watch_access::state(r.watch);
            }
            joined();
        }));
    }
    if (send_child) {
        c.get_children(s.node, true, completion<children_result>([replies, joined](error_code ec, children_result r) {
            {
                std::lock_guard lock(replies->mutex);
                replies->child_error = ec;
                if (!ec) replies->child_watch = watch_access::state(r.watch);
            }
            joined();
        }));
    }
    joined();
}

void acquisition::on_watch_fired(const watch_state* fired, bool child_watch, error_code ec, const watch_event& ev) {
    {
        std::lock_guard lock(mutex_);
        auto& mine = child_watch ? child_watch_ : watch_;
        if (mine.get() != fired) return;  // not (or no longer) a watch of the current step
        mine.reset();
        // A departure or a lost session ends both watches: pass that on once.
        if (ec || ev.type == event_type::deleted) {
            watch_.reset();
            child_watch_.reset();
        }
    }
    if (!ec && ev.type == event_type::deleted) engine_->count_wakeup();
    feed([&](acquire_fsm& f) { return f.on_watch_event(ec, ev.type, session(), child_watch); });
}

void acquisition::mark_holding(const std::string& node_path) {
    // Sent before the caller learns it holds, so before its release: the server applies the
    // mark first. Best effort: should it fail, the successor lists when we go, as without it.
    auto c = client_.lock();
    if (!c) return;
    ++engine_->counters_.holding_marks;
    c->set_data(node_path, holding_mark(owner_data_), 0, completion<zkr::stat>([](error_code, zkr::stat) {}));
}

void acquisition::finish(const step::done& d) {
    if (!d.sweep.empty()) engine_->sweep(lock_path_, d.sweep);
    if (timer_) asio::post(engine_->session_context(), [t = timer_] { t->cancel(); });
    engine_->count_acquisition_stats(fsm_.stale_deleted(), fsm_.adopted(), d.acquired ? fsm_.listing_free_handoffs() : 0);
    if (!d.acquired) {
        answer(d.error, nullptr);
        return;
    }
    auto h = std::make_shared<hold>();
    h->lock_path = lock_path_;
    h->node_path = fsm_.node_path();
    h->kind = kind_;
    h->owner = owner_;
    h->async_owned = async_owned_;
    h->session = fsm_.session();
    h->czxid = fsm_.czxid();
    if (d.mark) mark_holding(h->node_path);
    engine_->register_hold(h, fsm_.pins_write_node());
    // The machine never reports acquired once given up, so the caller is still waiting; should
    // that ever be wrong, the hold must not outlive its forgotten owner.
    if (!answer({}, h)) engine_->release_all(h, std::nullopt);
}

bool acquisition::answer(error_code ec, std::shared_ptr<hold> h) {
    lock_engine::done_fn done;
    {
        std::lock_guard lock(mutex_);
        if (answered_) return false;
        answered_ = true;
        done = std::move(done_);
    }
    done(ec, std::move(h));
    return true;
}

}  // namespace zkr::detail
