// The client's entry points: options, requests and their retries, live state and the lease,
// listeners and waiters.
#include "client_impl.hpp"

#include "connect_string.hpp"
#include "request_limits.hpp"
#include "zk_log_bridge.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

namespace {

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

client_options validated(client_options o) {
    if (std::string problem = connect_string_problem(o.connect); !problem.empty())
        throw std::invalid_argument("zkr::client_options::connect " + quoted_path(o.connect) + ": " + problem);
    if (o.session_timeout.count() <= 0)
        throw std::invalid_argument("zkr::client_options::session_timeout must be positive, got " + ms_text(o.session_timeout));
    if (o.session_timeout.count() > std::numeric_limits<int>::max())
        throw std::invalid_argument("zkr::client_options::session_timeout is too large: " + ms_text(o.session_timeout));
    if (o.session_timeout < client_options::min_session_timeout)
        throw std::invalid_argument(
            "zkr::client_options::session_timeout is " + ms_text(o.session_timeout) + ", below the " +
            ms_text(client_options::min_session_timeout) +
            " zkr accepts: no ZooKeeper server grants so short a session. A server keeps the timeout within its "
            "[minSessionTimeout, maxSessionTimeout], by default [2, 20] x tickTime (4000 ms to 40000 ms with the usual "
            "tickTime of 2000 ms), and would grant its minimum instead (were seconds meant?)");
    if (o.max_request_size < 4096 || o.max_request_size > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
        throw std::invalid_argument("zkr::client_options::max_request_size must be within 4096 to 2^31 - 1 bytes (a server's "
                                    "jute.maxbuffer less 1 KiB; default " +
                                    std::to_string(client_options::server_default_max_buffer - 1024) + "), got " +
                                    std::to_string(o.max_request_size));
    // The chroot goes before every path: with too long a one, not even a read of "/" would fit.
    if (std::size_t chroot = connect_string_chroot(o.connect).size(); chroot + 1024 > o.max_request_size)
        throw std::invalid_argument("zkr::client_options::connect: the chroot " + quoted_path(connect_string_chroot(o.connect)) +
                                    " leaves less than 1 KiB of client_options::max_request_size (" +
                                    std::to_string(o.max_request_size) + " bytes) for the requests under it");
    if (o.connection_timeout.count() <= 0)
        throw std::invalid_argument("zkr::client_options::connection_timeout must be positive, got " +
                                    ms_text(o.connection_timeout));
    if (o.stall_probe_after.count() < 0 || o.stall_probe_after > o.session_timeout)
        throw std::invalid_argument("zkr::client_options::stall_probe_after must be within 0 (off) and the session_timeout (" +
                                    ms_text(o.session_timeout) + "), got " + ms_text(o.stall_probe_after));
    if (!o.retry_policy) throw std::invalid_argument("zkr::client_options::retry_policy must not be null");
    for (std::size_t i = 0; i < o.auth.size(); ++i) {
        if (o.auth[i].user.empty())
            throw std::invalid_argument("zkr::client_options::auth[" + std::to_string(i) + "]: the user name is empty");
        // Sent as an AuthPacket (header, type, scheme "digest", "user:password") on every connection.
        if (std::size_t packet = 8 + 4 + 4 + 6 + 4 + o.auth[i].user.size() + 1 + o.auth[i].password.size();
            packet > o.max_request_size)
            throw std::invalid_argument("zkr::client_options::auth[" + std::to_string(i) + "]: the credentials are " +
                                        std::to_string(packet) + " bytes as sent, over client_options::max_request_size (" +
                                        std::to_string(o.max_request_size) + " bytes)");
    }
    if (o.default_acl.empty()) throw std::invalid_argument("zkr::client_options::default_acl is empty");
    return o;
}

// Bad input fails before it reaches the server: it drops the connection of a request over its
// jute.maxbuffer, and the C client would send it again on every reconnection, for ever.
error_code check_input(std::string_view path, bool sequential, const request_sizer& sizer, std::size_t request_size) {
    if (!path_problem(path, sequential).empty()) return make_error_code(errc::invalid_path);
    if (!sizer.fits(request_size)) return make_error_code(errc::bad_arguments);
    return {};
}

// The server answered (an error of the API is an answer too), as opposed to the C client giving
// up on the connection or the session.
bool server_answered(int rc) {
    if (rc == ZOK) return true;
    if (rc > ZAPIERROR) return false;
    return rc != ZSESSIONEXPIRED && rc != ZAUTHFAILED && rc != ZCLOSING && rc != ZSESSIONMOVED && rc != ZNOTHING;
}

}  // namespace

client_impl::client_impl(client_options options)
    : options_(validated(std::move(options))),
      rt_(std::make_shared<runtime>(!options_.executor)),
      user_executor_(options_.executor ? *options_.executor : asio::any_io_executor(rt_->handlers->get_executor())),
      listener_strand_(asio::make_strand(user_executor_)),
      lost_timer_(rt_->session),
      reopen_timer_(rt_->session),
      heartbeat_timer_(rt_->session),
      stall_probe_(options_.stall_probe_after),
      closer_timer_(rt_->session) {
    if (auto slash = options_.connect.find('/'); slash != std::string::npos) chroot_ = options_.connect.substr(slash);
    if (chroot_ == "/") chroot_.clear();
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
    if (options_.observer) observer_events_ = observer_channel::start(options_.observer);
    init_c_client_log_level();
}

client_impl::~client_impl() { shutdown(); }

std::shared_ptr<void> client_impl::extension(const void* key, const std::function<std::shared_ptr<void>()>& make) {
    std::lock_guard lock(extensions_mutex_);
    if (closed_) return nullptr;
    auto& slot = extensions_[key];
    if (!slot) slot = make();
    return slot;
}

// ---------------------------------------------------------------- live state

std::int64_t client_impl::session_id() const {
    std::shared_lock lock(handle_mutex_);
    return zh_ ? zoo_client_id(zh_)->client_id : 0;
}

std::pair<std::int64_t, std::string> client_impl::session_credentials() const {
    std::shared_lock lock(handle_mutex_);
    if (!zh_) return {0, {}};
    const clientid_t* id = zoo_client_id(zh_);
    return {id->client_id, std::string(id->passwd, sizeof id->passwd)};
}

connection_state client_impl::state() const {
    connection_state reported;
    {
        std::lock_guard lock(state_mutex_);
        reported = state_;
    }
    if (reported != connection_state::connected && reported != connection_state::reconnected) return reported;
    // The C client knows first; its events reach us a moment later.
    std::shared_lock lock(handle_mutex_);
    if (!zh_) return connection_state::lost;
    int live = zoo_state(zh_);
    if (live == ZOO_EXPIRED_SESSION_STATE || live == ZOO_AUTH_FAILED_STATE) return connection_state::lost;
    if (live != ZOO_CONNECTED_STATE) return connection_state::suspended;
    return reported;
}

bool client_impl::is_connected() const {
    auto s = state();
    return s == connection_state::connected || s == connection_state::reconnected;
}

session_health client_impl::health(std::int64_t session) const {
    if (closed_ || session == 0) return session_health::gone;
    std::shared_lock lock(handle_mutex_);
    if (!zh_) return session_health::gone;  // between handles: the old session was given up
    if (zoo_client_id(zh_)->client_id != session) return session_health::gone;
    int live = zoo_state(zh_);
    if (live == ZOO_EXPIRED_SESSION_STATE || live == ZOO_AUTH_FAILED_STATE) return session_health::gone;
    // The worse of the C client's state and of its latest event: it queues its CONNECTING event
    // first, then fails every request it holds, and only then stops saying connected — so a
    // listener told `suspended` (zkr's, a hold monitor among them, or the user's) would otherwise
    // read a hold as held for as long as that takes (issue 33).
    if (live != ZOO_CONNECTED_STATE || c_client_down_.load() == ((generation_ << 1) | 1)) return session_health::suspect;
    return std::chrono::steady_clock::now() < current_lease() ? session_health::live : session_health::suspect;
}

std::chrono::steady_clock::time_point client_impl::current_lease() const {
    // The server touched the session no earlier than the send of the latest answered request, and
    // expires it no sooner than a session timeout later. Two thirds of that (the C client's own
    // suspicion window) leaves room for clock drift and for the caller's next step.
    std::lock_guard lease_lock(lease_mutex_);
    if (lease_generation_ != generation_ || lease_sent_ == std::chrono::steady_clock::time_point{}) return {};
    return lease_sent_ + session_timeout() * 2 / 3;
}

std::chrono::steady_clock::time_point client_impl::lease_until(std::int64_t session) const {
    if (health(session) != session_health::live) return {};
    std::shared_lock lock(handle_mutex_);
    return current_lease();
}

void client_impl::note_reply(const request& r, int rc) {
    if (!server_answered(rc)) return;
    auto now = std::chrono::steady_clock::now();
    last_reply_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
    // Completion threads of two handles may overlap for a moment: a lost update only nudges an estimate.
    round_trip_floor_.store(stall_probe::next_round_trip_floor(std::chrono::steady_clock::duration(round_trip_floor_.load(std::memory_order_relaxed)),
                                                               now - r.sent_at)
                                .count(),
                            std::memory_order_relaxed);
    std::lock_guard lock(lease_mutex_);
    if (r.sent_generation == lease_generation_ && r.sent_at > lease_sent_) lease_sent_ = r.sent_at;
}

// ---------------------------------------------------------------- waiting and listening

void client_impl::wait_connected(std::chrono::steady_clock::time_point deadline, std::optional<std::chrono::milliseconds> asked) {
    const auto called = std::chrono::steady_clock::now();
    std::unique_lock lock(state_mutex_);
    auto done = [&] { return connected_.load() || closed_.load(); };
    // wait_until would compute with time_point::max(): for ever is a plain wait.
    if (deadline == std::chrono::steady_clock::time_point::max()) state_changed_.wait(lock, done);
    else state_changed_.wait_until(lock, deadline, done);
    if (connected_) return;
    if (closed_) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::client::wait_connected");
    const std::string within = asked ? "within " + ms_text(*asked)
                                     : "by its deadline (" + ms_text(std::chrono::ceil<std::chrono::milliseconds>(
                                                                std::max(deadline, called) - called)) +
                                           " after the call)";
    std::string why = open_problem_.empty() ? std::string("is a server listening there?") : open_problem_;
    throw zkr::system_error(make_error_code(errc::connect_timeout),
                            "no ZooKeeper session with " + quoted_path(options_.connect) + " " + within + " (" + why + ")");
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

subscription client_impl::on_session_event(std::function<void(const session_event&)> listener) {
    auto entry = std::make_shared<internal_listener>();
    entry->fn = std::move(listener);
    std::uint64_t id;
    {
        std::lock_guard lock(state_mutex_);
        id = next_listener_id_++;
        internal_listeners_.emplace(id, entry);
    }
    return subscription([weak = weak_from_this(), entry, id] {
        entry->active = false;
        if (auto self = weak.lock()) {
            std::lock_guard lock(self->state_mutex_);
            self->internal_listeners_.erase(id);
        }
    });
}

void client_impl::wait_connected_async(completion<> done, asio::cancellation_slot slot) {
    std::unique_lock lock(state_mutex_);
    if (connected_ || closed_) {
        lock.unlock();
        return done(connected_ ? error_code{} : make_error_code(errc::client_closed));
    }
    auto key = ++next_waiter_;
    connected_waiters_.emplace(key, std::move(done));
    if (slot.is_connected()) {
        slot.assign([weak = weak_from_this(), key](asio::cancellation_type) {
            auto self = weak.lock();
            if (!self) return;
            std::map<std::uint64_t, completion<>> cancelled;
            {
                std::lock_guard lock(self->state_mutex_);
                if (auto node = self->connected_waiters_.extract(key)) cancelled.insert(std::move(node));
            }
            for (auto& [k, w] : cancelled) w(make_error_code(errc::cancelled));
        });
    }
}

void client_impl::next_state_async(completion<connection_state> done, asio::cancellation_slot slot) {
    std::unique_lock lock(state_mutex_);
    if (closed_) {
        lock.unlock();
        return done(make_error_code(errc::client_closed), connection_state::closed);
    }
    auto key = ++next_waiter_;
    next_state_waiters_.emplace(key, std::move(done));
    if (slot.is_connected()) {
        slot.assign([weak = weak_from_this(), key](asio::cancellation_type) {
            auto self = weak.lock();
            if (!self) return;
            std::map<std::uint64_t, completion<connection_state>> cancelled;
            {
                std::lock_guard lock(self->state_mutex_);
                if (auto node = self->next_state_waiters_.extract(key)) cancelled.insert(std::move(node));
            }
            for (auto& [k, w] : cancelled) w(make_error_code(errc::cancelled), connection_state::closed);
        });
    }
}

// ---------------------------------------------------------------- sending and retrying

error_code client_impl::map_rc(int rc) const {
    if (rc == ZCLOSING) return make_error_code(closed_ ? errc::client_closed : errc::session_expired);
    // The handle already knows its session expired; a new one is on its way.
    if (rc == ZINVALIDSTATE) return make_error_code(closed_ ? errc::client_closed : errc::session_expired);
    return make_zk_error_code(rc);
}

void client_impl::observe_started(request& r) {
    r.observe_id = observer_events_->next_id();
    observer_events_->request_started({r.observe_id, r.observed_operation(), r.observed_path()});
}

void client_impl::observe_finished(const request& r, error_code result) {
    observer_events_->request_finished({r.observe_id, r.observed_operation(), r.observed_path()}, result,
                                       std::chrono::steady_clock::now() - r.started);
}

void client_impl::submit(request* r) {
    if (observer_events_ && r->observe_id == 0) observe_started(*r);
    std::shared_lock lock(handle_mutex_);
    if (closed_) {
        lock.unlock();
        return r->fail(make_error_code(errc::client_closed));
    }
    if (!zh_) {
        // Between two handles: wait for the next one. Parked under the shared lock, so the session
        // thread (which takes it exclusively to install a handle) cannot miss it.
        std::lock_guard parked_lock(parked_mutex_);
        parked_.push_back(r);
        return;
    }
    if (r->only_on_session != 0 && zoo_client_id(zh_)->client_id != r->only_on_session) {
        // A handle of another session (or one not connected yet, whose session is still to come):
        // the node this was for went with its session, and the path may hold someone else's.
        lock.unlock();
        return r->fail(make_error_code(errc::session_expired));
    }
    r->on_send(generation_);
    r->sent_at = std::chrono::steady_clock::now();
    last_sent_.store(r->sent_at.time_since_epoch().count(), std::memory_order_relaxed);
    // Tracked before the send: the reply may come (and delete r) before send() returns.
    track_in_flight(r);
    if (lose_next_request_on_.load(std::memory_order_relaxed) != std::thread::id{}) {
        auto me = std::this_thread::get_id();
        if (lose_next_request_on_.compare_exchange_strong(me, std::thread::id{})) return;
    }
    int rc = r->send(zh_);
    lock.unlock();
    // On success the reply may already have deleted r.
    if (rc != ZOK) {
        untrack_in_flight(r);
        on_failure(r, rc);
    }
}

void client_impl::track_in_flight(request* r) {
    std::lock_guard lock(in_flight_mutex_);
    r->in_flight = true;
    r->in_flight_prev = nullptr;
    r->in_flight_next = in_flight_head_;
    if (in_flight_head_) in_flight_head_->in_flight_prev = r;
    else in_flight_tail_ = r;
    in_flight_head_ = r;
}

void client_impl::unlink_in_flight(request* r) {
    r->in_flight = false;
    if (r->in_flight_prev) r->in_flight_prev->in_flight_next = r->in_flight_next;
    else in_flight_head_ = r->in_flight_next;
    if (r->in_flight_next) r->in_flight_next->in_flight_prev = r->in_flight_prev;
    else in_flight_tail_ = r->in_flight_prev;
    r->in_flight_prev = r->in_flight_next = nullptr;
    if (answer_waiters_ > 0) in_flight_answered_.notify_all();
}

void client_impl::untrack_in_flight(request* r) {
    closing_handle ready{};
    {
        std::lock_guard lock(in_flight_mutex_);
        if (!r->in_flight) return;
        unlink_in_flight(r);
        // The last answer a closing handle waited for: it can close now.
        auto closing = std::find_if(closing_.begin(), closing_.end(),
                                    [&](const closing_handle& h) { return h.generation == r->sent_generation; });
        if (closing != closing_.end() && !has_in_flight(closing->generation)) {
            ready = std::move(*closing);
            closing_.erase(closing);
        }
    }
    if (ready.zh) {
        // Its deadline timer is the session thread's: cancel it there.
        asio::post(rt_->session, [deadline = ready.deadline] { deadline->cancel(); });
        close_handle_now(ready.zh, ready.generation);
    }
}

bool client_impl::has_in_flight(std::uint64_t generation) const {
    for (request* r = in_flight_head_; r; r = r->in_flight_next)
        if (r->sent_generation == generation) return true;
    return false;
}

void client_impl::wait_for_answers(std::uint64_t generation, std::chrono::milliseconds bound) {
    std::unique_lock lock(in_flight_mutex_);
    ++answer_waiters_;
    in_flight_answered_.wait_for(lock, bound, [&] { return !has_in_flight(generation); });
    --answer_waiters_;
}

std::optional<std::chrono::steady_clock::time_point> client_impl::oldest_in_flight(std::uint64_t generation) const {
    std::lock_guard lock(in_flight_mutex_);
    // Newest at the head: the oldest of `generation` is the one nearest the tail.
    for (request* r = in_flight_tail_; r; r = r->in_flight_prev)
        if (r->sent_generation == generation && !r->session_own) return r->sent_at;
    return std::nullopt;
}

std::size_t client_impl::in_flight() const {
    std::lock_guard lock(in_flight_mutex_);
    std::size_t n = 0;
    for (request* r = in_flight_head_; r; r = r->in_flight_next) ++n;
    return n;
}

std::size_t client_impl::answer_lost(std::uint64_t generation) {
    std::vector<request*> lost;
    {
        std::lock_guard lock(in_flight_mutex_);
        for (request* r = in_flight_head_; r;) {
            request* next = r->in_flight_next;
            if (r->sent_generation == generation) {
                unlink_in_flight(r);
                lost.push_back(r);
            }
            r = next;
        }
    }
    if (!lost.empty())
        log::write(log::level::debug, "zkr::client: the ZooKeeper C client closed a handle without answering " +
                                          std::to_string(lost.size()) + " request(s); answered as closed");
    for (request* r : lost) on_failure(r, ZCLOSING);
    return lost.size();
}

void client_impl::on_failure(request* r, int rc) {
    error_code ec = map_rc(rc);
    if (may_have_been_applied(ec) && !r->doubt) r->doubt = ec;
    bool retry = r->retry_allowed && !closed_ &&
                 (is_retryable(ec) || (ec == errc::session_expired && r->only_on_session == 0));
    if (!retry) return r->fail(final_failure(ec, r->doubt));
    // Handlers posted to our threads hold the client weakly: one never run (posted as a thread
    // ends) must not keep the client, and with it that thread's io_context, alive for ever.
    asio::post(rt_->session, [weak = weak_from_this(), r, ec] {
        if (auto self = weak.lock()) self->schedule_retry(r, ec);
        else r->fail(make_error_code(errc::client_closed));
    });
}

void client_impl::schedule_retry(request* r, error_code ec) {
    if (closed_) return r->fail(make_error_code(errc::client_closed));
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - r->started);
    auto sleep = options_.retry_policy->next_sleep(retry::attempt{r->retries, elapsed, ec});
    if (!sleep) return r->fail(final_failure(ec, r->doubt));
    ++r->retries;
    if (r->observe_id != 0)
        observer_events_->retry({r->observe_id, r->observed_operation(), r->observed_path()}, ec, r->retries,
                                std::clamp(*sleep, retry::shortest_sleep, retry::longest_sleep));
    if (!r->backoff) r->backoff = std::make_unique<asio::steady_timer>(rt_->session);
    // A policy of the user's own may ask for nothing (a busy loop) or for ever (a timer overflow).
    r->backoff->expires_after(std::clamp(*sleep, retry::shortest_sleep, retry::longest_sleep));
    backing_off_.insert(r);
    r->backoff->async_wait([weak = weak_from_this(), r](error_code) {
        auto self = weak.lock();
        if (!self) return;
        self->backing_off_.erase(r);
        if (self->closed_) return r->fail(make_error_code(errc::client_closed));
        self->submit(r);
    });
}

// ---------------------------------------------------------------- requests

void client_impl::create(std::string path, std::string data, create_mode mode, completion<create_result> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, is_sequential(mode), sizer, sizer.create(path.size(), data.size()))) return done(ec, {});
    if (!chroot_.empty() && path.find('/', 1) == std::string::npos) {
        // Under a chroot, a top-level node's parent is the chroot itself: "no node" can only
        // mean the chroot is missing, which the server's answer does not say.
        auto inner = std::make_shared<completion<create_result>>(std::move(done));
        completion<create_result> named{completion<create_result>::inline_fn(
            [weak = weak_from_this(), inner](error_code ec, create_result r) {
                if (ec == errc::no_node) {
                    ec = make_error_code(errc::chroot_missing);
                    if (auto self = weak.lock(); self && !self->chroot_missing_reported_.exchange(true))
                        log::write(log::level::error, "zkr::client: the chroot '" + self->chroot_ +
                                                          "' of the connect string does not exist on the server; "
                                                          "create it first (zkr does not create it)");
                }
                (*inner)(ec, std::move(r));
            })};
        return submit(make_create(*this, std::move(path), std::move(data), mode, std::move(named)));
    }
    submit(make_create(*this, std::move(path), std::move(data), mode, std::move(done)));
}

