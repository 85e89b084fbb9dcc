// zkr::persistent_node: drives persistent_node_fsm (the sans-io machine: what is sent next, and
// why) through the session port, and keeps what the machine does not: the watch objects, the
// retry timer, the session subscription, the wait for the first create.
//
// Threads: replies and watch events on the C client's completion thread, session events and the
// retry timer on the session thread; each is fed to the machine under mutex_ (a leaf: requests
// are sent, and log lines written, after it is released). Nothing calls user code.
#include "zkr/persistent_node.hpp"

#include "nodes/persistent_node_fsm.hpp"
#include "nodes/unobserved_waits.hpp"
#include "session_port.hpp"
#include "toolkit/cleanup.hpp"
#include "toolkit/observed_operation.hpp"
#include "toolkit/recipe_path.hpp"
#include "toolkit/retry_timer.hpp"
#include "toolkit/sequence_queue.hpp"
#include "toolkit/waiters.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <optional>
#include <future>
#include <mutex>
#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

class persistent_node_impl : public std::enable_shared_from_this<persistent_node_impl> {
public:
    using request = persistent_node_fsm::request;

    persistent_node_impl(const client_options& client_options, session_port& port, std::string path, create_mode mode,
                         std::string data, persistent_node_options options)
        : client_options_(client_options),
          port_(port.weak_port()),
          executor_(port.executor()),
          cleanup_(cleanup_service::of(port)),
          path_(path),
          fsm_(std::move(path), mode, std::move(data), options.protection, options.create_parents,
               [] { return protection_prefix(random_uuid()); }),
          retry_(port.threads()) {}

    const std::string& path() const noexcept { return path_; }
    const std::weak_ptr<session_port>& port() const noexcept { return port_; }

