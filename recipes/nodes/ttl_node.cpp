// zkr::ttl_node: a persistent_node of create_mode::container, and a renewal loop for its TTL
// child: create it (or, once it exists, set its data, which renews its TTL) every
// ttl / touch_schedule_factor; when the container is missing (not made yet, or made again after
// the child expired), wait for it with an exists watch and renew at once.
//
// Threads: the loop's timer and the container wait's start and completion on the session thread
// (so the wait's cancellation, emitted there too, never races its start), replies on the C
// client's completion thread; the state is guarded by mutex_ (a leaf: requests are sent after it
// is released). Nothing calls user code.
#include "zkr/ttl_node.hpp"

#include "request_limits.hpp"
#include "session_port.hpp"
#include "toolkit/node_wait.hpp"
#include "toolkit/observed_operation.hpp"
#include "toolkit/recipe_path.hpp"
#include "toolkit/retry_timer.hpp"
#include "toolkit/waiters.hpp"
#include "zkr/detail/node_wait.hpp"
#include "zkr/path.hpp"
#include "zkr/persistent_node.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

class ttl_node_impl : public std::enable_shared_from_this<ttl_node_impl> {
public:
    ttl_node_impl(client& c, session_port& port, std::string path, std::chrono::milliseconds ttl, std::string data,
                  const ttl_node_options& options)
        : port_(port.weak_port()),
          executor_(port.executor()),
          threads_(port.threads()),
          path_(path),
          child_(join_path(path, options.child_name)),
          ttl_(ttl),
          period_(std::max<std::chrono::milliseconds>(ttl / options.touch_schedule_factor, std::chrono::milliseconds(1))),
          node_(c, std::move(path), create_mode::container, std::move(data),
                persistent_node_options{.protection = false, .create_parents = options.create_parents}),
          retry_(port.threads()) {}

    void start() {
        {
            std::lock_guard lock(mutex_);
            if (closed_) throw std::logic_error("zkr::ttl_node::start: the node " + quoted_path(path_) + " is closed");
            if (started_) throw std::logic_error("zkr::ttl_node::start: the node " + quoted_path(path_) + " was started already");
            started_ = true;
        }
        node_.start();  // sent first: on one connection the container is made before the child
        renew();
    }

    bool wait_created(std::chrono::steady_clock::time_point deadline) {
        if (!node_.wait_created_unobserved(deadline)) return false;  // the observer hears of the TTL node's wait
        std::unique_lock lock(mutex_);
        wait_until(renewed_cv_, lock, deadline, [&] { return touches_ > 0 || refused_ || closed_; });
        if (refused_ && touches_ == 0) throw zkr::system_error(refused_, refused_message());
        return touches_ > 0 && !closed_;
    }

    // Done once the child was first created or touched (the container exists then), refused for
    // good, or closed.
    void wait_created_async(completion<> done, asio::cancellation_slot slot) {
        error_code ec;
        {
            std::lock_guard lock(mutex_);
            if (touches_ == 0 && !refused_ && !closed_) {
                auto key = created_waiters_.add(std::move(done));
                if (slot.is_connected()) {
                    slot.assign([weak = weak_from_this(), key](asio::cancellation_type) {
                        if (auto self = weak.lock()) self->cancel_wait(key);
                    });
                }
                return;
            }
            ec = settled_error_locked();
        }
        done(ec);
    }

    const asio::any_io_executor& executor() const noexcept { return executor_; }

    std::string data() const { return node_.data(); }
    void set_data(std::string data) { node_.set_data(std::move(data)); }

    void close() {
        std::map<std::uint64_t, completion<>> waiting;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            closed_ = true;
            waiting = created_waiters_.take_all();
        }
        renewed_cv_.notify_all();
        waiter_list::complete(std::move(waiting), make_error_code(errc::cancelled));
        retry_.cancel();
        // The container wait, if any, takes its watch off; on the session thread, where it started.
        asio::post(threads_->session, [self = shared_from_this()] { self->stop_wait_.emit(asio::cancellation_type::all); });
        // Deletes the container if it has no child (it would never be reaped); a renewal in flight
        // was sent first and lands first, so a node with a child is left to expire by its TTL.
        node_.close();
    }

    const std::string& path() const noexcept { return path_; }
    const std::weak_ptr<session_port>& port() const noexcept { return port_; }
    std::chrono::milliseconds ttl() const noexcept { return ttl_; }
    std::uint64_t touches() const {
        std::lock_guard lock(mutex_);
        return touches_;
    }

