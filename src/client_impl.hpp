// Internal: the session layer behind zkr::client.
//
// ---------------------------------------------------------------------------------------------
// Threads: who runs what (keep this table true)
//
// | thread                          | runs                                                      | never                          |
// |---------------------------------|-----------------------------------------------------------|--------------------------------|
// | C client I/O (one per handle)   | libzookeeper_mt's sockets; zkr's log forwarding           | anything else of zkr's         |
// | C client completion (per handle)| reply callbacks (requests.cpp): wake a blocked caller,    | block; user code; hold a zkr   |
// |                                 | run a lock-engine step inline, or post a user handler;    | lock across a C call           |
// |                                 | watch events end their watch_state; session events are    |                                |
// |                                 | posted to the session thread                              |                                |
// | zkr-session (one per client)    | session events, lost timer, lease heartbeat, retry        | user code; blocking C calls    |
// |                                 | backoff, parked requests, lock deadlines, guaranteed      | (zookeeper_init/close); waits  |
// |                                 | deletes and sweeps, marking holds of a lost session lost, | on anything but its own queue  |
// |                                 | probing a server that stopped answering (stall_probe.hpp) |                                |
// | zkr-c-calls (one per client)    | zookeeper_init (DNS) and zookeeper_close (waits up to     | user code                      |
// |                                 | 4.5 s for the server), closing given-up sessions          |                                |
// | zkr-handlers (one per client,   | user completion handlers, state listeners, lock-lost      | session machinery              |
// | unless options.executor is set) | handlers                                                  |                                |
// | zkr-observer (one per client    | options.observer's hooks, in order (observer_channel.hpp) | session machinery; user code   |
// | with options.observer)          |                                                           | other than the hooks           |
// | zkr-log (one per process)       | the log sink                                              | anything else                  |
// | user threads                    | blocking calls: they send, then wait on their own slot    |                                |
//
// So user code never runs where it could delay a session event, a deadline or a retry: a handler
// that blocks, spins or calls blocking zkr functions stalls only the user executor.
//
// Lock order (a thread holding one may take those below it, never one above):
//   1. a recipe object's own mutex: lock_engine::mutex_, latch_impl::mutex_, selector_impl::mutex_,
//      semaphore_impl::mutex_ (recipes/; each takes only its own, and sends nothing under it)
//   2. fsm_runner::mutex_ (guards one machine; the steps it asks for are sent after it is released)
//   3. handle_mutex_   shared: send, read the handle's live state; exclusive: swap handles
//   4. parked_mutex_, lease_mutex_, state_mutex_, in_flight_mutex_, watch_registry::mutex_,
//      watch_state::mutex, sync_slot's mutex, and the toolkit's leaves: hold_registry::mutex_,
//      cleanup_service::mutex_, step_io::mutex_, hold_monitor::mutex_, listing_coalescer::mutex_, count_impl::mutex_, the
//      observer's and the multi-lock's, observer_channel::mutex_ (leaves: nothing is taken or called under them;
//      observer_channel::mutex_ is also taken under a recipe object's own mutex, level 1, to queue an event)
// Recipes reach this layer only through session_port (src/session_port.hpp); their machines run
// inline on the completion thread, never block and never call user code, which they post to the
// client's executor.
// No zkr lock is held while calling zookeeper_init or zookeeper_close (close joins the C client's
// threads, whose callbacks take the locks above), nor while a completion runs a handler inline.
//
// Every request the C client holds is on a list until its completion runs. zookeeper_close
// should complete each with ZCLOSING, but libzookeeper_mt's completion thread may stop before
// those completions reach it (it checks close_requested between batches), and they are then
// never called (nor freed). So a handle that is given up closes only once it has answered all
// its requests (or after a session timeout), and whoever closed a handle (zkr-c-calls, or the
// thread that closes the client) answers, once zookeeper_close has returned, every request of
// that handle still on the list, exactly as ZCLOSING would have: retried on the next handle, or
// failed.
// ---------------------------------------------------------------------------------------------
#pragma once