void client_impl::create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl,
                             completion<create_result> done) {
    if (!ttl_problem(mode, ttl).empty()) return done(make_error_code(errc::bad_arguments), {});
    request_sizer sizer(options_);
    // The TTL rides in the request: 8 bytes more than a create.
    if (auto ec = check_input(path, is_sequential(mode), sizer, sizer.create(path.size(), data.size()) + 8)) return done(ec, {});
    submit(make_create(*this, std::move(path), std::move(data), mode, std::move(done), ttl));
}

void client_impl::remove(std::string path, std::int32_t version, completion<> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.remove(path.size())); ec || path == "/")
        return done(ec ? ec : make_error_code(errc::bad_arguments));
    submit(make_remove(*this, std::move(path), version, std::move(done)));
}

std::shared_ptr<watch_state> client_impl::add_watch(const std::string& path, watch_kind kind) {
    std::call_once(watch_owner_made_, [this] {
        auto owner = std::make_shared<watch_owner>();
        owner->client = this;
        owner->client_owner = weak_from_this();
        owner->executor = user_executor_;
        watch_owner_ = std::move(owner);
    });
    auto ws = watches_.add(watch_owner_, path, kind, options_.max_request_size, chroot_.size());
    if (!ws && !watch_limit_reported_.exchange(true)) {
        log::write(log::level::error,
                   "zkr::client: a watch on '" + path + "' refused (errc::too_many_watches): the watches this client " +
                       "sets again after a reconnection already take " + std::to_string(watches_.set_watches_size()) +
                       " bytes in one request, and client_options::max_request_size is " +
                       std::to_string(options_.max_request_size) +
                       "; the server would drop every reconnection. Spread waiters over more clients "
                       "(said once per client)");
    }
    return ws;
}

