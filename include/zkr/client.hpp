/// \file
/// zkr::client — one ZooKeeper session, kept alive and renewed, with retried operations.
#pragma once
#include "zkr/export.hpp"

#include "zkr/detail/initiation.hpp"
#include "zkr/error.hpp"
#include "zkr/observer.hpp"
#include "zkr/retry.hpp"
#include "zkr/types.hpp"
#include "zkr/watch.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkr {

/// A user and password for ZooKeeper's digest authentication (see client_options::auth).
struct digest_credentials {
    std::string user{};      ///< the user name; must not be empty
    std::string password{};  ///< the password, sent with the user name as each session authenticates
};

/// What a zkr::client connects to and how it behaves. The client's constructor checks the options
/// and throws std::invalid_argument naming the one that is wrong.
struct client_options {
    /// The shortest session_timeout zkr accepts (100 ms). No server grants less in practice: it
    /// keeps a request within its [minSessionTimeout, maxSessionTimeout], by default [2, 20] x
    /// tickTime (4 s to 40 s with the usual tick of 2 s), so a shorter one is most likely seconds
    /// written as milliseconds.
    static constexpr std::chrono::milliseconds min_session_timeout{100};
    /// ZooKeeper's default jute.maxbuffer: the most a server reads in one request (0xfffff bytes).
    static constexpr std::size_t server_default_max_buffer = 0xfffff;