#include "completion.hpp"
#include "observer_channel.hpp"
#include "requests.hpp"
#include "runtime.hpp"
#include "session_port.hpp"
#include "stall_probe.hpp"
#include "watch_registry.hpp"
#include "zkr/client.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_set>

namespace zkr::detail {

/// The context of a handle's global watcher: which client, and which of its handles. Owned by the
/// client until the handle is closed.
struct handle_context {
    class client_impl* client;
    std::uint64_t generation;
};

struct session_closer;  // session_lifecycle.cpp

class client_impl final : public session_port, public std::enable_shared_from_this<client_impl> {
public:
    explicit client_impl(client_options options);
    ~client_impl();

    void start();     // starts the threads and the first handle
    void shutdown();  // close() + stop the threads; idempotent
    void close();

    /// Per-client state of a recipe family (e.g. the lock engine), made on first use and
    /// dropped when the client shuts down.
    std::shared_ptr<void> extension(const void* key, const std::function<std::shared_ptr<void>()>& make) override;
    std::weak_ptr<session_port> weak_port() override { return weak_from_this(); }

    const client_options& options() const { return options_; }
    /// Where user handlers run: options.executor, or the handler thread.
    boost::asio::any_io_executor executor() const override { return user_executor_; }
    /// The session thread's executor: session machinery only, never user code.
    boost::asio::io_context::executor_type session_executor() { return rt_->session.get_executor(); }
    const std::shared_ptr<runtime>& threads() const override { return rt_; }

    connection_state state() const;
    bool is_connected() const override;
    /// The session of the current handle, read live from the C client (which learns it before
    /// any reply of that session reaches us); 0 while there is none.
    std::int64_t session_id() const override;
    session_health health(std::int64_t session) const override;
    /// Until when `session` surely lives on the server, as far as this client can tell: the
    /// lease renewed by every answer of the server (the epoch unless `session` is live now).
    std::chrono::steady_clock::time_point lease_until(std::int64_t session) const override;
    std::chrono::milliseconds session_timeout() const override { return std::chrono::milliseconds(negotiated_timeout_.load()); }
    std::uint64_t session_count() const override { return session_count_.load(); }
    std::uint64_t connection_drops() const override { return connection_drops_.load(); }
    bool closed() const override { return closed_.load(); }
    /// The current session's id and password (for tests that expire it from outside).
    std::pair<std::int64_t, std::string> session_credentials() const;
    /// How many handle contexts are kept (one per open handle; tests check it stays bounded).
    std::size_t handle_contexts() const;
    /// For tests that need a given-up session to linger on the server (as it does when no server
    /// answers): false holds back closing given-up sessions.
    void close_given_up_sessions_for_tests(bool enabled) { close_given_up_enabled_ = enabled; }

    /// `asked`: the timeout the caller gave, for the message (none: a deadline was given).
    void wait_connected(std::chrono::steady_clock::time_point deadline, std::optional<std::chrono::milliseconds> asked);
    subscription on_state_change(std::function<void(connection_state)> listener);
    /// zkr's own listeners: called on the session thread, in order; must not block.
    subscription on_session_event(std::function<void(const session_event&)> listener) override;
    /// Per-operation cancellation through `slot` (any type): completes with errc::cancelled.
    void wait_connected_async(completion<> done, boost::asio::cancellation_slot slot = {});
    void next_state_async(completion<connection_state> done, boost::asio::cancellation_slot slot = {});