void client_impl::exists(std::string path, bool watch, completion<exists_result> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.read(path.size()))) return done(ec, {});
    std::shared_ptr<watch_state> ws;
    if (watch && !(ws = add_watch(path, watch_kind::data))) return done(make_error_code(errc::too_many_watches), {});
    submit(make_exists(*this, std::move(path), std::move(ws), std::move(done)));
}

void client_impl::get_data(std::string path, bool watch, completion<data_result> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.read(path.size()))) return done(ec, {});
    std::shared_ptr<watch_state> ws;
    if (watch && !(ws = add_watch(path, watch_kind::data))) return done(make_error_code(errc::too_many_watches), {});
    submit(make_get_data(*this, std::move(path), std::move(ws), std::move(done)));
}

void client_impl::set_data(std::string path, std::string data, std::int32_t version, completion<zkr::stat> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.set_data(path.size(), data.size()))) return done(ec, {});
    submit(make_set_data(*this, std::move(path), std::move(data), version, std::move(done)));
}

void client_impl::remove_on_session(std::int64_t session, std::string path, std::int32_t version, completion<> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.remove(path.size())); ec || path == "/")
        return done(ec ? ec : make_error_code(errc::bad_arguments));
    request* r = make_remove(*this, std::move(path), version, std::move(done));
    r->only_on_session = session;
    submit(r);
}