    /// "host:port[,host:port...][/chroot]" (hosts separated by ',').
    std::string connect{};
    /// Requested session timeout, at least min_session_timeout. The server clamps it to its
    /// [minSessionTimeout, maxSessionTimeout] (2 to 20 ticks by default) and the client uses what
    /// it granted (session_timeout() on the client; logged at info when it differs).
    std::chrono::milliseconds session_timeout{10'000};
    /// How long the blocking wait for the first connection waits when no time is given.
    std::chrono::milliseconds connection_timeout{15'000};
    /// A request the server has not answered for this long (or for 8 of the round trips the
    /// session saw lately, if that is longer: a distant or slow server is not probed on every
    /// request), with nothing else sent or answered on the session meanwhile, makes the client
    /// send the server one cheap read ("exists /"). Each probe that changes nothing doubles the
    /// wait before the next (up to 64 times); the session's own heartbeats and probes are never
    /// waited on. Why: ZooKeeper 3.6.0 to 3.8.0 (Debian 12's 3.8.0 among them; fixed in 3.6.4,
    /// 3.7.2 and 3.8.1: ZOOKEEPER-4537) can leave a request of a lone busy client unanswered until
    /// the next request reaches that server, and the C client sends no ping while a request waits:
    /// without a probe the connection times out after 2/3 of the session timeout. Zero turns
    /// probing off; at most session_timeout (past a quarter of it the idle heartbeat, also an
    /// "exists /", comes first).
    std::chrono::milliseconds stall_probe_after{100};
    /// Retries of idempotent operations (sequential creates are never retried blindly).
    retry::policy_ptr retry_policy = retry::default_policy();
    /// Digest credentials added, in order, to every session this client opens (a node's ACL may
    /// name any of them).
    std::vector<digest_credentials> auth{};
    /// ACL of created nodes.
    zkr::acl default_acl = open_acl_unsafe();
    /// The largest request, in bytes, the client sends, counted as the server counts it against
    /// its jute.maxbuffer: the whole request (its header, every path with the chroot, data, ACL,
    /// and for a multi each op's header). A larger one fails at once with errc::bad_arguments and
    /// nothing is sent: a server drops the connection of a request over its jute.maxbuffer (and
    /// the C client would send it again on every reconnection). Lock paths are held to it with
    /// room for their lock nodes (1 KiB). Default: the server's default jute.maxbuffer less 1 KiB
    /// for the packet overhead a follower adds when it forwards a write to the leader (1,047,551
    /// bytes). With servers whose jute.maxbuffer is raised, raise it to theirs less 1 KiB.
    /// At least 4096 and at most 2^31 - 1.
    std::size_t max_request_size = server_default_max_buffer - 1024;
    /// Where completions and state callbacks run. Default: a handler thread of the client's own.
    std::optional<boost::asio::any_io_executor> executor{};
    /// Hears of every session change, request, retry, lock, lease and leadership of this client,
    /// on a thread of the client's own (zkr::observer says how); zkr::metrics is one. Default:
    /// none (nothing is recorded, and no thread is started).
    std::shared_ptr<zkr::observer> observer{};
};

/// Sets a watch with a read: `client.get_data(path, zkr::set_watch)`.
struct set_watch_t {
    explicit constexpr set_watch_t() = default;
};
/// The tag that makes a read leave a watch: `client.exists(path, zkr::set_watch)`.
inline constexpr set_watch_t set_watch{};

namespace detail {
class client_impl;
struct client_access;  // recipes and tests reach the session layer through it
template <class T>
using handler = boost::asio::any_completion_handler<void(error_code, T)>;
using empty_handler = boost::asio::any_completion_handler<void(error_code)>;
using state_handler = boost::asio::any_completion_handler<void(error_code, connection_state)>;

ZKR_EXPORT void start_create(client_impl&, std::string path, std::string data, create_mode, handler<create_result>);
ZKR_EXPORT void start_create_ttl(client_impl&, std::string path, std::string data, create_mode, std::chrono::milliseconds ttl,
                                 handler<create_result>);
ZKR_EXPORT void start_remove(client_impl&, std::string path, std::int32_t version, empty_handler);
ZKR_EXPORT void start_exists(client_impl&, std::string path, bool watch, handler<exists_result>);
ZKR_EXPORT void start_get_data(client_impl&, std::string path, bool watch, handler<data_result>);
ZKR_EXPORT void start_set_data(client_impl&, std::string path, std::string data, std::int32_t version, handler<zkr::stat>);
ZKR_EXPORT void start_get_children(client_impl&, std::string path, bool watch, handler<children_result>);
ZKR_EXPORT void start_multi(client_impl&, std::vector<multi_op> ops, handler<std::vector<multi_op_result>>);
ZKR_EXPORT void start_wait_connected(client_impl&, empty_handler);
ZKR_EXPORT void start_next_state(client_impl&, state_handler);
ZKR_EXPORT void start_create_parents(client_impl&, std::string path, create_mode, empty_handler);

template <class T>
concept completion_token_not_watch = !std::is_same_v<std::decay_t<T>, set_watch_t>;
}  // namespace detail

/// Unsubscribes a listener when destroyed (or on reset()): keep it as long as the listener should
/// be called. [[nodiscard]]: a subscription not stored unsubscribes at once.
class [[nodiscard]] subscription {
public:
    /// An empty subscription (unsubscribes nothing).
    subscription() = default;
    /// Calls `cancel` once, when destroyed or reset (zkr's listener registrations make these).
    explicit subscription(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
    /// Takes over `other`'s listener; `other` is left empty.
    subscription(subscription&& other) noexcept : cancel_(std::exchange(other.cancel_, {})) {}
    /// Unsubscribes the listener this one holds, then takes over `other`'s.
    subscription& operator=(subscription&& other) noexcept {
        if (this != &other) {
            reset();
            cancel_ = std::exchange(other.cancel_, {});
        }
        return *this;
    }
    /// Unsubscribes (see reset()).
    ~subscription() { reset(); }
    /// Unsubscribes now: the listener is not called after reset() returns, unless it is running
    /// at that moment on another thread. A no-op when empty.
    void reset() {
        if (auto cancel = std::exchange(cancel_, {})) cancel();
    }

private:
    std::function<void()> cancel_;
};

/// One ZooKeeper session at a time. Connects on construction; after the session is lost it
/// reports `lost` and opens a new one by itself. Thread-safe.
///
/// Async operations: the handler signature is given per operation, its error a
/// zkr::error_code holding zkr::errc values (Asio's use_future and use_awaitable throw it as
/// zkr::system_error, the same type the blocking forms throw). The handler runs on its
/// associated executor, by default the client's (see client_options::executor) — never on the
/// ZooKeeper C client's threads nor on zkr's session thread. Idempotent operations are retried
/// under the retry policy on connection loss, operation timeout, session moved, throttling and
/// session expiry; sequential creates never are. Requests are not cancellable: each completes
/// when the server answers or the retry policy gives up (see docs/failure-semantics.md). The
/// client must outlive the operation's start; an operation started on a closed client
/// completes with errc::client_closed.
/// Blocking forms throw zkr::system_error; the forms taking zkr::error_code& report instead.
/// Blocking forms may be called from any thread, including inside completion handlers.
class ZKR_EXPORT client {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// Validates the options (std::invalid_argument naming the bad one) and starts connecting.
    /// Host names that do not resolve are not an error here: they are retried, and
    /// wait_connected() names DNS as the cause if no session comes.
    explicit client(client_options options);
    /// Closes the session (its ephemeral nodes go at once) and completes every pending
    /// operation with errc::client_closed: each handler is called, none is lost. Requests
    /// already sent get up to 1 s for their answers first (on a live connection: one round
    /// trip). Safe inside one of the client's own handlers.
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    /// Where handlers run unless they have an executor of their own: client_options::executor,
    /// else the client's own handler thread.
    executor_type get_executor() const;
    /// The options the client was made with.
    const client_options& options() const;

    /// Same as the destructor, but the object stays usable for queries; idempotent.
    void close();

    /// The state, live: a connection the C client already knows to be down reads `suspended`
    /// (or `lost`) before the event reaches the listeners. `connecting` until the first session
    /// is established (then never again: a client between sessions is `lost`). A connection
    /// coming up is seen once its event reaches the client, which can be a moment after a
    /// request on it was answered: wait_connected() waits for that.
    connection_state state() const;
    /// True while state() is connected or reconnected: the connection is up on a session.
    bool is_connected() const;
    /// Current session id; 0 before the first session is established and between sessions.
    std::int64_t session_id() const;
    /// The session timeout the server granted (the requested one before connecting).
    std::chrono::milliseconds session_timeout() const;
    /// How many sessions this client has established (1 after the first connect). Counted when
    /// the session's event reaches the client, which can be a moment after the C client has
    /// answered a first request on that session.
    std::uint64_t session_count() const;
    /// Waits until every event of this client so far has reached options().observer (events
    /// reach it asynchronously), or `timeout` passed: false then. True at once without observer.
    /// For programs that read their metrics at a given point (a test, a report at exit).
    bool flush_observer(std::chrono::milliseconds timeout) const;

    /// Blocks until connected. Throws zkr::system_error(errc::connect_timeout) naming the
    /// connect string (and DNS, when its host names do not resolve) once `deadline` passed, or
    /// errc::client_closed. time_point::max() waits for ever; a deadline already past looks once.
    void wait_connected(std::chrono::steady_clock::time_point deadline);
    /// wait_connected(deadline) for a time point of any other clock (or precision), converted once.
    template <class Clock, class Duration>
    void wait_connected(const std::chrono::time_point<Clock, Duration>& deadline) {
        wait_connected(detail::to_steady(deadline));
    }
    /// wait_connected(deadline) with the deadline `timeout` from now (any std::chrono::duration;
    /// duration::max() waits for ever).
    template <class Rep, class Period>
    void wait_connected(const std::chrono::duration<Rep, Period>& timeout) {
        wait_connected(detail::deadline_after(timeout));
    }
    /// The same with milliseconds (kept: the signature of 0.1).
    void wait_connected(std::chrono::milliseconds timeout);
    /// wait_connected(options().connection_timeout).
    void wait_connected() { wait_connected(options().connection_timeout); }

    /// Calls `listener` with every state change, in order, on the client's executor (never with
    /// `connecting`: that is where a client starts, not a change).
    subscription on_state_change(std::function<void(connection_state)> listener);

    /// Completes at once if connected, else with the next connection; errc::client_closed when
    /// the client closes first. Handler: void(error_code). Per-operation cancellation (any type)
    /// completes it with errc::cancelled.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_connected(CompletionToken&& token = {}) {
        return start<void(error_code)>(token, [](auto h, auto& c) { detail::start_wait_connected(c, std::move(h)); });
    }
    /// Completes with the next state change (never `connecting`). Handler: void(error_code,
    /// connection_state). A wait pending when the client closes completes with no error and
    /// `closed` (that is the change); one started on a closed client with errc::client_closed.
    /// Per-operation cancellation (any type) completes it with errc::cancelled (the state is then
    /// meaningless).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_next_state(CompletionToken&& token = {}) {
        return start<void(error_code, connection_state)>(
            token, [](auto h, auto& c) { detail::start_next_state(c, std::move(h)); });
    }

    // --- create. Handler: void(error_code, zkr::create_result) ---

    /// Creates a node with `data` (the default ACL). Sequential modes append a 10-digit counter to
    /// `path`; create_result::path is the name made. Handler: void(zkr::error_code,
    /// zkr::create_result); errc::node_exists, errc::no_node (no parent), errc::invalid_path.
    /// A sequential create is never retried (a first try may have made a node); other modes are.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_create(std::string path, std::string data, create_mode mode, CompletionToken&& token = {}) {
        return start<void(error_code, create_result)>(
            token,
            [](auto h, auto& c, std::string p, std::string d, create_mode m) {
                detail::start_create(c, std::move(p), std::move(d), m, std::move(h));
            },
            std::move(path), std::move(data), mode);
    }
    /// Blocking async_create(); throws zkr::system_error.
    create_result create(std::string path, std::string data = {}, create_mode mode = create_mode::persistent);
    /// Blocking async_create(); a failure goes to `ec`.
    create_result create(std::string path, std::string data, create_mode mode, zkr::error_code& ec);