    // Requests.
    void create(std::string path, std::string data, create_mode mode, completion<create_result> done) override;
    void create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl,
                    completion<create_result> done) override;
    void remove(std::string path, std::int32_t version, completion<> done) override;
    void exists(std::string path, bool watch, completion<exists_result> done) override;
    void get_data(std::string path, bool watch, completion<data_result> done) override;
    void set_data(std::string path, std::string data, std::int32_t version, completion<zkr::stat> done) override;
    void remove_on_session(std::int64_t session, std::string path, std::int32_t version, completion<> done) override;
    void exists_on_session(std::int64_t session, std::string path, completion<exists_result> done) override;
    void set_data_on_session(std::int64_t session, std::string path, std::string data, std::int32_t version,
                             completion<zkr::stat> done) override;
    void get_children(std::string path, bool watch, completion<children_result> done) override;
    /// A watch state for a read about to be sent; null (logged once) for errc::too_many_watches.
    std::shared_ptr<watch_state> add_watch(const std::string& path, watch_kind kind);
    void multi(std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done) override;
    /// Creates `path` and its missing ancestors (containers fall back to persistent nodes on a
    /// server without them); an existing node is fine.
    void create_parents(std::string path, create_mode mode, completion<> done) override;
    void remove_watch(std::shared_ptr<watch_state> ws, completion<> done) override;
    /// Ends `ws` at the C client only (the server's watch, if any, is left to its connection).
    void drop_watch_locally(watch_state& ws);
    /// Takes an ended watch out of the registry; one of a handle still open stays alive until
    /// that handle closes (its C client may still call it).
    void retire_watch(watch_state& ws);

    /// Sends (or resends) a request on the current handle, or parks it until there is one.
    void submit(request* r);
    /// A request failed with C client code `rc`: retry it, or fail it.
    void on_failure(request* r, int rc);
    /// The observer's side of a request (client_options::observer): its start (first send) and end.
    void observe_started(request& r);
    void observe_finished(const request& r, error_code result);
    const std::shared_ptr<observer_channel>& observer_events() const override { return observer_events_; }
    /// Every reply: an answer of the server renews the lease of the handle it was sent on.
    void note_reply(const request& r, int rc);
    /// The C client holds `r` now (sent on handle r->sent_generation) / no more (its completion
    /// runs, or the send failed).
    void track_in_flight(request* r);
    void untrack_in_flight(request* r);
    /// How many requests the C client holds now (tests).
    std::size_t in_flight() const;
    /// When the oldest request handle `generation` still holds for a caller was sent (the
    /// session's own heartbeats and probes left out); none if it holds none.
    std::optional<std::chrono::steady_clock::time_point> oldest_in_flight(std::uint64_t generation) const;
    /// For tests: the calling thread's next request is taken as sent but never reaches the C
    /// client, like a request whose completion libzookeeper_mt loses as its handle closes.
    void lose_next_request_for_tests() { lose_next_request_on_ = std::this_thread::get_id(); }

    watch_registry& watches() { return watches_; }
    const ACL_vector* acl() const { return &acl_vector_; }

    /// Handle-level events from the C client (run on the session thread).
    void on_handle_event(std::uint64_t generation, int zstate);
    /// The same event as the C client delivers it, on its completion thread, before it is handed
    /// to the session thread: health() reads it (see c_client_down_).
    void note_handle_event(std::uint64_t generation, int zstate) noexcept;

private:
    struct listener_entry {
        std::function<void(connection_state)> fn;
        std::atomic<bool> active{true};
    };
    struct internal_listener {
        std::function<void(const session_event&)> fn;
        std::atomic<bool> active{true};
    };
    struct given_up_session {
        std::int64_t id;
        std::string password;
        bool expiry_counted = false;  // the observer counted it as expired (given_up) when it was given up
        int attempts = 0;
    };
    /// Why a session is lost (declare_lost).
    enum class loss_cause {
        server_expired,  // the server said it expired: counted as an expiry, cause server
        timed_out,       // suspended for a whole session timeout: given up, counted as an expiry, cause given_up
        auth_failed,     // authentication failed: given up, not an expiry
    };