private:
    // What an async wait for the first renewal completes with, once it is settled.
    error_code settled_error_locked() const {
        if (touches_ > 0 && !closed_) return {};
        if (refused_ && touches_ == 0) return refused_;
        return make_error_code(errc::cancelled);
    }
    std::string refused_message() const {
        return "zkr::ttl_node " + quoted_path(path_) + ": the server does not make TTL nodes (" + quoted_path(child_) +
               "): it needs zookeeper.extendedTypesEnabled=true (the system property, or extendedTypesEnabled=true in zoo.cfg)";
    }
    void cancel_wait(std::uint64_t key) {
        auto done = [&] {
            std::lock_guard lock(mutex_);
            return created_waiters_.take(key);
        }();
        if (done) (*done)(make_error_code(errc::cancelled));
    }

    // Creates the child; if it exists, touches it.
    void renew() {
        auto port = port_.lock();
        {
            std::lock_guard lock(mutex_);
            if (closed_ || !port) return;
        }
        std::weak_ptr<ttl_node_impl> weak = weak_from_this();
        port->create_ttl(child_, {}, create_mode::persistent, ttl_,
                         completion<create_result>(completion<create_result>::inline_fn([weak](error_code ec, create_result) {
                             auto self = weak.lock();
                             if (!self) return;
                             if (ec == errc::node_exists) return self->touch();
                             self->renewed(ec);
                         })));
    }

    void touch() {
        auto port = port_.lock();
        if (!port) return;
        std::weak_ptr<ttl_node_impl> weak = weak_from_this();
        port->set_data(child_, {}, any_version, completion<zkr::stat>(completion<zkr::stat>::inline_fn([weak](error_code ec, zkr::stat) {
                           auto self = weak.lock();
                           if (!self) return;
                           // Expired between the create and this: make it again.
                           if (ec == errc::no_node) return self->renew();
                           self->renewed(ec);
                       })));
    }

    void renewed(error_code ec) {
        std::map<std::uint64_t, completion<>> settled;
        error_code settled_ec;
        {
            std::lock_guard lock(mutex_);
            if (!ec) ++touches_;
            if (ec == errc::unimplemented) refused_ = ec;  // for good: nothing more to try
            if (touches_ > 0 || refused_) {
                settled = created_waiters_.take_all();
                settled_ec = settled_error_locked();
            }
        }
        renewed_cv_.notify_all();
        waiter_list::complete(std::move(settled), settled_ec);
        if (ec == errc::unimplemented || ec == errc::client_closed) return;
        std::weak_ptr<ttl_node_impl> weak = weak_from_this();
        if (ec == errc::no_node) {
            // The container is not there (not made yet, or being made again): renew once it is.
            asio::post(threads_->session, [weak] {
                if (auto self = weak.lock()) self->wait_for_container();
            });
            return;
        }
        // Renewed, or failed for a reason the next round may not meet (the retry policy gave up,
        // the session changed): again after a period.
        retry_.arm(period_, [weak] {
            if (auto self = weak.lock()) self->renew();
        });
    }

    // On the session thread.
    void wait_for_container() {
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
        }
        std::weak_ptr<ttl_node_impl> weak = weak_from_this();
        start_unobserved_node_wait(port_, threads_->session.get_executor(), path_, true,
                                   asio::bind_cancellation_slot(stop_wait_.slot(), [weak](error_code ec) {
                                       auto self = weak.lock();
                                       if (!self || ec == errc::cancelled || ec == errc::client_closed) return;
                                       if (!ec) return self->renew();
                                       self->retry_.arm(self->period_, [weak] {
                                           if (auto again = weak.lock()) again->renew();
                                       });
                                   }));
    }

    std::weak_ptr<session_port> port_;
    const asio::any_io_executor executor_;  // where async waits complete by default
    std::shared_ptr<runtime> threads_;
    const std::string path_, child_;
    const std::chrono::milliseconds ttl_, period_;
    persistent_node node_;
    retry_timer retry_;
    asio::cancellation_signal stop_wait_;  // touched on the session thread only

    mutable std::mutex mutex_;  // a leaf
    std::condition_variable renewed_cv_;
    waiter_list created_waiters_;  // async_wait_created's
    bool started_ = false, closed_ = false;
    std::uint64_t touches_ = 0;
    error_code refused_;
};

void start_wait_created(const std::shared_ptr<ttl_node_impl>& node, ttl_created_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    node->wait_created_async(observed_completion(observed_wait(node->port(), recipe_kind::ttl_node, node->path()),
                                                 completion<>(std::move(handler), node->executor())),
                             slot);
}

asio::any_io_executor ttl_executor(const ttl_node_impl& node) { return node.executor(); }

}  // namespace zkr::detail

namespace zkr {

ttl_node::ttl_node(client& c, std::string path, std::chrono::milliseconds ttl, std::string data, ttl_node_options options) {
    detail::check_recipe_path(c, path, "zkr::ttl_node", "node path");
    detail::check_node_data(c, path, data, "zkr::ttl_node", "node data");
    if (std::string why = detail::ttl_problem(create_mode::persistent, ttl); !why.empty())
        throw std::invalid_argument("zkr::ttl_node " + quoted_path(path) + ": " + why);
    const auto& child = detail::checked_node_name(options.child_name, "zkr::ttl_node", "child name");
    detail::check_recipe_path(c, join_path(path, child), "zkr::ttl_node", "child path");
    if (options.touch_schedule_factor < 2)
        throw std::invalid_argument("zkr::ttl_node " + quoted_path(path) + ": touch_schedule_factor must be at least 2 (it is " +
                                    std::to_string(options.touch_schedule_factor) + ")");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::ttl_node on a closed client");
    impl_ = std::make_shared<detail::ttl_node_impl>(c, *port, std::move(path), ttl, std::move(data), options);
}

ttl_node::~ttl_node() { impl_->close(); }

void ttl_node::start() { impl_->start(); }
bool ttl_node::wait_created(std::chrono::steady_clock::time_point deadline) {
    // Throws when refused for good (the server has no TTL nodes): counted failed.
    return detail::observed_blocking_wait(detail::observed_wait(impl_->port(), recipe_kind::ttl_node, impl_->path()),
                                          deadline, [&] { return impl_->wait_created(deadline); });
}
std::string ttl_node::data() const { return impl_->data(); }
void ttl_node::set_data(std::string data) { impl_->set_data(std::move(data)); }
void ttl_node::close() { impl_->close(); }
const std::string& ttl_node::path() const noexcept { return impl_->path(); }
std::chrono::milliseconds ttl_node::ttl() const noexcept { return impl_->ttl(); }
std::uint64_t ttl_node::touches() const { return impl_->touches(); }

}  // namespace zkr