    void start() {
        auto port = port_.lock();
        {
            std::lock_guard lock(mutex_);
            if (fsm_.closed()) throw std::logic_error("zkr::persistent_node::start: the node \"" + path_ + "\" is closed");
            if (started_) throw std::logic_error("zkr::persistent_node::start: the node \"" + path_ + "\" was started already");
            started_ = true;
        }
        if (!port || port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::persistent_node::start");
        std::weak_ptr<persistent_node_impl> weak = weak_from_this();
        auto sub = port->on_session_event([weak](const session_event& ev) {
            auto self = weak.lock();
            if (!self) return;
            switch (ev.state) {
                // A new session: our ephemeral node is going, every watch is gone.
                case connection_state::connected: self->feed([&](std::int64_t s) { return self->fsm_.ensure(s); }); break;
                // The same session: the server replays what the watch missed; only a chain
                // that did not end watching is run again.
                case connection_state::reconnected:
                    self->feed([&](std::int64_t s) -> request {
                        if (self->fsm_.watching()) return node_step::idle{};
                        return self->fsm_.ensure(s);
                    });
                    break;
                case connection_state::lost:
                    self->feed([&](std::int64_t) -> request {
                        self->fsm_.watch_lost();
                        return node_step::idle{};
                    });
                    break;
                default: break;
            }
        });
        {
            std::lock_guard lock(mutex_);
            session_subscription_ = std::move(sub);
        }
        if (port->is_connected()) feed([&](std::int64_t s) { return fsm_.ensure(s); });
    }

    bool wait_created(std::chrono::steady_clock::time_point deadline) {
        std::unique_lock lock(mutex_);
        wait_until(created_cv_, lock, deadline, [&] { return fsm_.made_once() || fsm_.closed(); });
        return fsm_.made_once();
    }

    void wait_created_async(completion<> done, asio::cancellation_slot slot) {
        error_code ec;
        {
            std::lock_guard lock(mutex_);
            if (!fsm_.made_once() && !fsm_.closed()) {
                auto key = created_waiters_.add(std::move(done));
                if (slot.is_connected()) {
                    slot.assign([weak = weak_from_this(), key](asio::cancellation_type) {
                        if (auto self = weak.lock()) self->cancel_wait(key);
                    });
                }
                return;
            }
            if (!fsm_.made_once()) ec = make_error_code(errc::cancelled);  // closed first
        }
        done(ec);
    }

    const asio::any_io_executor& executor() const noexcept { return executor_; }

    void cancel_wait(std::uint64_t key) {
        auto done = [&] {
            std::lock_guard lock(mutex_);
            return created_waiters_.take(key);
        }();
        if (done) (*done)(make_error_code(errc::cancelled));
    }

    std::string actual_path() const {
        std::lock_guard lock(mutex_);
        return fsm_.actual();
    }
    std::string data() const {
        std::lock_guard lock(mutex_);
        return fsm_.data();
    }

    void set_data(std::string data) {
        check_node_data(client_options_, path_, data, "zkr::persistent_node::set_data", "node data");
        std::string path;
        std::int64_t session;
        {
            std::lock_guard lock(mutex_);
            if (fsm_.closed()) throw std::logic_error("zkr::persistent_node::set_data: the node \"" + path_ + "\" is closed");
            path = fsm_.set_data(data);
            session = fsm_.node_session();
        }
        if (path.empty()) return;  // the create to come writes it
        auto port = port_.lock();
        if (!port) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::persistent_node::set_data");
        auto done = std::make_shared<std::promise<error_code>>();
        auto result = done->get_future();
        write(*port, path, std::move(data), session,
              completion<zkr::stat>(completion<zkr::stat>::inline_fn([done](error_code ec, zkr::stat) { done->set_value(ec); })));
        error_code ec = result.get();
        // Gone, or gone with its session (never written on a later one, where the path may be
        // someone else's): the node is being made again, with the new data.
        if (ec && ec != errc::no_node && !(session && ec == errc::session_expired))
            throw zkr::system_error(ec, "zkr::persistent_node::set_data \"" + path + "\"");
    }

    void close() {
        persistent_node_fsm::leftovers left;
        std::shared_ptr<watch_state> watch;
        subscription sub;
        std::map<std::uint64_t, completion<>> waiting;
        {
            std::lock_guard lock(mutex_);
            if (fsm_.closed()) return;
            left = fsm_.close();
            watch = std::exchange(watch_, nullptr);
            sub = std::move(session_subscription_);
            waiting = created_waiters_.take_all();
        }
        created_cv_.notify_all();
        waiter_list::complete(std::move(waiting), make_error_code(errc::cancelled));  // never made: made ones were told
        sub.reset();
        retry_.cancel();
        auto port = port_.lock();
        if (watch && port) {
            watch->clear_inline();
            port->remove_watch(watch, completion<>(completion<>::inline_fn([](error_code) {})));
        }
        if (!left.node.empty()) remove(left.node, left.node_session);
        if (!left.doubts.empty()) cleanup_->sweep(left.parent, std::move(left.doubts));
        if (port) carry_out(*port, std::move(left.next));  // settles an open create (then removes its node if ours)
    }

private:
    // Feeds the machine under the mutex (with the session as it is now), then carries out what it
    // asks for.
    template <class Fn>
    void feed(Fn&& fn) {
        auto port = port_.lock();
        if (!port) return;  // the client is gone, and every node and watch with it
        const std::int64_t session = port->session_id();
        request next;
        std::vector<std::pair<log::level, std::string>> lines;
        bool made;
        std::map<std::uint64_t, completion<>> made_waiters;
        {
            std::lock_guard lock(mutex_);
            if (!started_) return;
            next = fn(session);
            lines = fsm_.take_log();
            made = fsm_.made_once();
            if (made) made_waiters = created_waiters_.take_all();
        }
        for (auto& [level, line] : lines) log::write(level, "zkr::persistent_node \"" + path_ + "\": " + line);
        if (made) created_cv_.notify_all();
        waiter_list::complete(std::move(made_waiters), {});  // posted to their executors
        carry_out(*port, std::move(next));
    }

    // Writes to, and deletes, an ephemeral node of ours only on its session: on a later one its
    // path may hold another session's node. A node of no session outlives them all.
    static void write(session_port& port, const std::string& path, std::string data, std::int64_t session,
                      completion<zkr::stat> done) {
        if (session) port.set_data_on_session(session, path, std::move(data), any_version, std::move(done));
        else port.set_data(path, std::move(data), any_version, std::move(done));
    }
    void remove(const std::string& path, std::int64_t session) {
        if (session) cleanup_->guaranteed_delete_on(session, path);
        else cleanup_->delete_persistent(path);
    }

    void carry_out(session_port& port, request next) {
        auto self = shared_from_this();
        std::visit(
            [&](auto& step) {
                using T = std::decay_t<decltype(step)>;
                if constexpr (std::is_same_v<T, node_step::retry_later>) {
                    arm_retry();
                } else if constexpr (std::is_same_v<T, node_step::create>) {
                    port.create(step.path, std::move(step.data), step.mode,
                                completion<create_result>(completion<create_result>::inline_fn([self](error_code ec, create_result r) {
                                    self->feed([&](std::int64_t s) { return self->fsm_.created(s, ec, r.path, r.stat.ephemeral_owner); });
                                })));
                } else if constexpr (std::is_same_v<T, node_step::make_parents>) {
                    port.create_parents(step.path, create_mode::container, completion<>(completion<>::inline_fn([self](error_code ec) {
                                            self->feed([&](std::int64_t s) { return self->fsm_.parents_made(s, ec); });
                                        })));
                } else if constexpr (std::is_same_v<T, node_step::list>) {
                    port.get_children(step.parent, false,
                                      completion<children_result>(completion<children_result>::inline_fn(
                                          [self](error_code ec, children_result r) {
                                              self->feed([&](std::int64_t s) { return self->fsm_.listed(s, ec, r.children); });
                                          })));
                } else if constexpr (std::is_same_v<T, node_step::examine>) {
                    port.exists(step.path, false,
                                completion<exists_result>(completion<exists_result>::inline_fn([self](error_code ec, exists_result r) {
                                    self->feed([&](std::int64_t s) {
                                        return self->fsm_.examined(s, ec, r.exists, r.stat.ephemeral_owner);
                                    });
                                })));
                } else if constexpr (std::is_same_v<T, node_step::take_over>) {
                    write(port, step.path, std::move(step.data), step.session,
                          completion<zkr::stat>(completion<zkr::stat>::inline_fn([self](error_code ec, zkr::stat) {
                              self->feed([&](std::int64_t s) { return self->fsm_.taken_over(s, ec); });
                          })));
                } else if constexpr (std::is_same_v<T, node_step::watch>) {
                    port.exists(step.path, true,
                                completion<exists_result>(completion<exists_result>::inline_fn(
                                    [self](error_code ec, exists_result r) { self->watched(ec, std::move(r)); })));
                } else if constexpr (std::is_same_v<T, node_step::remove>) {
                    remove(step.path, step.session);  // ours, landed after close()
                }
            },
            next);
    }

    // The watch step's reply: the watch it set becomes the node's (the one before it is removed),
    // and its event is fed to the machine.
    void watched(error_code ec, exists_result r) {
        auto ws = watch_access::state(r.watch);
        auto port = port_.lock();
        if (!port) return;
        const std::int64_t session = port->session_id();
        bool closed, keep = false;
        std::shared_ptr<watch_state> replaced;
        request next;
        {
            std::lock_guard lock(mutex_);
            closed = fsm_.closed();
            keep = !closed && !ec && r.exists && ws;
            // A second chain's watch on the same node: the first one goes (the server keeps the
            // one both stand for), so close() removing the last leaves none on the server.
            if (keep) {
                replaced = std::exchange(watch_, ws);
                retry_delay_ = std::chrono::milliseconds(500);
            }
            next = fsm_.watched(session, ec, r.exists);
        }
        if (replaced && replaced != ws) {
            replaced->clear_inline();
            port->remove_watch(replaced, completion<>(completion<>::inline_fn([](error_code) {})));
        }
        if (closed) {
            if (ws) port->remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
            return;
        }
        if (keep) {
            ws->wait_inline([weak = weak_from_this(), raw = ws.get()](error_code wec, const watch_event& ev) {
                auto self = weak.lock();
                if (!self) return;
                self->feed([&](std::int64_t s) -> request {
                    if (self->watch_.get() != raw) return node_step::idle{};  // replaced, or closed
                    self->watch_.reset();
                    if (wec) {  // session lost or closed: the session events take it from here
                        self->fsm_.watch_lost();
                        return node_step::idle{};
                    }
                    return self->fsm_.watch_fired(s, ev.type);
                });
            });
        }
        carry_out(*port, std::move(next));
    }

    // 500 ms, doubled at each retry in a row up to 8 s (a node whose watch is refused retries
    // until watches free up: not twice a second for ever); back to 500 ms once it is watched.
    void arm_retry() {
        std::chrono::milliseconds delay;
        {
            std::lock_guard lock(mutex_);
            delay = retry_delay_;
            retry_delay_ = std::min(retry_delay_ * 2, std::chrono::milliseconds(8000));
        }
        retry_.arm(delay, [weak = weak_from_this()] {
            auto self = weak.lock();
            if (!self) return;
            auto port = self->port_.lock();
            if (port && port->is_connected()) self->feed([&](std::int64_t s) { return self->fsm_.ensure(s); });
        });
    }

    const client_options client_options_;  // for the checks of set_data (the node may outlive its client)
    std::weak_ptr<session_port> port_;
    const asio::any_io_executor executor_;  // where async waits complete by default
    std::shared_ptr<cleanup_service> cleanup_;
    const std::string path_;

    mutable std::mutex mutex_;  // a leaf
    std::condition_variable created_cv_;
    waiter_list created_waiters_;  // async_wait_created's
    persistent_node_fsm fsm_;
    bool started_ = false;
    std::shared_ptr<watch_state> watch_;  // the watch of the machine's last watch step
    retry_timer retry_;
    std::chrono::milliseconds retry_delay_{500};  // under mutex_
    subscription session_subscription_;
};

void start_wait_created(const std::shared_ptr<persistent_node_impl>& node, node_created_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    node->wait_created_async(observed_completion(observed_wait(node->port(), recipe_kind::persistent_node, node->path()),
                                                 completion<>(std::move(handler), node->executor())),
                             slot);
}

void start_unobserved_wait_created(const std::shared_ptr<persistent_node_impl>& node, node_created_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    node->wait_created_async(completion<>(std::move(handler), node->executor()), slot);
}

asio::any_io_executor node_executor(const persistent_node_impl& node) { return node.executor(); }

}  // namespace zkr::detail

