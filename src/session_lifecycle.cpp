// The session lifecycle of a client: opening handles (off the session thread: the C client
// resolves host names as it opens), session events, losing a session and replacing its handle,
// the lease heartbeat, closing sessions we gave up on once a server is reachable, and closing.
#include "client_impl.hpp"

#include "connect_string.hpp"
#include "zk_log_bridge.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/post.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>

#include <netdb.h>
#include <sys/socket.h>

namespace zkr::detail {
namespace asio = boost::asio;

namespace {

std::string session_hex(std::int64_t id) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(id));
    return text;
}

// Global watcher of a handle: session state changes, handed to the session thread.
void on_handle_watcher(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* ctx = static_cast<handle_context*>(context);
    client_impl* c = ctx->client;
    std::uint64_t generation = ctx->generation;
    c->note_handle_event(generation, state);
    asio::post(c->session_executor(), [c, generation, state] { c->on_handle_event(generation, state); });
}

void on_auth_reply(int rc, const void*) {
    if (rc != ZOK) log::write(log::level::error, "zkr::client: ZooKeeper digest authentication failed: " + make_zk_error_code(rc).message());
}

// Every credential, in order, before any request: the C client sends them first on each connection.
void add_credentials(zhandle_t* zh, const std::vector<digest_credentials>& credentials) {
    for (const auto& c : credentials) {
        std::string text = c.user + ":" + c.password;
        zoo_add_auth(zh, "digest", text.data(), static_cast<int>(text.size()), &on_auth_reply, nullptr);
    }
}

// Why zookeeper_init refused a well-formed connect string: almost always no host name resolved.
std::string describe_open_failure(int err, const std::string& connect) {
    std::string unresolved;
    for (const auto& host : connect_string_hosts(connect)) {
        addrinfo hints{};
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        int rc = getaddrinfo(host.first.c_str(), host.second.c_str(), &hints, &found);
        if (found) freeaddrinfo(found);
        if (rc != 0) unresolved += (unresolved.empty() ? "" : ", ") + host.first + " (" + gai_strerror(rc) + ")";
    }
    if (!unresolved.empty()) return "could not resolve the host name(s) of the connect string (DNS): " + unresolved;
    return std::string("the ZooKeeper C client could not open a handle: ") + std::strerror(err ? err : EINVAL);
}

}  // namespace

void client_impl::start() {
    rt_->start();
    asio::post(rt_->session, [weak = weak_from_this()] {
        if (auto self = weak.lock()) {
            self->open_handle();
            self->schedule_heartbeat();
        }
    });
}

