#include "client_impl.hpp"

#include "connect_string.hpp"
#include "zk_log_bridge.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include <cerrno>
#include <cstdio>
#include <future>
#include <limits>
#include <cstring>
#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

zkr::stat to_stat(const Stat& s) noexcept {
    return {s.czxid, s.mzxid, s.ctime, s.mtime, s.version, s.cversion, s.aversion,
            s.ephemeralOwner, s.dataLength, s.numChildren, s.pzxid};
}

namespace {

int to_zoo_mode(create_mode m) {
    switch (m) {
        case create_mode::persistent: return ZOO_PERSISTENT;
        case create_mode::ephemeral: return ZOO_EPHEMERAL;
        case create_mode::persistent_sequential: return ZOO_PERSISTENT_SEQUENTIAL;
        case create_mode::ephemeral_sequential: return ZOO_EPHEMERAL_SEQUENTIAL;
        case create_mode::container: return ZOO_CONTAINER;
    }
    return ZOO_PERSISTENT;
}

event_type to_event_type(int type) {
    if (type == ZOO_CREATED_EVENT) return event_type::created;
    if (type == ZOO_DELETED_EVENT) return event_type::deleted;
    if (type == ZOO_CHANGED_EVENT) return event_type::changed;
    if (type == ZOO_CHILD_EVENT) return event_type::child;
    return event_type::not_watching;
}

// The C client calls this for every watch we set. Runs on the C client's thread: it only hands
// the event over.
void on_watch_event(zhandle_t*, int type, int /*state*/, const char* path, void* context) {
    // Session events go to every registered watcher and leave it registered; the session
    // machinery ends watches when their session ends.
    if (type == ZOO_SESSION_EVENT) return;
    auto* ws = static_cast<watch_state*>(context);
    ws->finish({}, watch_event{to_event_type(type), path ? path : ""});
    client_impl* c = ws->client;
    asio::post(c->internal_executor(), [c, ws] { c->forget_watch(ws); });
}

// Every request of one kind: its arguments, its C call and its reply.
template <class... Values>
class typed_request : public request {
public:
    typed_request(client_impl& c, bool retry_allowed, completion<Values...> done)
        : request(c, retry_allowed), done_(std::move(done)) {}

    void fail(zkr::error_code ec) override { finish(ec, Values{}...); }

protected:
    void succeed(Values... values) { finish({}, std::move(values)...); }
    void finish(zkr::error_code ec, Values... values) {
        done_(ec, std::move(values)...);
        delete this;
    }
    // The reply to a request this object sent.
    template <class Self>
    static Self* self(const void* data) {
        return static_cast<Self*>(const_cast<void*>(data));
    }

private:
    completion<Values...> done_;
};

class create_request final : public typed_request<create_result> {
public:
    create_request(client_impl& c, std::string path, std::string data, create_mode mode, completion<create_result> done)
        // A sequential create is never resent blindly: its first try may have made a node.
        : typed_request(c, !is_sequential(mode), std::move(done)),
          path_(std::move(path)), data_(std::move(data)), mode_(mode) {}

    int send(zhandle_t* zh) override {
        return zoo_acreate2(zh, path_.c_str(), data_.data(), static_cast<int>(data_.size()), client.acl(),
                            to_zoo_mode(mode_), &on_reply, this);
    }

private:
    static void on_reply(int rc, const char* created, const Stat* st, const void* data) {
        auto* r = self<create_request>(data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        r->succeed(create_result{created ? created : "", st ? to_stat(*st) : zkr::stat{}});
    }
    std::string path_, data_;
    create_mode mode_;
};

class remove_request final : public typed_request<> {
public:
    remove_request(client_impl& c, std::string path, std::int32_t version, completion<> done)
        : typed_request(c, true, std::move(done)), path_(std::move(path)), version_(version) {}

    int send(zhandle_t* zh) override { return zoo_adelete(zh, path_.c_str(), version_, &on_reply, this); }

private:
    static void on_reply(int rc, const void* data) {
        auto* r = self<remove_request>(data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        r->succeed();
    }
    std::string path_;
    std::int32_t version_;
};

// Reads that may leave a watch.
template <class Result>
class read_request : public typed_request<Result> {
public:
    read_request(client_impl& c, std::string path, bool watch, watch_kind kind, completion<Result> done)
        : typed_request<Result>(c, true, std::move(done)), path_(std::move(path)) {
        if (watch) watch_ = c.new_watch(path_, kind);
    }
    ~read_request() override {
        // A read that failed for good leaves no watch at the C client (except exists on a
        // missing node, which hands its watch over before we get here).
        if (watch_) this->client.forget_watch(watch_.get());
    }
    void on_send(std::uint64_t generation) override {
        if (watch_) watch_->generation = generation;
    }

protected:
    watcher_fn watcher() const { return watch_ ? &on_watch_event : nullptr; }
    void* watcher_context() const { return watch_.get(); }
    zkr::watch take_watch() {
        if (!watch_) return {};
        watch_->armed = true;
        return zkr::watch(std::move(watch_));
    }

