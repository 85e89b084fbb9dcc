// zkr::persistent_node: one chain of requests at a time keeps the node there — create; on
// node_exists, read who owns the node in the way (adopt, replace or wait it out); then an exists
// watch on the node, whose deletion starts the chain again. A request for the chain while one
// runs asks for one more run once it ends.
//
// Threads: replies and watch events on the C client's completion thread, session events and the
// retry timer on the session thread; the state is guarded by mutex_ (a leaf: requests are sent
// after it is released). Nothing calls user code.
#include "zkr/persistent_node.hpp"

#include "session_port.hpp"
#include "toolkit/cleanup.hpp"
#include "toolkit/recipe_path.hpp"
#include "toolkit/retry_timer.hpp"
#include "toolkit/sequence_queue.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"


#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

namespace {
create_mode without_sequence(create_mode m) {
    switch (m) {
        case create_mode::ephemeral_sequential: return create_mode::ephemeral;
        case create_mode::persistent_sequential: return create_mode::persistent;
        default: return m;
    }
}
bool is_ephemeral(create_mode m) { return m == create_mode::ephemeral || m == create_mode::ephemeral_sequential; }
std::string hex(std::int64_t session) {
    std::ostringstream s;
    s << "0x" << std::hex << session;
    return s.str();
}
}  // namespace

class persistent_node_impl : public std::enable_shared_from_this<persistent_node_impl> {
public:
    persistent_node_impl(const client_options& client_options, session_port& port, std::string path, create_mode mode,
                         std::string data, persistent_node_options options)
        : client_options_(client_options),
          port_(port.weak_port()),
          cleanup_(cleanup_service::of(port)),
          path_(std::move(path)),
          mode_(mode),
          protection_(options.protection || is_sequential(mode)),
          create_parents_(options.create_parents),
          data_(std::move(data)),
          retry_(port.threads()) {
        if (protection_) prefix_ = protection_prefix(random_uuid());
    }

    const std::string& path() const noexcept { return path_; }