namespace zkr {

persistent_node::persistent_node(client& c, std::string path, create_mode mode, std::string data,
                                 persistent_node_options options) {
    detail::check_recipe_path(c, path, "zkr::persistent_node", "node path");
    detail::check_node_data(c, path, data, "zkr::persistent_node", "node data");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::persistent_node on a closed client");
    impl_ = std::make_shared<detail::persistent_node_impl>(c.options(), *port, std::move(path), mode, std::move(data), options);
}

persistent_node::~persistent_node() { impl_->close(); }

void persistent_node::start() { impl_->start(); }
bool persistent_node::wait_created_unobserved(std::chrono::steady_clock::time_point deadline) { return impl_->wait_created(deadline); }

bool persistent_node::wait_created(std::chrono::steady_clock::time_point deadline) {
    return detail::observed_blocking_wait(detail::observed_wait(impl_->port(), recipe_kind::persistent_node, impl_->path()),
                                          deadline, [&] { return impl_->wait_created(deadline); });
}
std::string persistent_node::node_path() const { return impl_->actual_path(); }
std::string persistent_node::data() const { return impl_->data(); }
void persistent_node::set_data(std::string data) { impl_->set_data(std::move(data)); }
void persistent_node::close() { impl_->close(); }
const std::string& persistent_node::path() const noexcept { return impl_->path(); }

}  // namespace zkr