void client_impl::exists_on_session(std::int64_t session, std::string path, completion<exists_result> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.read(path.size()))) return done(ec, {});
    request* r = make_exists(*this, std::move(path), nullptr, std::move(done));
    r->only_on_session = session;
    submit(r);
}

void client_impl::set_data_on_session(std::int64_t session, std::string path, std::string data, std::int32_t version,
                                      completion<zkr::stat> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.set_data(path.size(), data.size()))) return done(ec, {});
    request* r = make_set_data(*this, std::move(path), std::move(data), version, std::move(done));
    r->only_on_session = session;
    submit(r);
}

void client_impl::get_children(std::string path, bool watch, completion<children_result> done) {
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.read(path.size()))) return done(ec, {});
    std::shared_ptr<watch_state> ws;
    if (watch && !(ws = add_watch(path, watch_kind::child))) return done(make_error_code(errc::too_many_watches), {});
    submit(make_get_children(*this, std::move(path), std::move(ws), std::move(done)));
}

void client_impl::multi(std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done) {
    for (const auto& o : ops) {
        bool sequential = std::visit(
            [](const auto& x) {
                if constexpr (std::is_same_v<std::decay_t<decltype(x)>, op::create>) return is_sequential(x.mode);
                else return false;
            },
            o);
        const std::string& path = std::visit([](const auto& x) -> const std::string& { return x.path; }, o);
        if (!path_problem(path, sequential).empty()) return done(make_error_code(errc::invalid_path), {});
        if (auto* g = std::get_if<op::guard>(&o)) {
            for (const auto& more : g->also) {
                if (!path_problem(more).empty()) return done(make_error_code(errc::invalid_path), {});
            }
        }
    }
    // The whole request counts, each op's header with it.
    if (request_sizer sizer(options_); !sizer.fits(sizer.multi(ops))) return done(make_error_code(errc::bad_arguments), {});
    if (ops.empty()) return done({}, {});
    submit(make_multi(*this, std::move(ops), std::move(done)));
}