void client_impl::open_handle() {
    if (closed_) return;
    std::uint64_t generation;
    handle_context* ctx;
    {
        std::unique_lock lock(handle_mutex_);
        generation = generation_;
        auto& slot = contexts_[generation];
        slot = std::make_unique<handle_context>(handle_context{this, generation});
        ctx = slot.get();
    }
    // zookeeper_init resolves the host names: a slow DNS server must not hold up the session thread.
    asio::post(rt_->c_calls, [weak = weak_from_this(), generation, ctx] {
        auto self = weak.lock();
        if (!self) return;
        errno = 0;
        zhandle_t* zh = zookeeper_init2(self->options_.connect.c_str(), &on_handle_watcher,
                                        static_cast<int>(self->options_.session_timeout.count()), nullptr, ctx, 0,
                                        &forward_c_client_log);
        std::string problem;
        if (!zh) {
            problem = describe_open_failure(errno, self->options_.connect);
        } else {
            // By default the C client resolves the connect string again on every turn of its I/O
            // loop; once a minute is plenty (a lost connection still resolves at once).
            zoo_set_servers_resolution_delay(zh, 60'000);
            add_credentials(zh, self->options_.auth);
            if (self->closed_) {  // closed meanwhile: this handle was never anyone's
                zookeeper_close(zh);
                return;
            }
        }
        asio::post(self->rt_->session, [weak, generation, zh, problem = std::move(problem)] {
            if (auto self = weak.lock()) self->on_handle_opened(generation, zh, problem);
            else if (zh) zookeeper_close(zh);
        });
    });
}

void client_impl::on_handle_opened(std::uint64_t generation, zhandle_t* zh, std::string problem) {
    if (!zh) {
        bool news;
        {
            std::lock_guard lock(state_mutex_);
            news = open_problem_ != problem;
            open_problem_ = problem;
        }
        {
            std::unique_lock lock(handle_mutex_);
            contexts_.erase(generation);
        }
        // Said once per cause, not once per attempt.
        if (news) log::write(log::level::warning, "zkr::client " + quoted_path(options_.connect) + ": " + problem + "; trying again");
        // Like a failed connection attempt: what waits for a handle fails, and its retry policy decides.
        fail_parked(make_error_code(errc::connection_loss));
        if (closed_) return;
        reopen_timer_.expires_after(reopen_delay_);
        reopen_delay_ = std::min(reopen_delay_ * 2, std::chrono::milliseconds(5000));
        reopen_timer_.async_wait([weak = weak_from_this()](error_code ec) {
            if (auto self = weak.lock(); self && !ec) self->open_handle();
        });
        return;
    }
    if (closed_ || generation != generation_) return close_handle_later(zh, generation);
    reopen_delay_ = std::chrono::milliseconds(250);
    {
        std::lock_guard lock(state_mutex_);
        open_problem_.clear();
    }
    {
        std::unique_lock lock(handle_mutex_);
        zh_ = zh;
    }
    // The C client may have delivered this handle's first event (connected) before we got here
    // from zookeeper_init: it was kept for now (see on_handle_event).
    if (auto early = std::exchange(early_events_, {}); !early.empty() && early.front().first == generation) {
        for (auto [g, zstate] : early) on_handle_event(g, zstate);
    }
    std::vector<request*> parked;
    {
        std::lock_guard lock(parked_mutex_);
        parked.swap(parked_);
    }
    for (request* r : parked) submit(r);
}

void client_impl::fail_parked(error_code ec) {
    std::vector<request*> parked;
    {
        std::lock_guard lock(parked_mutex_);
        parked.swap(parked_);
    }
    for (request* r : parked) {
        if (ec == errc::client_closed) r->fail(ec);
        else on_failure(r, ec.value());
    }
}

void client_impl::close_handle_later(zhandle_t* zh, std::uint64_t generation) {
    // The server fails a silent session after the timeout it granted, not the one we asked for.
    auto deadline = std::make_shared<asio::steady_timer>(rt_->session, session_timeout());
    {
        std::lock_guard lock(in_flight_mutex_);
        if (!has_in_flight(generation)) deadline.reset();
        // The last answer closes it (untrack_in_flight); a handle that no server answers fails
        // its requests within a session timeout, and this deadline bounds it anyway.
        else closing_.push_back(closing_handle{zh, generation, deadline});
    }
    if (!deadline) return close_handle_now(zh, generation);
    deadline->async_wait([weak = weak_from_this(), generation](error_code ec) {
        auto self = weak.lock();
        if (ec || !self) return;
        closing_handle due{};
        {
            std::lock_guard lock(self->in_flight_mutex_);
            auto it = std::find_if(self->closing_.begin(), self->closing_.end(),
                                   [&](const closing_handle& h) { return h.generation == generation; });
            if (it == self->closing_.end()) return;  // answered meanwhile, and closed
            due = std::move(*it);
            self->closing_.erase(it);
        }
        self->close_handle_now(due.zh, due.generation);
    });
}

void client_impl::close_handle_now(zhandle_t* zh, std::uint64_t generation) {
    // zookeeper_close joins the handle's threads and, on a live connection, waits for the
    // server's answer to the close: never on the session thread.
    asio::post(rt_->c_calls, [weak = weak_from_this(), zh, generation] {
        zookeeper_close(zh);
        if (auto self = weak.lock()) self->after_close(generation);
    });
}

void client_impl::after_close(std::uint64_t generation) {
    answer_lost(generation);
    {
        // The C client will not call the handle's watcher any more: its context can go.
        std::unique_lock lock(handle_mutex_);
        contexts_.erase(generation);
    }
    watches_.release_handle(generation, make_error_code(closed_ ? errc::client_closed : errc::session_expired));
}

std::size_t client_impl::handle_contexts() const {
    std::shared_lock lock(handle_mutex_);
    return contexts_.size();
}

void client_impl::note_handle_event(std::uint64_t generation, int zstate) noexcept {
    // Never for an older handle than the one recorded: a given-up handle stays open until it has
    // answered its requests, and its late events must not speak for the new one's connection.
    const std::uint64_t mine = (generation << 1) | (zstate == ZOO_CONNECTED_STATE ? 0 : 1);
    // Any state but connected ends what the last connection carried (watch events included).
    if (zstate != ZOO_CONNECTED_STATE) connection_drops_.fetch_add(1);
    std::uint64_t seen = c_client_down_.load();
    while ((seen >> 1) <= generation && !c_client_down_.compare_exchange_weak(seen, mine)) {
    }
}

void client_impl::on_handle_event(std::uint64_t generation, int zstate) {
    if (closed_ || generation != generation_) return;
    std::int64_t session;
    std::int64_t granted = 0;
    bool granted_changed = false;
    {
        std::shared_lock lock(handle_mutex_);
        if (!zh_) {
            // Before on_handle_opened recorded the handle: keep the event for it to replay.
            early_events_.emplace_back(generation, zstate);
            return;
        }
        if (zstate == ZOO_CONNECTED_STATE) {
            granted = zoo_recv_timeout(zh_);
            granted_changed = granted != negotiated_timeout_.exchange(granted);
        }
        session = zoo_client_id(zh_)->client_id;
    }
    // Said once per value the server grants, not again on every reconnection.
    if (granted_changed && granted != options_.session_timeout.count())
        log::write(log::level::info, "zkr::client: the server granted a session timeout of " + std::to_string(granted) +
                                         " ms (" + std::to_string(options_.session_timeout.count()) +
                                         " ms requested): servers keep it within their [minSessionTimeout, "
                                         "maxSessionTimeout]");
    if (zstate == ZOO_CONNECTED_STATE) {
        lost_timer_.cancel();
        {
            // The handshake was the server's answer a moment ago.
            std::lock_guard lock(lease_mutex_);
            lease_generation_ = generation;
            lease_sent_ = std::chrono::steady_clock::now();
        }
        if (!session_established_) {
            session_established_ = true;
            suspended_ = false;
            established_session_ = session;
            ++session_count_;
            report(connection_state::connected, session);
        } else if (suspended_) {
            suspended_ = false;
            report(connection_state::reconnected, session);
        }
        close_given_up_sessions();
    } else if (zstate == ZOO_CONNECTING_STATE || zstate == ZOO_ASSOCIATING_STATE) {
        if (session_established_ && !suspended_) {
            suspended_ = true;
            report(connection_state::suspended, session);
            // The server expires a silent session after its timeout; past that we cannot count
            // on it, so we call it lost and start over (Curator does the same).
            lost_timer_.expires_after(session_timeout());
            lost_timer_.async_wait([weak = weak_from_this(), generation](error_code ec) {
                auto self = weak.lock();
                if (!self || ec || self->closed_ || !self->suspended_ || generation != self->generation_) return;
                self->declare_lost("suspended for a whole session timeout", loss_cause::timed_out);
            });
        }
    } else if (zstate == ZOO_EXPIRED_SESSION_STATE) {
        declare_lost("the session expired", loss_cause::server_expired);
    } else if (zstate == ZOO_AUTH_FAILED_STATE) {
        log::write(log::level::error, "zkr::client: ZooKeeper authentication failed; opening a new session");
        declare_lost("authentication failed", loss_cause::auth_failed);
    }
}

void client_impl::declare_lost(const char* why, loss_cause cause) {
    auto [id, password] = session_credentials();
    if (id == 0) id = established_session_;
    log::write(log::level::warning, "zkr::client: session " + session_hex(id) + " lost: " + why);
    // An expiry, however it is learnt: the server's word, or our giving the session up after a
    // whole session timeout without a server (the server expires it too, or we close it there:
    // either way it is gone, and counted now, once). An authentication failure is not one.
    bool expiry = cause != loss_cause::auth_failed;
    if (expiry) count_expiry(id, cause == loss_cause::server_expired ? expiry_cause::server : expiry_cause::given_up);
    // A session we gave up may live on at the server (a server restarted, a quorum lost): its
    // ephemeral nodes, our lock nodes among them, would stall everyone else for another whole
    // timeout. Close it as soon as a server answers.
    if (cause != loss_cause::server_expired && id != 0 && !password.empty())
        given_up_.push_back(given_up_session{id, std::move(password), expiry});
    report(connection_state::lost, id);
    replace_handle(make_error_code(errc::session_expired));
}

void client_impl::count_expiry(std::int64_t session, expiry_cause cause) {
    if (session != 0 && std::exchange(expiry_counted_, session) == session) return;  // counted already
    if (observer_events_) observer_events_->session_expired(session, cause);
}

void client_impl::replace_handle(error_code reason) {
    zhandle_t* old;
    std::uint64_t old_generation;
    {
        std::unique_lock lock(handle_mutex_);
        old = std::exchange(zh_, nullptr);
        old_generation = generation_++;
    }
    {
        std::lock_guard lock(lease_mutex_);
        lease_generation_ = generation_;
        lease_sent_ = {};
    }
    session_established_ = false;
    suspended_ = false;
    established_session_ = 0;
    lost_timer_.cancel();
    // The old handle's watches end now but stay alive until it is closed (its C client may call
    // them until then; the close releases them), so this comes first. The old handle closes
    // once it has answered the requests it holds (or after a session timeout); what it leaves
    // unanswered completes as ZCLOSING would (session_expired), retried on the new handle where
    // that is safe.
    watches_.end_stale(generation_, false, reason);
    if (old) close_handle_later(old, old_generation);
    open_handle();
}

void client_impl::report(connection_state s, std::int64_t session) {
    std::map<std::uint64_t, completion<>> connected_waiters;
    std::map<std::uint64_t, completion<connection_state>> state_waiters;
    std::vector<std::shared_ptr<listener_entry>> listeners;
    std::vector<std::shared_ptr<internal_listener>> internal;
    {
        std::lock_guard lock(state_mutex_);
        state_ = s;
        connected_ = s == connection_state::connected || s == connection_state::reconnected;
        if (connected_) connected_waiters.swap(connected_waiters_);
        state_waiters.swap(next_state_waiters_);
        for (auto& [id, l] : listeners_) listeners.push_back(l);
        for (auto& [id, l] : internal_listeners_) internal.push_back(l);
        state_changed_.notify_all();
    }
    // The observer hears of the change before the holds it ends.
    if (observer_events_) observer_events_->connection_state_changed(s, session);
    // zkr's own first, here and now: a lost session's holds are marked lost before any user
    // code hears of it, however busy the user's executor is.
    session_event ev{s, session};
    for (auto& l : internal) {
        if (l->active) l->fn(ev);
    }
    for (auto& [key, w] : connected_waiters) w({});
    for (auto& [key, w] : state_waiters) w({}, s);
    if (listeners.empty()) return;
    asio::post(listener_strand_, [listeners = std::move(listeners), s] {
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

void client_impl::schedule_heartbeat() {
    if (closed_) return;
    // A quarter of the session timeout: the lease (two thirds of it) stays fresh with room for a
    // slow answer, and an idle client sends no more than the C client's own pings would.
    auto period = std::max(session_timeout() / 4, std::chrono::milliseconds(50));
    // The stall probe looks more often (half its wait: a probe goes out within 1.5 waits).
    auto tick = period;
    if (options_.stall_probe_after.count() > 0)
        tick = std::min(period, std::max(options_.stall_probe_after / 2, std::chrono::milliseconds(10)));
    heartbeat_timer_.expires_after(tick);
    heartbeat_timer_.async_wait([weak = weak_from_this(), period](error_code ec) {
        auto self = weak.lock();
        if (!self || ec || self->closed_) return;
        using clock = std::chrono::steady_clock;
        auto now = clock::now();
        auto last_sent = clock::time_point(clock::duration(self->last_sent_.load()));
        bool connected;
        std::uint64_t generation;
        {
            std::shared_lock lock(self->handle_mutex_);
            connected = self->zh_ && zoo_state(self->zh_) == ZOO_CONNECTED_STATE;
            generation = self->generation_;
        }
        if (connected && now - last_sent >= period) {
            self->submit(make_heartbeat(*self));
        } else {
            stall_probe_inputs in{connected,
                                  generation,
                                  now,
                                  self->oldest_in_flight(generation),
                                  last_sent,
                                  clock::time_point(clock::duration(self->last_reply_.load())),
                                  clock::duration(self->round_trip_floor_.load())};
            if (self->stall_probe_.due(in)) {
                if (!self->stall_probe_reported_) {  // once per client: an operator's clue, not a stream
                    self->stall_probe_reported_ = true;
                    log::write(log::level::info,
                               "zkr::client: the server answered nothing for " +
                                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - *in.oldest_unanswered).count()) +
                                   " ms with a request waiting; probing it (ZooKeeper 3.6.0 to 3.8.0 can hold a request "
                                   "until its next one arrives: ZOOKEEPER-4537, fixed in 3.6.4, 3.7.2 and 3.8.1)");
                }
                self->submit(make_heartbeat(*self));
            }
        }
        self->schedule_heartbeat();
    });
}

// ---------------------------------------------------------------- given-up sessions

// One attempt to close a given-up session: a handle joins it with its id and password, and is
// closed as soon as the server says whether the session still lives (then the close ends it and
// its ephemeral nodes go) or has expired.
struct session_closer {
    std::atomic<bool> answered{false};
    std::atomic<bool> closing{false};
    std::atomic<int> outcome{0};  // ZOO_CONNECTED_STATE or ZOO_EXPIRED_SESSION_STATE
    // Whoever takes it (exchange) closes it: the attempt when it is done, or close().
    std::atomic<zhandle_t*> zh{nullptr};
    std::function<void()> on_answer;  // posts the close; set before the handle exists
};

namespace {

void on_closer_event(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    if (state != ZOO_CONNECTED_STATE && state != ZOO_EXPIRED_SESSION_STATE && state != ZOO_AUTH_FAILED_STATE) return;
    auto* closer = static_cast<session_closer*>(context);
    if (closer->answered.exchange(true)) return;
    closer->outcome = state;
    closer->on_answer();
}

}  // namespace

void client_impl::close_given_up_sessions() {
    if (closing_given_up_ || given_up_.empty() || closed_ || !close_given_up_enabled_) return;
    given_up_session s = std::move(given_up_.front());
    given_up_.erase(given_up_.begin());
    close_given_up(std::move(s));
}

void client_impl::close_given_up(given_up_session s) {
    closing_given_up_ = true;
    auto closer = std::make_shared<session_closer>();
    std::weak_ptr<client_impl> weak = weak_from_this();
    // Runs the close on the C-call thread once, then reports back to the session thread.
    auto make_finish = [weak, s](std::shared_ptr<session_closer> closer) {
      return [weak, closer, s](bool timed_out) {
        auto self = weak.lock();
        if (!self || closer->closing.exchange(true)) return;
        asio::post(self->rt_->c_calls, [weak, closer, s, timed_out]() mutable {
            if (auto zh = closer->zh.exchange(nullptr)) zookeeper_close(zh);
            auto self = weak.lock();
            if (!self) return;
            asio::post(self->rt_->session, [weak, closer, s, timed_out]() mutable {
                auto self = weak.lock();
                if (!self) return;
                self->closer_timer_.cancel();
                self->closing_given_up_ = false;
                self->active_closer_.reset();
                int outcome = closer->outcome;
                if (outcome == ZOO_CONNECTED_STATE) {
                    log::write(log::level::info, "zkr::client: closed given-up session " + session_hex(s.id) + " on the server");
                } else if (outcome == ZOO_EXPIRED_SESSION_STATE) {
                    // The server's word on a session we gave up: an expiry counted already (once
                    // per session), when it was given up.
                    log::write(log::level::info, "zkr::client: given-up session " + session_hex(s.id) + " had expired on the server" +
                                                     (s.expiry_counted ? " (counted as expired when given up)" : ""));
                } else if (outcome == 0 && timed_out && ++s.attempts < 5 && !self->closed_) {
                    self->given_up_.push_back(std::move(s));  // no answer yet: again with the next connection
                }
                self->close_given_up_sessions();
            });
        });
      };
    };
    auto finish = make_finish(closer);
    active_closer_ = closer;  // close() closes its handle if the attempt is still running
    // The closer must not own itself through its watcher's callback: a weak link back.
    closer->on_answer = [make_finish, weak_closer = std::weak_ptr<session_closer>(closer)] {
        if (auto c = weak_closer.lock()) make_finish(c)(false);
    };
    auto wait = std::min(session_timeout(), std::chrono::milliseconds(5000));
    asio::post(rt_->c_calls, [weak, closer, s, finish, wait] {
        auto self = weak.lock();
        if (!self) return;
        clientid_t id{};
        id.client_id = s.id;
        std::memcpy(id.passwd, s.password.data(), std::min(s.password.size(), sizeof id.passwd));
        // The watcher may fire before zookeeper_init returns: the close it posts runs after this
        // task, when closer->zh is set.
        zhandle_t* zh = zookeeper_init2(self->options_.connect.c_str(), &on_closer_event,
                                        static_cast<int>(self->options_.session_timeout.count()), &id, closer.get(), 0,
                                        &forward_c_client_log);
        if (!zh) return finish(true);
        closer->zh = zh;
        if (self->closed_) {  // close() may have missed it
            if (auto mine = closer->zh.exchange(nullptr)) zookeeper_close(mine);
            return;
        }
        add_credentials(zh, self->options_.auth);
        asio::post(self->rt_->session, [weak, finish, wait] {
            auto self = weak.lock();
            if (!self || self->closed_) return finish(true);
            self->closer_timer_.expires_after(wait);
            self->closer_timer_.async_wait([finish](error_code ec) {
                if (!ec) finish(true);
            });
        });
    });
}

// ---------------------------------------------------------------- closing

void client_impl::close() {
    if (closed_.exchange(true)) return;
    zhandle_t* zh = nullptr;
    std::uint64_t closed_generation = 0;
    std::shared_ptr<session_closer> closer;
    std::vector<closing_handle> waiting;  // given-up handles still waiting for answers
    auto work = [&] {
        closer = std::move(active_closer_);
        {
            std::unique_lock lock(handle_mutex_);
            zh = std::exchange(zh_, nullptr);
            closed_generation = generation_++;
        }
        {
            std::lock_guard lock(in_flight_mutex_);
            waiting.swap(closing_);
        }
        for (auto& h : waiting) {  // the session thread's timers: done with here
            h.deadline->cancel();
            h.deadline.reset();
        }
        lost_timer_.cancel();
        reopen_timer_.cancel();
        heartbeat_timer_.cancel();
        closer_timer_.cancel();
        for (request* r : backing_off_) r->backoff->cancel();
        watches_.end_stale(0, true, make_error_code(errc::client_closed));
        fail_parked(make_error_code(errc::client_closed));
        std::map<std::uint64_t, completion<>> connected_waiters;
        {
            std::lock_guard lock(state_mutex_);
            connected_waiters.swap(connected_waiters_);
        }
        for (auto& [key, w] : connected_waiters) w(make_error_code(errc::client_closed));
        report(connection_state::closed, established_session_);
    };
    if (rt_->on_session_thread()) {
        work();
    } else {
        std::promise<void> done;
        asio::post(rt_->session, [&] {
            work();
            done.set_value();
        });
        done.get_future().wait();
    }
    // A given-up session being closed: its handle is ours to close now.
    if (closer) {
        if (auto closer_zh = closer->zh.exchange(nullptr)) zookeeper_close(closer_zh);
    }
    for (auto& h : waiting) {
        zookeeper_close(h.zh);
        after_close(h.generation);
    }
    // Closing ends the session on the server: its ephemeral nodes go now, not after a timeout.
    // Pending requests complete with ZCLOSING, mapped to client_closed. No new ones are sent
    // (closed_), so on a live connection the ones in flight are answered within a round trip:
    // wait for that (briefly) before closing, when the C client is least likely to lose them.
    if (zh) {
        if (zoo_state(zh) == ZOO_CONNECTED_STATE) wait_for_answers(closed_generation, std::chrono::milliseconds(1000));
        zookeeper_close(zh);
        after_close(closed_generation);
    }
}

void client_impl::shutdown() {
    close();
    {
        // Recipe state may hold timers on the session thread: drop it while that still runs.
        std::map<const void*, std::shared_ptr<void>> extensions;
        std::lock_guard lock(extensions_mutex_);
        extensions.swap(extensions_);
    }
    rt_->stop();
    // After the threads: every event they made is queued by now.
    if (observer_events_) observer_events_->stop();
}

}  // namespace zkr::detail