    std::string path_;
    std::shared_ptr<watch_state> watch_;
};

class exists_request final : public read_request<exists_result> {
public:
    using read_request::read_request;
    int send(zhandle_t* zh) override {
        return zoo_awexists(zh, path_.c_str(), watcher(), watcher_context(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const Stat* st, const void* data) {
        auto* r = self<exists_request>(data);
        if (rc == ZOK) return r->succeed(exists_result{true, st ? to_stat(*st) : zkr::stat{}, r->take_watch()});
        // No node is an answer, not an error; the watch now waits for its creation.
        if (rc == ZNONODE) return r->succeed(exists_result{false, {}, r->take_watch()});
        r->client.on_failure(r, rc);
    }
};

class get_data_request final : public read_request<data_result> {
public:
    using read_request::read_request;
    int send(zhandle_t* zh) override {
        return zoo_awget(zh, path_.c_str(), watcher(), watcher_context(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const char* value, int length, const Stat* st, const void* data) {
        auto* r = self<get_data_request>(data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        std::string bytes = value && length > 0 ? std::string(value, static_cast<std::size_t>(length)) : std::string();
        r->succeed(data_result{std::move(bytes), st ? to_stat(*st) : zkr::stat{}, r->take_watch()});
    }
};

class get_children_request final : public read_request<children_result> {
public:
    using read_request::read_request;
    int send(zhandle_t* zh) override {
        return zoo_awget_children2(zh, path_.c_str(), watcher(), watcher_context(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const String_vector* names, const Stat* st, const void* data) {
        auto* r = self<get_children_request>(data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        children_result result;
        if (names) {
            result.children.reserve(static_cast<std::size_t>(names->count));
            for (int i = 0; i < names->count; ++i) result.children.emplace_back(names->data[i]);
        }
        if (st) result.stat = to_stat(*st);
        result.watch = r->take_watch();
        r->succeed(std::move(result));
    }
};

class set_data_request final : public typed_request<zkr::stat> {
public:
    set_data_request(client_impl& c, std::string path, std::string data, std::int32_t version, completion<zkr::stat> done)
        : typed_request(c, true, std::move(done)), path_(std::move(path)), data_(std::move(data)), version_(version) {}

    int send(zhandle_t* zh) override {
        return zoo_aset(zh, path_.c_str(), data_.data(), static_cast<int>(data_.size()), version_, &on_reply, this);
    }

private:
    static void on_reply(int rc, const Stat* st, const void* data) {
        auto* r = self<set_data_request>(data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        r->succeed(st ? to_stat(*st) : zkr::stat{});
    }
    std::string path_, data_;
    std::int32_t version_;
};

bool has_sequential_create(const std::vector<multi_op>& ops) {
    for (const auto& o : ops) {
        if (auto* c = std::get_if<op::create>(&o); c && is_sequential(c->mode)) return true;
    }
    return false;
}

class multi_request final : public typed_request<std::vector<multi_op_result>> {
public:
    multi_request(client_impl& c, std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done)
        : typed_request(c, !has_sequential_create(ops), std::move(done)), ops_(std::move(ops)) {}

    int send(zhandle_t* zh) override {
        // The C client writes created paths and stats into these until the reply arrives.
        std::size_t n = ops_.size();
        zoo_ops_.assign(n, zoo_op_t{});
        results_.assign(n, zoo_op_result_t{});
        path_buffers_.assign(n, std::string());
        stats_.assign(n, Stat{});
        for (std::size_t i = 0; i < n; ++i) {
            std::visit(
                [&](const auto& o) {
                    using T = std::decay_t<decltype(o)>;
                    if constexpr (std::is_same_v<T, op::create>) {
                        path_buffers_[i].assign(o.path.size() + 32, '\0');
                        zoo_create_op_init(&zoo_ops_[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                           client.acl(), to_zoo_mode(o.mode), path_buffers_[i].data(),
                                           static_cast<int>(path_buffers_[i].size()));
                    } else if constexpr (std::is_same_v<T, op::remove>) {
                        zoo_delete_op_init(&zoo_ops_[i], o.path.c_str(), o.version);
                    } else if constexpr (std::is_same_v<T, op::set_data>) {
                        zoo_set_op_init(&zoo_ops_[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                        o.version, &stats_[i]);
                    } else {
                        zoo_check_op_init(&zoo_ops_[i], o.path.c_str(), o.version);
                    }
                },
                ops_[i]);
        }
        return zoo_amulti(zh, static_cast<int>(n), zoo_ops_.data(), results_.data(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const void* data) {
        auto* r = self<multi_request>(data);
        std::vector<multi_op_result> out(r->ops_.size());
        int first_failure = ZOK;
        bool answered = rc == ZOK;
        for (std::size_t i = 0; i < out.size(); ++i) {
            int err = r->results_[i].err;
            out[i].error = make_zk_error_code(err);
            if (err != ZOK && err != ZRUNTIMEINCONSISTENCY && first_failure == ZOK) first_failure = err;
            if (err != ZOK) answered = true;
            if (err == ZOK && std::holds_alternative<op::create>(r->ops_[i]))
                out[i].path = r->path_buffers_[i].c_str();
            if (err == ZOK && std::holds_alternative<op::set_data>(r->ops_[i])) out[i].stat = to_stat(r->stats_[i]);
        }
        // A transport failure (no per-op answers) may be retried; an op's failure is final.
        if (rc != ZOK && !answered) return r->client.on_failure(r, rc);
        zkr::error_code ec = make_zk_error_code(first_failure != ZOK ? first_failure : rc);
        r->finish(ec, std::move(out));
    }

    std::vector<multi_op> ops_;
    std::vector<zoo_op_t> zoo_ops_;
    std::vector<zoo_op_result_t> results_;
    std::vector<std::string> path_buffers_;
    std::vector<Stat> stats_;
};

// Removes every watch of one kind our session has on a path (REMOVE_WATCHES). The C client's
// per-watcher removal only checks the server (CHECK_WATCHES) and leaves the server's watch in
// place, so it is used only when another local watcher still needs that server watch.
class remove_watch_request final : public typed_request<> {
public:
    remove_watch_request(client_impl& c, std::shared_ptr<watch_state> ws, completion<> done)
        : typed_request(c, true, std::move(done)), watch_(std::move(ws)) {}

    int send(zhandle_t* zh) override {
        return zoo_aremove_all_watches(zh, watch_->path.c_str(),
                                       watch_->kind == watch_kind::child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA, 0,
                                       // The C API declares a pointer to the callback but uses it as the callback.
                                       reinterpret_cast<void_completion_t*>(reinterpret_cast<void*>(&on_reply)), this);
    }

private:
    static void on_reply(int rc, const void* data) {
        auto* r = self<remove_watch_request>(data);
        // A retry that finds nothing means our first try got through.
        if (rc == ZOK || (rc == ZNOWATCHER && !r->watch_->done && r->retries > 0)) {
            r->watch_->finish(make_error_code(errc::watch_removed), {});
            r->client.forget_watch(r->watch_.get());
            // Local watchers that armed on this path meanwhile lost their registration too.
            r->client.end_watches_on(*r->watch_, watch_event{event_type::not_watching, r->watch_->path});
            return r->succeed();
        }
        r->client.on_failure(r, rc);
    }
    std::shared_ptr<watch_state> watch_;
};

// Global watcher of a handle: session state changes, handed to the internal thread.
void on_session_watcher(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* ctx = static_cast<handle_context*>(context);
    client_impl* c = ctx->client;
    std::uint64_t generation = ctx->generation;
    asio::post(c->internal_executor(), [c, generation, state] { c->on_session_event(generation, state); });
}

void on_auth_reply(int rc, const void*) {
    if (rc != ZOK) log::write(log::level::error, "ZooKeeper digest authentication failed: " + make_zk_error_code(rc).message());
}

}  // namespace

}  // namespace zkr::detail

// ---------------------------------------------------------------- watch_state

namespace zkr::detail {

void watch_state::finish(zkr::error_code ec, watch_event ev) {
    std::optional<watch_handler> handler;
    asio::any_io_executor work;
    sync_slot<watch_event>* slot = nullptr;
    std::function<void(zkr::error_code, const watch_event&)> inline_fn;
    {
        std::lock_guard lock(mutex);
        if (done) return;
        done = true;
        error = ec;
        event = ev;
        handler = std::exchange(waiter, std::nullopt);
        work = std::exchange(waiter_work, {});
        slot = std::exchange(sync_waiter, nullptr);
        inline_fn = std::exchange(inline_waiter, {});
    }
    if (inline_fn) inline_fn(ec, ev);
    if (handler) post_handler(std::move(*handler), work, ec, std::move(ev));
    else if (slot) slot->set(ec, std::move(ev));
}

void watch_state::wait_inline(std::function<void(zkr::error_code, const watch_event&)> fn) {
    std::unique_lock lock(mutex);
    if (done) {
        zkr::error_code ec = error;
        watch_event ev = event;
        lock.unlock();
        fn(ec, ev);
        return;
    }
    inline_waiter = std::move(fn);
}

void watch_state::cancel_wait() {
    std::optional<watch_handler> handler;
    asio::any_io_executor work;
    {
        std::lock_guard lock(mutex);
        handler = std::exchange(waiter, std::nullopt);
        work = std::exchange(waiter_work, {});
    }
    if (handler) post_handler(std::move(*handler), work, make_error_code(errc::cancelled), watch_event{});
}

void start_watch_wait(const std::shared_ptr<watch_state>& state, watch_handler handler) {
    if (!state) {
        return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::bad_arguments),
                            watch_event{});
    }
    std::unique_lock lock(state->mutex);
    asio::any_io_executor work = asio::prefer(state->fallback_executor, asio::execution::outstanding_work.tracked);
    if (state->done) {
        zkr::error_code ec = state->error;
        watch_event ev = state->event;
        lock.unlock();
        return post_handler(std::move(handler), work, ec, std::move(ev));
    }
    if (state->waiter || state->sync_waiter) {
        lock.unlock();  // one wait at a time
        return post_handler(std::move(handler), work, make_error_code(errc::bad_arguments), watch_event{});
    }
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<watch_state>(state)](asio::cancellation_type) {
            if (auto s = weak.lock()) s->cancel_wait();
        });
    }
    state->waiter.emplace(std::move(handler));
    state->waiter_work = std::move(work);
}

void start_watch_remove(const std::shared_ptr<watch_state>& state, void_handler handler) {
    if (!state) {
        return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::bad_arguments));
    }
    auto client = state->client_owner.lock();
    if (!client) return post_handler(std::move(handler), state->fallback_executor, make_error_code(errc::client_closed));
    client->remove_watch(state, completion<>(std::move(handler), client->executor()));
}

// ---------------------------------------------------------------- client_impl

namespace {

std::string describe(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

client_impl::client_impl(client_options options)
    : options_(std::move(options)),
      work_(asio::make_work_guard(internal_)),
      executor_(options_.executor ? *options_.executor : asio::any_io_executor(internal_.get_executor())),
      events_(asio::make_strand(executor_)),
      lost_timer_(internal_),
      reopen_timer_(internal_) {
    if (std::string problem = connect_string_problem(options_.connect); !problem.empty())
        throw std::invalid_argument("zkr::client_options::connect \"" + options_.connect + "\": " + problem);
    if (options_.session_timeout.count() <= 0)
        throw std::invalid_argument("zkr::client_options::session_timeout must be positive, got " +
                                    describe(options_.session_timeout));
    if (options_.session_timeout.count() > std::numeric_limits<int>::max())
        throw std::invalid_argument("zkr::client_options::session_timeout is too large: " + describe(options_.session_timeout));
    if (options_.connection_timeout.count() <= 0)
        throw std::invalid_argument("zkr::client_options::connection_timeout must be positive, got " +
                                    describe(options_.connection_timeout));
    if (!options_.retry_policy) throw std::invalid_argument("zkr::client_options::retry_policy must not be null");
    if (options_.auth && options_.auth->user.empty())
        throw std::invalid_argument("zkr::client_options::auth: the user name is empty");
    if (options_.default_acl.empty()) throw std::invalid_argument("zkr::client_options::default_acl is empty");

    // The C client keeps pointers into these for every create.
    acl_strings_.reserve(options_.default_acl.size() * 2);
    for (const auto& entry : options_.default_acl) {
        acl_strings_.push_back(entry.scheme);
        acl_strings_.push_back(entry.id);
    }
    for (std::size_t i = 0; i < options_.default_acl.size(); ++i) {
        acl_entries_.push_back(ACL{options_.default_acl[i].permissions,
                                   Id{acl_strings_[2 * i].data(), acl_strings_[2 * i + 1].data()}});
    }
    acl_vector_ = ACL_vector{static_cast<std::int32_t>(acl_entries_.size()), acl_entries_.data()};
    negotiated_timeout_ = options_.session_timeout.count();
    init_c_client_log_level();
}

client_impl::~client_impl() { shutdown(); }

void client_impl::start() {
    open_handle();  // throws if the C client refuses the connect string
    thread_ = std::thread([this] { internal_.run(); });
}

void client_impl::open_handle() {
    std::uint64_t generation;
    {
        std::shared_lock lock(handle_mutex_);
        generation = generation_;
    }
    contexts_.push_back(handle_context{this, generation});
    errno = 0;
    zhandle_t* zh = zookeeper_init2(options_.connect.c_str(), &on_session_watcher,
                                    static_cast<int>(options_.session_timeout.count()), nullptr, &contexts_.back(), 0,
                                    &forward_c_client_log);
    if (!zh) {
        int err = errno ? errno : EINVAL;
        if (!thread_.joinable())
            throw zkr::system_error(error_code(err, boost::system::generic_category()),
                                    "zkr::client: the ZooKeeper C client refused connect string \"" + options_.connect + "\"");
        log::write(log::level::error, "zkr::client: could not open a new ZooKeeper handle: " + std::string(std::strerror(err)));
        reopen_timer_.expires_after(std::chrono::seconds(1));
        reopen_timer_.async_wait([this](zkr::error_code ec) {
            if (!ec && !closed_) open_handle();
        });
        return;
    }
    // By default the C client resolves the connect string again on every turn of its I/O loop
    // (a socket and file opens per turn: most of an idle lock cycle's system calls). Routine
    // re-resolution once a minute is plenty; a lost connection still resolves at once.
    zoo_set_servers_resolution_delay(zh, 60'000);
    if (options_.auth) {
        std::string credentials = options_.auth->user + ":" + options_.auth->password;
        zoo_add_auth(zh, "digest", credentials.data(), static_cast<int>(credentials.size()), &on_auth_reply, nullptr);
    }
    {
        std::unique_lock lock(handle_mutex_);
        zh_ = zh;
    }
    std::vector<request*> parked;
    {
        std::lock_guard lock(parked_mutex_);
        parked.swap(parked_);
    }
    for (request* r : parked) submit(r);
}

std::int64_t client_impl::session_id() const {
    std::shared_lock lock(handle_mutex_);
    return zh_ ? zoo_client_id(zh_)->client_id : 0;
}

void client_impl::on_session_event(std::uint64_t generation, int zstate) {
    {
        std::shared_lock lock(handle_mutex_);
        if (closed_ || generation != generation_ || !zh_) return;
        if (zstate == ZOO_CONNECTED_STATE) negotiated_timeout_ = zoo_recv_timeout(zh_);
    }
    if (zstate == ZOO_CONNECTED_STATE) {
        lost_timer_.cancel();
        if (!session_established_) {
            session_established_ = true;
            suspended_ = false;
            ++session_count_;
            report(connection_state::connected);
        } else if (suspended_) {
            suspended_ = false;
            report(connection_state::reconnected);
        }
    } else if (zstate == ZOO_CONNECTING_STATE || zstate == ZOO_ASSOCIATING_STATE) {
        if (session_established_ && !suspended_) {
            suspended_ = true;
            report(connection_state::suspended);
            // The server expires a silent session after its timeout; past that we cannot
            // count on it, so we call it lost and start over (Curator does the same).
            lost_timer_.expires_after(session_timeout());
            lost_timer_.async_wait([this, generation](zkr::error_code ec) {
                if (ec || closed_ || !suspended_) return;
                {
                    std::shared_lock lock(handle_mutex_);
                    if (generation != generation_) return;
                }
                declare_lost("suspended for a whole session timeout");
            });
        }
    } else if (zstate == ZOO_EXPIRED_SESSION_STATE) {
        declare_lost("the session expired");
    } else if (zstate == ZOO_AUTH_FAILED_STATE) {
        log::write(log::level::error, "zkr::client: ZooKeeper authentication failed; opening a new session");
        declare_lost("authentication failed");
    }
}

void client_impl::declare_lost(const char* why) {
    char id[32];
    std::snprintf(id, sizeof id, "%llx", static_cast<unsigned long long>(session_id()));
    log::write(log::level::warning, std::string("zkr::client: session 0x") + id + " lost: " + why);
    report(connection_state::lost);
    replace_handle(make_error_code(errc::session_expired));
}

void client_impl::replace_handle(zkr::error_code reason) {
    zhandle_t* old;
    {
        std::unique_lock lock(handle_mutex_);
        old = std::exchange(zh_, nullptr);
        ++generation_;
    }
    session_established_ = false;
    suspended_ = false;
    lost_timer_.cancel();
    // Pending requests complete here with ZCLOSING (mapped to session_expired) and are retried
    // on the new handle where that is safe.
    if (old) zookeeper_close(old);
    fail_watches(reason);
    if (!closed_) open_handle();
}

void client_impl::fail_watches(zkr::error_code ec) {
    std::vector<std::shared_ptr<watch_state>> ended;
    {
        std::lock_guard lock(watches_mutex_);
        std::uint64_t current;
        {
            std::shared_lock handle_lock(handle_mutex_);
            current = generation_;
        }
        for (auto it = watches_.begin(); it != watches_.end();) {
            // Watches not yet armed belong to a read in flight, which cleans up after itself.
            if (it->second->armed && (closed_ || it->second->generation != current)) {
                ended.push_back(std::move(it->second));
                it = watches_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& ws : ended) ws->finish(ec, watch_event{});
}

void client_impl::report(connection_state s) {
    std::vector<completion<>> connected_waiters;
    std::vector<completion<connection_state>> state_waiters;
    std::vector<std::shared_ptr<listener_entry>> listeners;
    {
        std::lock_guard lock(state_mutex_);
        state_ = s;
        connected_ = s == connection_state::connected || s == connection_state::reconnected;
        if (connected_) connected_waiters.swap(connected_waiters_);
        state_waiters.swap(next_state_waiters_);
        for (auto& [id, l] : listeners_) listeners.push_back(l);
        state_changed_.notify_all();
    }
    for (auto& w : connected_waiters) w({});
    for (auto& w : state_waiters) w({}, s);
    if (listeners.empty()) return;
    asio::post(events_, [listeners = std::move(listeners), s] {
        for (auto& l : listeners) {
            if (!l->active) continue;
            try {
                l->fn(s);
            } catch (const std::exception& e) {
                log::write(log::level::error, std::string("zkr::client: a state listener threw: ") + e.what());
            }
        }
    });
}

std::pair<std::int64_t, std::string> client_impl::session_credentials() const {
    std::shared_lock lock(handle_mutex_);
    if (!zh_) return {0, {}};
    const clientid_t* id = zoo_client_id(zh_);
    return {id->client_id, std::string(id->passwd, sizeof id->passwd)};
}

connection_state client_impl::state() const {
    std::lock_guard lock(state_mutex_);
    return state_;
}

void client_impl::close() {
    if (closed_.exchange(true)) return;
    auto work = [this] {
        zhandle_t* old;
        {
            std::unique_lock lock(handle_mutex_);
            old = std::exchange(zh_, nullptr);
            ++generation_;
        }
        lost_timer_.cancel();
        reopen_timer_.cancel();
        // Closing ends the session on the server: its ephemeral nodes go now, not after a timeout.
        if (old) zookeeper_close(old);
        for (request* r : backing_off_) r->backoff->cancel();
        fail_watches(make_error_code(errc::client_closed));
        std::vector<request*> parked;
        {
            std::lock_guard lock(parked_mutex_);
            parked.swap(parked_);
        }
        for (request* r : parked) r->fail(make_error_code(errc::client_closed));
        std::vector<completion<>> connected_waiters;
        {
            std::lock_guard lock(state_mutex_);
            connected_waiters.swap(connected_waiters_);
        }
        for (auto& w : connected_waiters) w(make_error_code(errc::client_closed));
        report(connection_state::closed);
    };
    if (!thread_.joinable() || internal_.get_executor().running_in_this_thread()) {
        work();
        return;
    }
    std::promise<void> done;
    asio::post(internal_, [&] {
        work();
        done.set_value();
    });
    done.get_future().wait();
}

std::shared_ptr<void> client_impl::extension(const void* key, const std::function<std::shared_ptr<void>()>& make) {
    std::lock_guard lock(extensions_mutex_);
    auto& slot = extensions_[key];
    if (!slot) slot = make();
    return slot;
}

void client_impl::shutdown() {
    close();
    {
        // Recipe state may hold timers on the internal executor: drop it while that still runs.
        std::map<const void*, std::shared_ptr<void>> extensions;
        std::lock_guard lock(extensions_mutex_);
        extensions.swap(extensions_);
    }
    work_.reset();
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id()) {
        thread_.detach();  // destroyed from one of its own handlers: let it finish by itself
        return;
    }
    thread_.join();
}

void client_impl::wait_connected(std::chrono::milliseconds timeout) {
    std::unique_lock lock(state_mutex_);
    state_changed_.wait_for(lock, timeout, [&] { return connected_.load() || closed_.load(); });
    if (connected_) return;
    if (closed_) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::client::wait_connected");
    throw zkr::system_error(make_error_code(errc::connect_timeout),
                            "no ZooKeeper session with \"" + options_.connect + "\" within " + describe(timeout) +
                                " (is a server listening there?)");
}

subscription client_impl::on_state_change(std::function<void(connection_state)> listener) {
    if (!listener) throw std::invalid_argument("zkr::client::on_state_change: the listener is empty");
    auto entry = std::make_shared<listener_entry>();
    entry->fn = std::move(listener);
    std::uint64_t id;
    {
        std::lock_guard lock(state_mutex_);
        id = next_listener_id_++;
        listeners_.emplace(id, entry);
    }
    return subscription([weak = weak_from_this(), entry, id] {
        entry->active = false;
        if (auto self = weak.lock()) {
            std::lock_guard lock(self->state_mutex_);
            self->listeners_.erase(id);
        }
    });
}

void client_impl::wait_connected_async(completion<> done) {
    std::unique_lock lock(state_mutex_);
    if (connected_ || closed_) {
        lock.unlock();
        return done(connected_ ? zkr::error_code{} : make_error_code(errc::client_closed));
    }
    connected_waiters_.push_back(std::move(done));
}

void client_impl::next_state_async(completion<connection_state> done) {
    std::unique_lock lock(state_mutex_);
    if (closed_) {
        lock.unlock();
        return done(make_error_code(errc::client_closed), connection_state::closed);
    }
    next_state_waiters_.push_back(std::move(done));
}

zkr::error_code client_impl::map_rc(int rc) const {
    if (rc == ZCLOSING) return make_error_code(closed_ ? errc::client_closed : errc::session_expired);
    // The handle already knows its session expired; a new one is on its way.
    if (rc == ZINVALIDSTATE) return make_error_code(closed_ ? errc::client_closed : errc::session_expired);
    return make_zk_error_code(rc);
}

void client_impl::submit(request* r) {
    std::shared_lock lock(handle_mutex_);
    if (closed_) {
        lock.unlock();
        return r->fail(make_error_code(errc::client_closed));
    }
    if (!zh_) {
        // Between two handles (a lost session being replaced): wait for the new one. Parked
        // under the shared lock, so open_handle (which takes it exclusively) cannot miss it.
        std::lock_guard parked_lock(parked_mutex_);
        parked_.push_back(r);
        return;
    }
    r->on_send(generation_);
    int rc = r->send(zh_);
    lock.unlock();
    // On success the reply may already have deleted r.
    if (rc != ZOK) on_failure(r, rc);
}

void client_impl::on_failure(request* r, int rc) {
    zkr::error_code ec = map_rc(rc);
    bool retry = r->retry_allowed && !closed_ && (is_retryable(ec) || ec == errc::session_expired);
    if (!retry) return r->fail(ec);
    asio::post(internal_, [this, r, ec] { schedule_retry(r, ec); });
}

void client_impl::schedule_retry(request* r, zkr::error_code ec) {
    if (closed_) return r->fail(make_error_code(errc::client_closed));
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - r->started);
    auto sleep = options_.retry_policy->next_sleep(retry::attempt{r->retries, elapsed, ec});
    if (!sleep) return r->fail(ec);
    ++r->retries;
    if (!r->backoff) r->backoff = std::make_unique<asio::steady_timer>(internal_);
    r->backoff->expires_after(*sleep);
    backing_off_.insert(r);
    r->backoff->async_wait([this, r](zkr::error_code) {
        backing_off_.erase(r);
        if (closed_) return r->fail(make_error_code(errc::client_closed));
        submit(r);
    });
}

std::shared_ptr<watch_state> client_impl::new_watch(std::string path, watch_kind kind) {
    auto ws = std::make_shared<watch_state>();
    ws->client = this;
    ws->client_owner = weak_from_this();
    ws->fallback_executor = executor_;
    ws->path = std::move(path);
    ws->kind = kind;
    std::lock_guard lock(watches_mutex_);
    watches_.emplace(ws.get(), ws);
    return ws;
}

void client_impl::forget_watch(watch_state* ws) {
    std::lock_guard lock(watches_mutex_);
    watches_.erase(ws);
}

namespace {

// Bad input fails before it reaches the server (which would drop the connection for some).
zkr::error_code check_input(std::string_view path, bool sequential, std::size_t data_size = 0) {
    if (!path_problem(path, sequential).empty()) return make_error_code(errc::invalid_path);
    // jute.maxbuffer (1 MiB) bounds a whole packet; the server drops the connection past it.
    if (data_size > 1024 * 1024 - 1024 - path.size()) return make_error_code(errc::bad_arguments);
    return {};
}

}  // namespace

void client_impl::create(std::string path, std::string data, create_mode mode, completion<create_result> done) {
    if (auto ec = check_input(path, is_sequential(mode), data.size())) return done(ec, {});
    submit(new create_request(*this, std::move(path), std::move(data), mode, std::move(done)));
}

void client_impl::remove(std::string path, std::int32_t version, completion<> done) {
    if (auto ec = check_input(path, false); ec || path == "/") return done(ec ? ec : make_error_code(errc::bad_arguments));
    submit(new remove_request(*this, std::move(path), version, std::move(done)));
}

void client_impl::exists(std::string path, bool watch, completion<exists_result> done) {
    if (auto ec = check_input(path, false)) return done(ec, {});
    submit(new exists_request(*this, std::move(path), watch, watch_kind::data, std::move(done)));
}

void client_impl::get_data(std::string path, bool watch, completion<data_result> done) {
    if (auto ec = check_input(path, false)) return done(ec, {});
    submit(new get_data_request(*this, std::move(path), watch, watch_kind::data, std::move(done)));
}

void client_impl::set_data(std::string path, std::string data, std::int32_t version, completion<zkr::stat> done) {
    if (auto ec = check_input(path, false, data.size())) return done(ec, {});
    submit(new set_data_request(*this, std::move(path), std::move(data), version, std::move(done)));
}

void client_impl::get_children(std::string path, bool watch, completion<children_result> done) {
    if (auto ec = check_input(path, false)) return done(ec, {});
    submit(new get_children_request(*this, std::move(path), watch, watch_kind::child, std::move(done)));
}

void client_impl::multi(std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done) {
    std::size_t total = 0;
    for (const auto& o : ops) {
        zkr::error_code ec = std::visit(
            [&](const auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, op::create>) {
                    total += x.data.size();
                    return check_input(x.path, is_sequential(x.mode), x.data.size());
                } else if constexpr (std::is_same_v<T, op::set_data>) {
                    total += x.data.size();
                    return check_input(x.path, false, x.data.size());
                } else {
                    return check_input(x.path, false);
                }
            },
            o);
        if (!ec && total > 1024 * 1024 - 4096) ec = make_error_code(errc::bad_arguments);
        if (ec) return done(ec, {});
    }
    if (ops.empty()) return done({}, {});
    submit(new multi_request(*this, std::move(ops), std::move(done)));
}

std::vector<std::shared_ptr<watch_state>> client_impl::watches_sharing(const watch_state& ws) {
    std::vector<std::shared_ptr<watch_state>> sharing;
    std::lock_guard lock(watches_mutex_);
    for (auto& [ptr, other] : watches_) {
        if (ptr != &ws && other->armed && other->kind == ws.kind && other->generation == ws.generation &&
            other->path == ws.path)
            sharing.push_back(other);
    }
    return sharing;
}

void client_impl::end_watches_on(const watch_state& ws, const watch_event& ev) {
    for (auto& other : watches_sharing(ws)) {
        other->finish({}, ev);
        forget_watch(other.get());
    }
}

void client_impl::remove_watch(std::shared_ptr<watch_state> ws, completion<> done) {
    {
        std::lock_guard lock(ws->mutex);
        if (ws->done) return done(make_error_code(errc::no_watcher));
    }
    if (!watches_sharing(*ws).empty()) {
        // Others here still need the server's watch on this path: drop only ours, locally.
        int rc;
        {
            std::shared_lock lock(handle_mutex_);
            if (!zh_ || ws->generation != generation_) return done(make_error_code(errc::no_watcher));
            rc = zoo_remove_watches(zh_, ws->path.c_str(), ws->kind == watch_kind::child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA,
                                    &on_watch_event, ws.get(), 1);
        }
        if (rc != ZOK) return done(map_rc(rc));
        ws->finish(make_error_code(errc::watch_removed), {});
        forget_watch(ws.get());
        return done({});
    }
    submit(new remove_watch_request(*this, std::move(ws), std::move(done)));
}

// ---------------------------------------------------------------- entry points of the templates

void start_create(client_impl& c, std::string path, std::string data, create_mode mode, handler<create_result> h) {
    c.create(std::move(path), std::move(data), mode, completion<create_result>(std::move(h), c.executor()));
}
void start_remove(client_impl& c, std::string path, std::int32_t version, empty_handler h) {
    c.remove(std::move(path), version, completion<>(std::move(h), c.executor()));
}
void start_exists(client_impl& c, std::string path, bool watch, handler<exists_result> h) {
    c.exists(std::move(path), watch, completion<exists_result>(std::move(h), c.executor()));
}
void start_get_data(client_impl& c, std::string path, bool watch, handler<data_result> h) {
    c.get_data(std::move(path), watch, completion<data_result>(std::move(h), c.executor()));
}
void start_set_data(client_impl& c, std::string path, std::string data, std::int32_t version, handler<zkr::stat> h) {
    c.set_data(std::move(path), std::move(data), version, completion<zkr::stat>(std::move(h), c.executor()));
}
void start_get_children(client_impl& c, std::string path, bool watch, handler<children_result> h) {
    c.get_children(std::move(path), watch, completion<children_result>(std::move(h), c.executor()));
}
void start_multi(client_impl& c, std::vector<multi_op> ops, handler<std::vector<multi_op_result>> h) {
    c.multi(std::move(ops), completion<std::vector<multi_op_result>>(std::move(h), c.executor()));
}
void start_wait_connected(client_impl& c, empty_handler h) {
    c.wait_connected_async(completion<>(std::move(h), c.executor()));
}
void start_next_state(client_impl& c, state_handler h) {
    c.next_state_async(completion<connection_state>(std::move(h), c.executor()));
}

}  // namespace zkr::detail