namespace {

// Creates `path` and its missing ancestors one after the other; a container falls back to a
// persistent node on a server without containers.
struct parents_maker : std::enable_shared_from_this<parents_maker> {
    std::weak_ptr<client_impl> client;
    std::vector<std::string> prefixes;
    std::size_t next = 0;
    int restarts = 0;
    create_mode mode;
    completion<> done;

    parents_maker(std::weak_ptr<client_impl> c, const std::string& path, create_mode m, completion<> d)
        : client(std::move(c)), mode(m), done(std::move(d)) {
        for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
            prefixes.push_back(slash == std::string::npos ? path : path.substr(0, slash));
            if (slash == std::string::npos) break;
        }
    }
    void step() {
        if (next == prefixes.size()) return done({});
        auto c = client.lock();
        if (!c) return done(make_error_code(errc::client_closed));
        c->create(prefixes[next], {}, mode, completion<create_result>(completion<create_result>::inline_fn(
                                                [self = shared_from_this()](error_code ec, create_result) {
                                                    if (ec == errc::unimplemented && self->mode == create_mode::container) {
                                                        self->mode = create_mode::persistent;
                                                        return self->step();
                                                    }
                                                    if (ec == errc::no_node && self->next > 0 && self->restarts++ < 3) {
                                                        // An empty container parent was reaped meanwhile.
                                                        self->next = 0;
                                                        return self->step();
                                                    }
                                                    if (ec && ec != errc::node_exists) return self->done(ec);
                                                    ++self->next;
                                                    self->step();
                                                })));
    }
};

}  // namespace