    // --- create_ttl: a node the server deletes once it has gone `ttl` without a change and has no
    // children (ZooKeeper 3.5.3+; the server must run with zookeeper.extendedTypesEnabled=true) ---

    /// The longest TTL ZooKeeper takes (EphemeralType.MAX_TTL: 2^40 - 1 ms, about 34 years).
    static constexpr std::chrono::milliseconds max_ttl{(std::int64_t{1} << 40) - 1};
    /// Creates a TTL node: `mode` is create_mode::persistent or persistent_sequential (ZooKeeper's
    /// PERSISTENT_WITH_TTL and PERSISTENT_SEQUENTIAL_WITH_TTL), `ttl` from 1 ms to max_ttl; the
    /// server reaps the node once it has gone `ttl` unmodified (a set_data renews it) with no
    /// children, on its container-check round (znode.container.checkIntervalMs). Handler:
    /// void(zkr::error_code, zkr::create_result); errc::bad_arguments for another mode or a ttl
    /// out of range (nothing sent); errc::unimplemented when the server does not have TTL nodes
    /// enabled; otherwise as async_create (a sequential create is never retried).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl,
                          CompletionToken&& token = {}) {
        return start<void(error_code, create_result)>(
            token,
            [](auto h, auto& c, std::string p, std::string d, create_mode m, std::chrono::milliseconds t) {
                detail::start_create_ttl(c, std::move(p), std::move(d), m, t, std::move(h));
            },
            std::move(path), std::move(data), mode, ttl);
    }
    /// Blocking async_create_ttl(); throws std::invalid_argument for another mode or a ttl out of
    /// range (naming it), zkr::system_error otherwise (errc::unimplemented says how to enable TTL
    /// nodes on the server).
    create_result create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl);
    /// Blocking async_create_ttl(); a failure goes to `ec` (errc::bad_arguments for a bad mode or ttl).
    create_result create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl,
                             zkr::error_code& ec);

    // --- remove (ZooKeeper's delete). Handler: void(error_code) ---

    /// Deletes a node: any_version, or only at that data version (errc::bad_version otherwise).
    /// Handler: void(zkr::error_code); errc::no_node, errc::not_empty (it has children).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_remove(std::string path, std::int32_t version, CompletionToken&& token = {}) {
        return start<void(error_code)>(
            token, [](auto h, auto& c, std::string p, std::int32_t v) { detail::start_remove(c, std::move(p), v, std::move(h)); },
            std::move(path), version);
    }
    /// Blocking async_remove(); throws zkr::system_error.
    void remove(std::string path, std::int32_t version = any_version);
    /// Blocking async_remove(); a failure goes to `ec`.
    void remove(std::string path, std::int32_t version, zkr::error_code& ec);

    // --- exists. Handler: void(error_code, zkr::exists_result); no node is not an error ---

    /// Whether a node exists, with its stat. Handler: void(zkr::error_code, zkr::exists_result);
    /// a missing node is exists == false, not an error.
    template <detail::completion_token_not_watch CompletionToken = boost::asio::deferred_t>
    auto async_exists(std::string path, CompletionToken&& token = {}) {
        return async_read<exists_result>(&detail::start_exists, std::move(path), false, std::forward<CompletionToken>(token));
    }
    /// async_exists() that also leaves a watch (exists_result::watch): it fires when the node is
    /// created, deleted or changed.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_exists(std::string path, set_watch_t, CompletionToken&& token = {}) {
        return async_read<exists_result>(&detail::start_exists, std::move(path), true, std::forward<CompletionToken>(token));
    }
    /// Blocking async_exists(); throws zkr::system_error.
    exists_result exists(std::string path);
    /// Blocking async_exists() with a watch; throws zkr::system_error.
    exists_result exists(std::string path, set_watch_t);
    /// Blocking async_exists(); a failure goes to `ec`.
    exists_result exists(std::string path, zkr::error_code& ec);
    /// Blocking async_exists() with a watch; a failure goes to `ec`.
    exists_result exists(std::string path, set_watch_t, zkr::error_code& ec);

    // --- get_data. Handler: void(error_code, zkr::data_result) ---

    /// Reads a node's data and stat. Handler: void(zkr::error_code, zkr::data_result);
    /// errc::no_node, errc::no_auth.
    template <detail::completion_token_not_watch CompletionToken = boost::asio::deferred_t>
    auto async_get_data(std::string path, CompletionToken&& token = {}) {
        return async_read<data_result>(&detail::start_get_data, std::move(path), false, std::forward<CompletionToken>(token));
    }
    /// async_get_data() that also leaves a watch (data_result::watch): it fires when the node
    /// is deleted or its data changes.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_get_data(std::string path, set_watch_t, CompletionToken&& token = {}) {
        return async_read<data_result>(&detail::start_get_data, std::move(path), true, std::forward<CompletionToken>(token));
    }
    /// Blocking async_get_data(); throws zkr::system_error.
    data_result get_data(std::string path);
    /// Blocking async_get_data() with a watch; throws zkr::system_error.
    data_result get_data(std::string path, set_watch_t);
    /// Blocking async_get_data(); a failure goes to `ec`.
    data_result get_data(std::string path, zkr::error_code& ec);
    /// Blocking async_get_data() with a watch; a failure goes to `ec`.
    data_result get_data(std::string path, set_watch_t, zkr::error_code& ec);

    // --- set_data. Handler: void(error_code, zkr::stat) ---

    /// Replaces a node's data: any_version, or only at that data version (errc::bad_version
    /// otherwise). Handler: void(zkr::error_code, zkr::stat), the node's new stat; errc::no_node.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_set_data(std::string path, std::string data, std::int32_t version, CompletionToken&& token = {}) {
        return start<void(error_code, zkr::stat)>(
            token,
            [](auto h, auto& c, std::string p, std::string d, std::int32_t v) {
                detail::start_set_data(c, std::move(p), std::move(d), v, std::move(h));
            },
            std::move(path), std::move(data), version);
    }
    /// Blocking async_set_data(); throws zkr::system_error.
    zkr::stat set_data(std::string path, std::string data, std::int32_t version = any_version);
    /// Blocking async_set_data(); a failure goes to `ec`.
    zkr::stat set_data(std::string path, std::string data, std::int32_t version, zkr::error_code& ec);

    // --- get_children. Handler: void(error_code, zkr::children_result) ---

    /// Lists a node's children (names, in the server's order). Handler: void(zkr::error_code,
    /// zkr::children_result); errc::no_node.
    template <detail::completion_token_not_watch CompletionToken = boost::asio::deferred_t>
    auto async_get_children(std::string path, CompletionToken&& token = {}) {
        return async_read<children_result>(&detail::start_get_children, std::move(path), false,
                                           std::forward<CompletionToken>(token));
    }
    /// async_get_children() that also leaves a child watch (children_result::watch): it fires
    /// when a child is added or removed, or the node is deleted.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_get_children(std::string path, set_watch_t, CompletionToken&& token = {}) {
        return async_read<children_result>(&detail::start_get_children, std::move(path), true,
                                           std::forward<CompletionToken>(token));
    }
    /// Blocking async_get_children(); throws zkr::system_error.
    children_result get_children(std::string path);
    /// Blocking async_get_children() with a watch; throws zkr::system_error.
    children_result get_children(std::string path, set_watch_t);
    /// Blocking async_get_children(); a failure goes to `ec`.
    children_result get_children(std::string path, zkr::error_code& ec);
    /// Blocking async_get_children() with a watch; a failure goes to `ec`.
    children_result get_children(std::string path, set_watch_t, zkr::error_code& ec);

    // --- multi (all or nothing). Handler: void(error_code, std::vector<zkr::multi_op_result>);
    // on failure the error is the first failing op's and the results say which one ---

    /// Applies `ops` as one transaction: all of them, or none. Handler: void(zkr::error_code,
    /// std::vector<zkr::multi_op_result>), one result per op, in order; on failure the error is
    /// the first failing op's, and each result's error says which one failed. Resent under the
    /// retry policy when the connection is lost before the answer, like the other writes (a
    /// transaction whose first try was applied then fails as its ops would a second time); never
    /// when it holds a sequential create.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_multi(std::vector<multi_op> ops, CompletionToken&& token = {}) {
        return start<void(error_code, std::vector<multi_op_result>)>(
            token, [](auto h, auto& c, std::vector<multi_op> o) { detail::start_multi(c, std::move(o), std::move(h)); },
            std::move(ops));
    }
    /// Blocking async_multi(); throws zkr::system_error.
    std::vector<multi_op_result> multi(std::vector<multi_op> ops);
    /// Blocking async_multi(); a failure goes to `ec`, and when the server answered, the results
    /// say which op failed.
    std::vector<multi_op_result> multi(std::vector<multi_op> ops, zkr::error_code& ec);

    // --- create_parents: `path` and any missing ancestors, as persistent nodes (or containers);
    // an existing node is fine. Handler: void(error_code). Not cancellable. ---

    /// Creates `path` and each missing ancestor, top down, as `parents_mode` nodes (persistent or
    /// container; a container falls back to persistent on a server without containers; a
    /// sequential mode is errc::bad_arguments). Nodes that exist already are fine.
    /// Handler: void(zkr::error_code). Not cancellable.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_create_parents(std::string path, create_mode parents_mode, CompletionToken&& token = {}) {
        return start<void(error_code)>(
            token,
            [](auto h, auto& c, std::string p, create_mode m) { detail::start_create_parents(c, std::move(p), m, std::move(h)); },
            std::move(path), parents_mode);
    }
    /// Blocking async_create_parents(); throws zkr::system_error.
    void create_parents(const std::string& path, create_mode parents_mode = create_mode::persistent);
    /// Blocking async_create_parents(); a failure goes to `ec`.
    void create_parents(const std::string& path, create_mode parents_mode, zkr::error_code& ec);

private:
    friend struct detail::client_access;

    // One initiation for every operation: it holds the session layer (an operation launched
    // after the client is gone completes with client_closed) and tells Asio the executor.
    template <class Signature, class CompletionToken, class Start, class... Args>
    auto start(CompletionToken& token, Start start_fn, Args&&... args) {
        return boost::asio::async_initiate<CompletionToken, Signature>(
            detail::initiation{get_executor(),
                               [impl = impl_, start_fn](auto handler, auto&&... a) {
                                   start_fn(std::move(handler), *impl, std::forward<decltype(a)>(a)...);
                               }},
            token, std::forward<Args>(args)...);
    }
    template <class Result, class Start, class CompletionToken>
    auto async_read(Start start_fn, std::string path, bool watch, CompletionToken&& token) {
        return start<void(error_code, Result)>(
            token, [start_fn](auto h, auto& c, std::string p, bool w) { start_fn(c, std::move(p), w, std::move(h)); },
            std::move(path), watch);
    }

    std::shared_ptr<detail::client_impl> impl_;
};

}  // namespace zkr