    // session_lifecycle.cpp — all on the session thread unless said otherwise.
    void open_handle();
    void on_handle_opened(std::uint64_t generation, zhandle_t* zh, std::string problem);
    void replace_handle(error_code reason);
    void declare_lost(const char* why, loss_cause cause);
    /// Tells the observer `session` expired, once per session: a session given up and later
    /// reported expired by the server (its old handle, the given-up session's closer) is not
    /// counted again.
    void count_expiry(std::int64_t session, expiry_cause cause);
    void report(connection_state s, std::int64_t session);
    void schedule_heartbeat();
    void close_given_up_sessions();
    void close_given_up(given_up_session s);
    /// Closes a handle that is no one's any more, off the session thread, once the C client has
    /// answered every request sent on it (or a session timeout has passed): zookeeper_close with
    /// requests in flight is where libzookeeper_mt can lose their completions (see above).
    void close_handle_later(zhandle_t* zh, std::uint64_t generation);
    void close_handle_now(zhandle_t* zh, std::uint64_t generation);
    /// zookeeper_close of handle `generation` returned: answer what it lost, drop its context,
    /// end and release its watches.
    void after_close(std::uint64_t generation);
    bool has_in_flight(std::uint64_t generation) const;  // under in_flight_mutex_
    void unlink_in_flight(request* r);                    // under in_flight_mutex_
    /// Waits until handle `generation` has answered every request it holds, or `bound` passed.
    void wait_for_answers(std::uint64_t generation, std::chrono::milliseconds bound);
    /// Handle `generation` is closed (zookeeper_close returned): what it never answered is
    /// answered now as ZCLOSING would have been. Returns how many.
    std::size_t answer_lost(std::uint64_t generation);
    void fail_parked(error_code ec);

    // client_impl.cpp
    void schedule_retry(request* r, error_code ec);
    std::chrono::steady_clock::time_point current_lease() const;  // under handle_mutex_ (shared)
    error_code map_rc(int rc) const;

    client_options options_;
    std::shared_ptr<runtime> rt_;
    boost::asio::any_io_executor user_executor_;
    boost::asio::strand<boost::asio::any_io_executor> listener_strand_;

    // The handle, replaced after a session is lost. Senders and live-state readers take it shared.
    mutable std::shared_mutex handle_mutex_;
    zhandle_t* zh_ = nullptr;
    std::uint64_t generation_ = 0;
    std::map<std::uint64_t, std::unique_ptr<handle_context>> contexts_;  // until its handle is closed
    // Requests sent while there is no handle: sent on the next one, or failed if opening it fails.
    std::mutex parked_mutex_;
    std::vector<request*> parked_;
    // Requests the C client holds (sent, completion not run yet): an intrusive list.
    mutable std::mutex in_flight_mutex_;
    request* in_flight_head_ = nullptr;
    request* in_flight_tail_ = nullptr;  // the oldest sent
    std::atomic<std::thread::id> lose_next_request_on_{};
    // Handles waiting for their requests' answers before they close (under in_flight_mutex_;
    // the timers are the session thread's).
    struct closing_handle {
        zhandle_t* zh;
        std::uint64_t generation;
        std::shared_ptr<boost::asio::steady_timer> deadline;
    };
    std::vector<closing_handle> closing_;
    std::condition_variable in_flight_answered_;
    int answer_waiters_ = 0;