void client_impl::create_parents(std::string path, create_mode mode, completion<> done) {
    // Checked whole before any ancestor is made: the last create is the largest.
    request_sizer sizer(options_);
    if (auto ec = check_input(path, false, sizer, sizer.create(path.size(), 0))) return done(ec);
    if (is_sequential(mode)) return done(make_error_code(errc::bad_arguments));
    if (path == "/") return done({});
    std::make_shared<parents_maker>(weak_from_this(), path, mode, std::move(done))->step();
}

void client_impl::remove_watch(std::shared_ptr<watch_state> ws, completion<> done) {
    // `done` may run a recipe's next step inline (which sends, and takes these locks): it is
    // never called with a lock held.
    bool fired;
    {
        std::lock_guard lock(ws->mutex);
        fired = ws->done;
    }
    if (fired) return done(make_error_code(errc::no_watcher));
    bool stale;
    {
        // A watch armed by a late answer of a handle given up: the server of the current
        // session knows nothing of it, and a removal there would take the watches of others on
        // this path. Its handle ends it as it closes; end it here already.
        std::shared_lock lock(handle_mutex_);
        stale = ws->armed && ws->generation != generation_;
    }
    if (stale) {
        ws->finish(make_error_code(errc::watch_removed), event_type::changed);
        retire_watch(*ws);
        return done({});
    }
    if (!watches_.sharing(*ws).empty()) {
        // Others here still need the server's watch on this path: drop only ours, locally.
        int rc = ZOK;
        bool ours = true;
        {
            std::shared_lock lock(handle_mutex_);
            ours = zh_ && ws->generation == generation_;
            if (ours) rc = remove_watch_locally(zh_, *ws);
        }
        if (!ours) return done(make_error_code(errc::no_watcher));
        if (rc != ZOK) return done(map_rc(rc));
        ws->finish(make_error_code(errc::watch_removed), event_type::changed);
        watches_.forget(ws.get());
        return done({});
    }
    // Should the server not be reached, drop the watch at the client at least, so that the C
    // client does not set it again when it reconnects: then nothing of it is left anywhere.
    auto shared_done = std::make_shared<completion<>>(std::move(done));
    submit(make_remove_all_watches(*this, ws, completion<>(completion<>::inline_fn(
        [weak = weak_from_this(), ws, shared_done](error_code ec) {
            if (ec && ec != errc::no_watcher) {
                if (auto self = weak.lock()) self->drop_watch_locally(*ws);
            }
            (*shared_done)(ec);
        }))));
}