    void start() {
        auto port = port_.lock();
        {
            std::lock_guard lock(mutex_);
            if (closed_) throw std::logic_error("zkr::persistent_node::start: the node \"" + path_ + "\" is closed");
            if (started_) return;
            started_ = true;
        }
        if (!port || port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::persistent_node::start");
        std::weak_ptr<persistent_node_impl> weak = weak_from_this();
        auto sub = port->on_session_event([weak](const session_event& ev) {
            auto self = weak.lock();
            if (!self) return;
            if (ev.state == connection_state::connected) {
                self->ensure();  // a new session: our ephemeral node is going, every watch is gone
            } else if (ev.state == connection_state::reconnected) {
                bool watching;
                {
                    std::lock_guard lock(self->mutex_);
                    watching = self->watching_;
                }
                if (!watching) self->ensure();
            } else if (ev.state == connection_state::lost || ev.state == connection_state::suspended) {
                if (ev.state == connection_state::lost) {
                    std::lock_guard lock(self->mutex_);
                    self->watching_ = false;
                }
            }
        });
        {
            std::lock_guard lock(mutex_);
            session_subscription_ = std::move(sub);
        }
        if (port->is_connected()) ensure();
    }

    bool wait_for_initial_create(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        auto made = [&] { return made_once_ || closed_; };
        if (timeout >= std::chrono::hours(24 * 365 * 100)) created_cv_.wait(lock, made);  // for ever: no deadline to overflow
        else created_cv_.wait_for(lock, timeout, made);
        return made_once_;
    }

    std::string actual_path() const {
        std::lock_guard lock(mutex_);
        return actual_;
    }
    std::string data() const {
        std::lock_guard lock(mutex_);
        return data_;
    }

    void set_data(std::string data) {
        check_node_data(client_options_, path_, data, "zkr::persistent_node::set_data", "node data");
        std::string path;
        {
            std::lock_guard lock(mutex_);
            if (closed_) throw std::logic_error("zkr::persistent_node::set_data: the node \"" + path_ + "\" is closed");
            data_ = data;
            ++data_gen_;
            path = actual_;
        }
        if (path.empty()) return;  // the create to come writes it
        auto port = port_.lock();
        if (!port) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::persistent_node::set_data");
        auto done = std::make_shared<std::promise<error_code>>();
        auto result = done->get_future();
        port->set_data(path, std::move(data), any_version,
                       completion<zkr::stat>(completion<zkr::stat>::inline_fn([done](error_code ec, zkr::stat) { done->set_value(ec); })));
        error_code ec = result.get();
        // Gone: the node is being made again, with the new data.
        if (ec && ec != errc::no_node) throw zkr::system_error(ec, "zkr::persistent_node::set_data \"" + path + "\"");
    }

    void close() {
        std::string actual;
        std::shared_ptr<watch_state> watch;
        subscription sub;
        std::vector<unsettled_create> doubts;
        {
            std::lock_guard lock(mutex_);
            if (closed_) return;
            closed_ = true;
            actual = actual_;
            watch = std::exchange(watch_, nullptr);
            sub = std::move(session_subscription_);
            doubts.swap(doubts_);
        }
        created_cv_.notify_all();
        sub.reset();
        retry_.cancel();
        auto port = port_.lock();
        if (watch && port) {
            watch->clear_inline();
            port->remove_watch(watch, completion<>(completion<>::inline_fn([](error_code) {})));
        }
        if (!actual.empty()) cleanup_->guaranteed_delete(actual);
        if (!doubts.empty()) cleanup_->sweep(parent_path(path_), std::move(doubts));
    }

private:
    std::string parent() const { return parent_path(path_); }

    // Under mutex_: the path and mode the next create uses.
    std::string creation_path_locked() const {
        if (!actual_.empty()) return actual_;  // made before: the same name again (CURATOR-483)
        if (!protection_) return path_;
        return join_path(parent(), prefix_ + std::string(node_name(path_)));
    }
    create_mode creation_mode_locked() const { return actual_.empty() ? mode_ : without_sequence(mode_); }

    // Starts the chain (or asks the running one for another run).
    void ensure() {
        auto port = port_.lock();
        if (!port) return;
        std::string path, data;
        create_mode mode;
        std::uint64_t gen;
        bool settle_doubt = false;
        std::int64_t session = port->session_id();
        {
            std::lock_guard lock(mutex_);
            if (closed_ || !started_) return;
            if (busy_) {
                again_ = true;
                return;
            }
            busy_ = true;
            again_ = false;
            watching_ = false;
            settle_doubt = in_doubt_;
            path = creation_path_locked();
            mode = creation_mode_locked();
            data = data_;
            gen = data_gen_;
            if (session) sessions_.insert(session);
        }
        if (settle_doubt) return settle(*port);
        bool first_sequential = is_sequential(mode);
        port->create(path, std::move(data), mode,
                     completion<create_result>(completion<create_result>::inline_fn(
                         [self = shared_from_this(), path, gen, first_sequential, session](
                             error_code ec, create_result r) { self->created(ec, std::move(r), path, gen, first_sequential, session); })));
    }

    void created(error_code ec, create_result r, const std::string& path, std::uint64_t gen, bool first_sequential,
                 std::int64_t session) {
        auto port = port_.lock();
        if (!port) return;
        if (!ec) return made(*port, r.path, gen);
        if (ec == errc::node_exists) return examine(*port, path);
        if (ec == errc::no_node && create_parents_) {
            port->create_parents(parent(), create_mode::container,
                                 completion<>(completion<>::inline_fn([self = shared_from_this()](error_code pec) {
                                     if (pec && !is_retryable(pec) && !is_session_lost(pec))
                                         log::write(log::level::error, "zkr::persistent_node \"" + self->path_ +
                                                                           "\": cannot make its parents: " + pec.message());
                                     self->step_done(pec && is_retryable(pec), !pec);
                                 })));
            return;
        }
        if (first_sequential && (is_retryable(ec) || is_session_lost(ec)) && ec != errc::client_closed) {
            // Made or not (a persistent one outlives the session too): a listing of the parent
            // settles it by our prefix.
            std::lock_guard lock(mutex_);
            in_doubt_ = true;
            doubt_session_ = session;
        }
        if (!is_retryable(ec) && !is_session_lost(ec)) {
            log::write(log::level::error, "zkr::persistent_node \"" + path_ + "\": cannot make " + path + ": " + ec.message());
        }
        step_done(is_retryable(ec));
    }

    // Our create is in doubt (a sequential one whose reply was lost): list the parent for our prefix.
    void settle(session_port& port) {
        port.get_children(parent(), false, completion<children_result>(completion<children_result>::inline_fn(
                                               [self = shared_from_this()](error_code ec, children_result r) {
                                                   self->settled(ec, std::move(r.children));
                                               })));
    }

    void settled(error_code ec, std::vector<std::string> children) {
        auto port = port_.lock();
        if (!port) return;
        if (ec && ec != errc::no_node) return step_done(is_retryable(ec));
        std::string found, prefix;
        {
            std::lock_guard lock(mutex_);
            prefix = prefix_;
        }
        for (const auto& c : children)
            if (has_prefix(c, prefix)) found = join_path(parent(), c);
        {
            std::lock_guard lock(mutex_);
            in_doubt_ = false;
            if (found.empty()) {
                // Nothing made: a fresh name, and the old one swept while its session lives.
                doubts_.push_back({prefix_, doubt_session_});
                prefix_ = protection_prefix(random_uuid());
            } else {
                actual_ = found;
            }
        }
        if (found.empty()) return step_done(false, true);
        examine(*port, found);
    }

    void made(session_port& port, const std::string& path, std::uint64_t gen) {
        bool closed, rewrite;
        std::string data;
        {
            std::lock_guard lock(mutex_);
            closed = closed_;
            if (!closed) {
                actual_ = path;
                made_once_ = true;
                rewrite = gen != data_gen_;
                data = data_;
            }
        }
        if (closed) return cleanup_->guaranteed_delete(path);  // landed after close()
        created_cv_.notify_all();
        if (rewrite) port.set_data(path, std::move(data), any_version, completion<zkr::stat>(completion<zkr::stat>::inline_fn([](error_code, zkr::stat) {})));
        watch(port, path);
    }

    // A node is in the way of our create: whose is it?
    void examine(session_port& port, const std::string& path) {
        port.exists(path, false, completion<exists_result>(completion<exists_result>::inline_fn(
                                     [self = shared_from_this(), path](error_code ec, exists_result r) {
                                         self->examined(ec, path, r);
                                     })));
    }

    void examined(error_code ec, const std::string& path, const exists_result& r) {
        auto port = port_.lock();
        if (!port) return;
        if (ec) return step_done(is_retryable(ec));
        if (!r.exists) return step_done(false, true);  // gone meanwhile: create again
        std::int64_t owner = r.stat.ephemeral_owner, current = port->session_id();
        std::string data;
        bool earlier_ours;
        {
            std::lock_guard lock(mutex_);
            data = data_;
            earlier_ours = sessions_.count(owner) > 0;
        }
        if (owner == current || owner == 0) {
            // Our own (a create whose reply was lost), or a node of no session: take it, with our data.
            if (owner == 0 && is_ephemeral(mode_))
                log::write(log::level::warning, "zkr::persistent_node \"" + path_ + "\": a persistent node is in the way at " +
                                                    path + "; taken over (it is not ephemeral)");
            std::uint64_t gen;
            {
                std::lock_guard lock(mutex_);
                gen = data_gen_;
            }
            port->set_data(path, data, any_version,
                           completion<zkr::stat>(completion<zkr::stat>::inline_fn(
                               [self = shared_from_this(), path, gen](error_code sec, zkr::stat) {
                                   auto p = self->port_.lock();
                                   if (!p) return;
                                   if (sec) return self->step_done(is_retryable(sec), sec == errc::no_node);
                                   self->made(*p, path, gen);
                               })));
            return;
        }
        // Another session's node: never adopted (writing to a node of an expired session of ours
        // is lost when the server deletes it; one of someone else's is theirs). Wait until it
        // goes with its session or is deleted, then make ours. A session of ours zkr gave up is
        // closed on the server as soon as one answers, so that wait is short.
        log::write(log::level::warning, "zkr::persistent_node \"" + path_ + "\": " + path + " belongs to session " +
                                            hex(owner) + (earlier_ours ? " (an earlier one of ours)" : "") +
                                            "; waiting for it to go");
        watch(*port, path);
    }

    // An exists watch on `path`: its deletion starts the chain again.
    void watch(session_port& port, const std::string& path) {
        port.exists(path, true, completion<exists_result>(completion<exists_result>::inline_fn(
                                    [self = shared_from_this()](error_code ec, exists_result r) { self->watched(ec, r); })));
    }

    void watched(error_code ec, exists_result r) {
        auto ws = watch_access::state(r.watch);
        bool closed;
        std::shared_ptr<watch_state> replaced;
        {
            std::lock_guard lock(mutex_);
            closed = closed_;
            if (!closed && !ec && r.exists) {
                replaced = std::exchange(watch_, ws);
                watching_ = true;
            }
        }
        auto port = port_.lock();
        if (replaced && replaced != ws && port) {
            // A second run's watch on the same node: the first one goes here (the server keeps
            // the one both stand for), so close() removing the last leaves none on the server.
            replaced->clear_inline();
            port->remove_watch(replaced, completion<>(completion<>::inline_fn([](error_code) {})));
        }
        if (closed) {
            if (port && ws) port->remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
            return;
        }
        if (ec) return step_done(is_retryable(ec));
        if (!r.exists) return step_done(false, true);  // gone already: make it again
        if (ws) {
            ws->wait_inline([weak = weak_from_this(), raw = ws.get()](error_code wec, const watch_event& ev) {
                auto self = weak.lock();
                if (!self) return;
                {
                    std::lock_guard lock(self->mutex_);
                    if (self->watch_.get() != raw) return;
                    self->watch_.reset();
                    self->watching_ = false;
                }
                if (wec) return;  // session lost or closed: session events take it from here
                if (ev.type == event_type::deleted) return self->ensure();  // make it again
                self->rewatch();  // changed (by someone): watch it again, as Curator does
            });
        }
        step_done(false);
    }

    // The node is there but its watch fired for another reason: a new watch, unless a chain runs
    // (every chain ends watching).
    void rewatch() {
        auto port = port_.lock();
        if (!port) return;
        std::string path;
        {
            std::lock_guard lock(mutex_);
            if (closed_ || busy_ || actual_.empty()) return;
            busy_ = true;
            again_ = false;
            path = actual_;
        }
        watch(*port, path);
    }

    // The chain ends. `retry`: it failed for connection trouble (try again in a moment, or on
    // reconnection); `now`: run again at once.
    void step_done(bool retry, bool now = false) {
        bool again;
        {
            std::lock_guard lock(mutex_);
            busy_ = false;
            again = !closed_ && (now || again_);
        }
        if (again) return ensure();
        if (retry) arm_retry();
    }

    void arm_retry() {
        retry_.arm(std::chrono::milliseconds(500), [weak = weak_from_this()] {
            auto self = weak.lock();
            if (!self) return;
            auto port = self->port_.lock();
            if (port && port->is_connected()) self->ensure();
        });
    }

    const client_options client_options_;  // for the checks of set_data (the node may outlive its client)
    std::weak_ptr<session_port> port_;
    std::shared_ptr<cleanup_service> cleanup_;
    const std::string path_;
    const create_mode mode_;
    const bool protection_, create_parents_;

    mutable std::mutex mutex_;  // a leaf
    std::condition_variable created_cv_;
    std::string data_;
    std::uint64_t data_gen_ = 0;
    std::string prefix_;  // "_c_<uuid>-" with protection
    std::string actual_;  // our node, once made
    bool started_ = false, closed_ = false, busy_ = false, again_ = false;
    bool made_once_ = false, watching_ = false;
    bool in_doubt_ = false;
    std::int64_t doubt_session_ = 0;
    std::vector<unsettled_create> doubts_;  // prefixes of creates found unmade, swept at close
    std::set<std::int64_t> sessions_;       // every session we sent a create on
    std::shared_ptr<watch_state> watch_;
    retry_timer retry_;
    subscription session_subscription_;
};

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
bool persistent_node::wait_for_initial_create(std::chrono::milliseconds timeout) { return impl_->wait_for_initial_create(timeout); }
std::string persistent_node::actual_path() const { return impl_->actual_path(); }
std::string persistent_node::data() const { return impl_->data(); }
void persistent_node::set_data(std::string data) { impl_->set_data(std::move(data)); }
void persistent_node::close() { impl_->close(); }
const std::string& persistent_node::path() const noexcept { return impl_->path(); }

}  // namespace zkr