    // Session thread only: events of the handle being opened that came before on_handle_opened.
    std::vector<std::pair<std::uint64_t, int>> early_events_;
    std::string chroot_;                                   // of the connect string, or empty
    std::atomic<bool> chroot_missing_reported_{false};     // logged once per client
    std::atomic<bool> watch_limit_reported_{false};        // logged once per client
    std::atomic<bool> closed_{false};
    std::atomic<bool> connected_{false};
    // What the C client's latest session event said, as it delivered it: (generation << 1) | 1 when
    // that handle is not connected. libzookeeper_mt queues its CONNECTING event before it stops
    // saying connected (it first fails every request it holds), and its CONNECTED event before
    // any reply of the new connection: so health() takes the worse of this and zoo_state().
    std::atomic<std::uint64_t> c_client_down_{0};
    std::atomic<std::int64_t> negotiated_timeout_{0};
    std::atomic<std::uint64_t> session_count_{0};
    std::atomic<std::uint64_t> connection_drops_{0};  // see session_port::connection_drops
    std::atomic<std::int64_t> last_sent_{0};   // steady clock ticks of the latest send
    std::atomic<std::int64_t> last_reply_{0};  // steady clock ticks of the server's latest answer
    // The low end of the round trips seen lately (stall_probe::next_round_trip_floor), in steady clock
    // ticks: written by the completion threads, read by the session thread.
    std::atomic<std::int64_t> round_trip_floor_{0};

    // The lease: the server answered a request of handle `lease_generation_` that was sent at
    // `lease_sent_`; the session lives on the server at least a session timeout past that.
    mutable std::mutex lease_mutex_;
    std::uint64_t lease_generation_ = 0;
    std::chrono::steady_clock::time_point lease_sent_{};

    // Session thread only.
    bool session_established_ = false;
    bool suspended_ = false;
    std::int64_t established_session_ = 0;
    boost::asio::steady_timer lost_timer_;
    boost::asio::steady_timer reopen_timer_;
    boost::asio::steady_timer heartbeat_timer_;
    stall_probe stall_probe_;  // probes a server that stopped answering (stall_probe.hpp)
    bool stall_probe_reported_ = false;
    boost::asio::steady_timer closer_timer_;  // the given-up session being closed: its answer's deadline
    std::chrono::milliseconds reopen_delay_{250};
    std::unordered_set<request*> backing_off_;
    std::vector<given_up_session> given_up_;
    // The latest session counted as expired (count_expiry). A client's sessions come one after
    // another, each lost once (declare_lost runs once per handle, and a handle has one session),
    // and what the server says later of a given-up one (its old handle's events are ignored, its
    // closer's answer is only logged) is never counted: so the latest is all a repeat could be.
    std::int64_t expiry_counted_ = 0;
    bool closing_given_up_ = false;
    std::shared_ptr<session_closer> active_closer_;
    std::atomic<bool> close_given_up_enabled_{true};

    mutable std::mutex state_mutex_;
    std::condition_variable state_changed_;
    // Not suspended before the first session: there is none yet to be cut off from.
    connection_state state_ = connection_state::connecting;
    std::string open_problem_;  // why the last attempt to open a handle failed (DNS), for messages
    // Keyed, so that a per-operation cancellation can take its own out.
    std::map<std::uint64_t, completion<>> connected_waiters_;
    std::map<std::uint64_t, completion<connection_state>> next_state_waiters_;
    std::uint64_t next_waiter_ = 0;
    std::map<std::uint64_t, std::shared_ptr<listener_entry>> listeners_;
    std::map<std::uint64_t, std::shared_ptr<internal_listener>> internal_listeners_;
    std::uint64_t next_listener_id_ = 0;

    std::recursive_mutex extensions_mutex_;  // recursive: a recipe family made on first use makes the toolkit pieces it uses
    std::map<const void*, std::shared_ptr<void>> extensions_;

    watch_registry watches_;
    std::once_flag watch_owner_made_;
    std::shared_ptr<const watch_owner> watch_owner_;  // shared by all our watches; set once

    // ACL storage handed to the C client.
    std::vector<std::string> acl_strings_;
    std::vector<ACL> acl_entries_;
    ACL_vector acl_vector_{};

    // Set once, when options.observer is; stopped (after the last events) at shutdown.
    std::shared_ptr<observer_channel> observer_events_;

    live_counter<&live_objects::clients> counted_;
};

/// How recipes and tests reach a client's session layer (there is no public way).
struct client_access {
    static const std::shared_ptr<client_impl>& impl(const zkr::client& c) { return c.impl_; }
};

}  // namespace zkr::detail