void client_impl::drop_watch_locally(watch_state& ws) {
    bool current = false;
    {
        std::shared_lock lock(handle_mutex_);
        current = zh_ && ws.generation == generation_;
        if (current) remove_watch_locally(zh_, ws);
    }
    ws.finish(make_error_code(errc::watch_removed), event_type::changed);
    if (current) watches_.forget(&ws);
    else retire_watch(ws);
}

void client_impl::retire_watch(watch_state& ws) {
    // Under the handle lock: after_close erases a handle's context (exclusively) before it
    // releases the handle's watches, so one kept here for an open handle is always released.
    std::shared_lock lock(handle_mutex_);
    if (contexts_.count(ws.generation)) watches_.retire(&ws);
    else watches_.forget(&ws);
}

// ---------------------------------------------------------------- entry points of the templates

void start_create(client_impl& c, std::string path, std::string data, create_mode mode, handler<create_result> h) {
    c.create(std::move(path), std::move(data), mode, completion<create_result>(std::move(h), c.executor()));
}
void start_create_ttl(client_impl& c, std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl,
                      handler<create_result> h) {
    c.create_ttl(std::move(path), std::move(data), mode, ttl, completion<create_result>(std::move(h), c.executor()));
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
    auto slot = asio::get_associated_cancellation_slot(h);
    c.wait_connected_async(completion<>(std::move(h), c.executor()), slot);
}
void start_next_state(client_impl& c, state_handler h) {
    auto slot = asio::get_associated_cancellation_slot(h);
    c.next_state_async(completion<connection_state>(std::move(h), c.executor()), slot);
}

void start_create_parents(client_impl& c, std::string path, create_mode mode, empty_handler h) {
    c.create_parents(std::move(path), mode, completion<>(std::move(h), c.executor()));
}

void start_watch_remove(const std::shared_ptr<watch_state>& state, void_handler handler) {
    if (!state) return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::bad_arguments));
    auto client = state->owner->client_owner.lock();
    if (!client) return post_handler(std::move(handler), state->owner->executor, make_error_code(errc::client_closed));
    client->remove_watch(state, completion<>(std::move(handler), client->executor()));
}

}  // namespace zkr::detail
