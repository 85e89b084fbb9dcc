#include "fsm_runner.hpp"

#include "listing_coalescer.hpp"

namespace zkr::detail {
namespace {

// Replies of requests sent back to back, joined: the last one in hands the lot on.
template <class Replies>
struct joined {
    std::mutex mutex;
    int pending;
    Replies replies;
    explicit joined(int n) : pending(n) {}
    // Records under the lock; true for the last reply in.
    template <class Record>
    bool arrive(Record&& record) {
        std::lock_guard lock(mutex);
        record(replies);
        return --pending == 0;
    }
};

// The listing of a step sent back to back with a write, joined with that write's reply.
template <class Replies>
void list_joined(session_port& port, const std::string& path, const std::shared_ptr<joined<Replies>>& j,
                 const step_io::reply_fn& done) {
    listing_coalescer::list(port, path, [j, done](error_code ec, const listing& l) {
        if (j->arrive([&](auto& x) {
                x.list_error = ec;
                x.children = l;
            }))
            done(std::move(j->replies));
    });
}

}  // namespace

void step_io::send(session_port& port, const step::create_and_list& s, reply_fn done) {
    // Sent back to back: the server answers a session's requests in order, so the listing
    // already contains our node. One round trip when uncontended.
    auto j = std::make_shared<joined<reply::created_and_listed>>(2);
    port.create(s.path, s.data, create_mode::ephemeral_sequential,
                completion<create_result>(completion<create_result>::inline_fn([j, done](error_code ec, create_result r) {
                    // The machine learns of its node now, not only once the (shared) listing is
                    // in too: a give-up meanwhile deletes it before answering.
                    done(reply::create_answered{ec, r});
                    if (j->arrive([&](auto& x) {
                            x.create_error = ec;
                            x.created = std::move(r);
                        }))
                        done(std::move(j->replies));
                })));
    // Coalesced with the client's other listings of the path, but always one sent after the
    // create (listing_coalescer.hpp): it shows our node.
    list_joined(port, s.list, j, done);
}

void step_io::send(session_port& port, const step::create_parents& s, reply_fn done) {
    port.create_parents(s.path, create_mode::container, completion<>(completion<>::inline_fn([done](error_code ec) {
                            done(reply::parents_created{ec});
                        })));
}

void step_io::send(session_port& port, const step::multi_and_list& s, reply_fn done) {
    // Back to back, as create_and_list: the listing shows what the transaction made.
    auto j = std::make_shared<joined<reply::multi_and_listed>>(2);
    port.multi(s.ops, completion<std::vector<multi_op_result>>(completion<std::vector<multi_op_result>>::inline_fn(
                          [j, done](error_code ec, std::vector<multi_op_result> r) {
                              done(reply::multi_answered{ec, r});  // as create_answered
                              if (j->arrive([&](auto& x) {
                                      x.error = ec;
                                      x.results = std::move(r);
                                  }))
                                  done(std::move(j->replies));
                          })));
    // Coalesced as create_and_list's: a listing sent after the transaction, showing what it made.
    list_joined(port, s.list, j, done);
}

void step_io::send(session_port& port, const step::list& s, reply_fn done) {
    if (!s.watch) {
        // Coalesced: a listing sent after this step was asked for (listing_coalescer.hpp).
        return listing_coalescer::list(port, s.path, [done](error_code ec, const listing& l) { done(reply::listed{ec, l}); });
    }
    port.get_children(s.path, s.watch,
                      completion<children_result>(completion<children_result>::inline_fn(
                          [this, watch = s.watch, done](error_code ec, children_result r) {
                              if (watch) {
                                  std::lock_guard lock(mutex_);
                                  data_watch_.reset();
                                  child_watch_ = ec ? nullptr : watch_access::state(r.watch);
                              }
                              done(reply::listed{ec, std::move(r.children)});
                          })));
}

void step_io::send(session_port& port, const step::check_owner& s, reply_fn done) {
    port.exists(s.node, false, completion<exists_result>(completion<exists_result>::inline_fn([done](error_code ec, exists_result r) {
                    done(reply::owner{ec, std::move(r)});
                })));
}

namespace {

// The replies of a watch step, joined.
struct watch_replies {
    error_code data_error, child_error, own_error;
    std::string data;
    std::shared_ptr<watch_state> data_watch, child_watch, own_watch;
};

}  // namespace

void step_io::send(session_port& port, const step::watch& s, reply_fn done) {
    // Back to back, so waiting costs one round trip. The child watch sees the node go (a
    // sequence node, being ephemeral, never has children: its child watch fires only when it
    // goes); the data watch, when the mark is wanted, sees it marked holding — the child watch
    // still waits for the departure after that.
    watch_replies kept;
    {
        // Set again after one of them fired: the other may still be armed on this node. Keep it
        // rather than set a second one, which removing ours later would not take off the server.
        std::lock_guard lock(mutex_);
        if (s.want_mark && data_watch_ && data_watch_->path == s.node) kept.data_watch = data_watch_;
        if (child_watch_ && child_watch_->path == s.node) kept.child_watch = child_watch_;
        if (own_watch_ && own_watch_->path == s.own) kept.own_watch = own_watch_;  // once per node
    }
    bool send_data = s.want_mark && !kept.data_watch;
    bool send_child = !kept.child_watch;
    bool send_own = !s.own.empty() && !kept.own_watch;
    // + 1: released below, once all are sent.
    auto j = std::make_shared<joined<watch_replies>>(int(send_data) + int(send_child) + int(send_own) + 1);
    j->replies = std::move(kept);
    auto port_ref = port.weak_port();
    auto complete = [this, j, done, port_ref, want_mark = s.want_mark] {
        auto& x = j->replies;
        error_code step_error = want_mark ? x.data_error : x.child_error;
        bool own_gone = x.own_error == errc::no_node;
        // Our node's watch could not be set for another reason (the connection): the step failed.
        if (!step_error && x.own_error && !own_gone) step_error = x.own_error;
        bool child_set = !x.child_error && x.child_watch;
        bool data_set = want_mark && !x.data_error;
        auto port = port_ref.lock();
        if (step_error && child_set) {
            // No use for it alone: the step failed. Take it off rather than leave it on the server.
            if (port) port->remove_watch(x.child_watch, completion<>(completion<>::inline_fn([](error_code) {})));
            child_set = false;
        }
        if (step_error && data_set && x.own_error) {
            if (port) port->remove_watch(x.data_watch, completion<>(completion<>::inline_fn([](error_code) {})));
            data_set = false;
        }
        {
            std::lock_guard lock(mutex_);
            data_watch_ = data_set ? x.data_watch : nullptr;
            child_watch_ = child_set ? x.child_watch : nullptr;
            own_watch_ = x.own_error ? nullptr : x.own_watch;
        }
        done(reply::watch_set{step_error, data_set, data_set ? std::move(x.data) : std::string(), child_set, own_gone});
    };
    if (send_own) {
        // First: a reply that finds our node shows it was there before the others were read.
        port.get_children(s.own, true, completion<children_result>(completion<children_result>::inline_fn(
                                           [j, complete](error_code ec, children_result r) {
                                               if (j->arrive([&](auto& x) {
                                                       x.own_error = ec;
                                                       if (!ec) x.own_watch = watch_access::state(r.watch);
                                                   }))
                                                   complete();
                                           })));
    }
    if (send_data) {
        port.get_data(s.node, true, completion<data_result>(completion<data_result>::inline_fn(
                                        [j, complete](error_code ec, data_result r) {
                                            if (j->arrive([&](auto& x) {
                                                    x.data_error = ec;
                                                    x.data = std::move(r.data);
                                                    if (!ec) x.data_watch = watch_access::state(r.watch);
                                                }))
                                                complete();
                                        })));
    }
    if (send_child) {
        port.get_children(s.node, true, completion<children_result>(completion<children_result>::inline_fn(
                                            [j, complete](error_code ec, children_result r) {
                                                if (j->arrive([&](auto& x) {
                                                        x.child_error = ec;
                                                        if (!ec) x.child_watch = watch_access::state(r.watch);
                                                    }))
                                                    complete();
                                            })));
    }
    if (j->arrive([](auto&) {})) complete();
}

void step_io::wait(std::shared_ptr<step_io> self, reply_fn done) {
    std::shared_ptr<watch_state> data, child, own;
    {
        std::lock_guard lock(mutex_);
        data = data_watch_;
        child = child_watch_;
        own = own_watch_;
        wait_done_ = std::move(done);
    }
    // Registered outside the mutex: a watch that already ended calls back at once. Our own node
    // first: should both have ended, its deletion came first.
    for (auto* w : {&own, &data, &child}) {
        if (*w) (*w)->wait_inline([self, ws = w->get()](error_code ec, const watch_event& ev) { self->fired(ws, ec, ev); });
    }
}

void step_io::fired(const watch_state* w, error_code ec, const watch_event& ev) {
    bool own = false, child = false;
    reply_fn done;
    {
        std::lock_guard lock(mutex_);
        // Not (or no longer) a watch of the current step: ignored.
        if (own_watch_.get() == w) own = true;
        else if (child_watch_.get() == w) child = true;
        else if (data_watch_.get() != w || !w) return;
        (own ? own_watch_ : child ? child_watch_ : data_watch_).reset();
        // A departure or a lost session ends both watches of the watched node: pass that on
        // once. A lost session ends our own node's too.
        if (ec || (!own && ev.type == event_type::deleted)) {
            data_watch_.reset();
            child_watch_.reset();
        }
        if (ec) own_watch_.reset();
        done = wait_done_;
    }
    done(reply::watch_fired{ec, ev.type, child, own});
}

void step_io::release_own() {
    std::shared_ptr<watch_state> own;
    {
        std::lock_guard lock(mutex_);
        own = std::exchange(own_watch_, nullptr);
    }
    if (own) own->clear_inline();  // outside our mutex: it takes the watch's
}

void step_io::remove(session_port& port, reply_fn done) {
    std::vector<std::shared_ptr<watch_state>> armed;
    {
        std::lock_guard lock(mutex_);
        for (auto* w : {&data_watch_, &child_watch_}) {
            if (*w) armed.push_back(std::exchange(*w, nullptr));
        }
    }
    if (armed.empty()) return done(reply::watch_removed{});
    struct removals {
        std::mutex mutex;
        int pending;
        error_code session_error;  // the first removal that failed with its session
    };
    auto r = std::make_shared<removals>();
    r->pending = static_cast<int>(armed.size());
    for (auto& ws : armed) {
        port.remove_watch(ws, completion<>(completion<>::inline_fn([r, done](error_code ec) {
                              error_code seen;
                              {
                                  std::lock_guard lock(r->mutex);
                                  if (ec && is_session_lost(ec) && !r->session_error) r->session_error = ec;
                                  if (--r->pending > 0) return;
                                  seen = r->session_error;
                              }
                              done(reply::watch_removed{seen});
                          })));
    }
}

}  // namespace zkr::detail
