// Internal: the one way recipes reach a client's session layer. Everything a recipe may ask of a
// session — requests, the session's identity and health, session events, the threads its own
// timers run on — and nothing of the ZooKeeper C client: recipes never include zookeeper.h.
//
// Threads (the table at the top of client_impl.hpp is the whole story): completions given as
// completion::inline_fn run on whichever thread completes the request, often the C client's
// completion thread, and must neither block nor call user code; session-event listeners run on
// the session thread, in order, and must not block; executor() is where user code runs.
#pragma once

#include "completion.hpp"
#include "runtime.hpp"
#include "watch_registry.hpp"
#include "zkr/client.hpp"
#include "zkr/types.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zkr::detail {

class observer_channel;

/// How a session stands right now, from the C client's live view and the lease.
enum class session_health {
    live,     ///< the handle is connected on this session (by the C client's state and by its
              ///< latest event) and the server answered within the lease
    suspect,  ///< this session, but the connection is down or the server has not answered lately
    gone,     ///< the session is lost (expired, given up, closed) or was never this client's current one
};

/// A session-level event for zkr's own listeners (recipes), with the session it is about.
struct session_event {
    connection_state state;
    std::int64_t session;  ///< connected/reconnected: the session now; lost: the session lost
};

class session_port {
public:
    virtual ~session_port() = default;

    // Requests. Idempotent ones are retried under the client's retry policy; sequential creates
    // never are. Each completes exactly once.
    virtual void create(std::string path, std::string data, create_mode mode, completion<create_result> done) = 0;
    /// A TTL node (client::async_create_ttl): errc::bad_arguments for a mode other than
    /// persistent / persistent_sequential or a ttl out of range.
    virtual void create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl,
                            completion<create_result> done) = 0;
    virtual void remove(std::string path, std::int32_t version, completion<> done) = 0;
    virtual void exists(std::string path, bool watch, completion<exists_result> done) = 0;
    virtual void get_data(std::string path, bool watch, completion<data_result> done) = 0;
    virtual void set_data(std::string path, std::string data, std::int32_t version, completion<zkr::stat> done) = 0;
    /// remove / set_data / exists sent only on `session` (nonzero): never on a later one, where
    /// the path may hold another session's node. Once that session is gone (or was never current)
    /// they complete with session_expired instead of being sent again; a connection loss on that
    /// session is retried as usual. For writes to an ephemeral node of `session`, and for asking
    /// whether `session` still stands (an answer at all says it does).
    virtual void remove_on_session(std::int64_t session, std::string path, std::int32_t version, completion<> done) = 0;
    virtual void exists_on_session(std::int64_t session, std::string path, completion<exists_result> done) = 0;
    virtual void set_data_on_session(std::int64_t session, std::string path, std::string data, std::int32_t version,
                                     completion<zkr::stat> done) = 0;
    virtual void get_children(std::string path, bool watch, completion<children_result> done) = 0;
    virtual void multi(std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done) = 0;
    /// Creates `path` and its missing ancestors (containers fall back to persistent nodes on a
    /// server without them); an existing node is fine.
    virtual void create_parents(std::string path, create_mode mode, completion<> done) = 0;
    /// Removes a watch this client set (from the server too, unless others here share it).
    virtual void remove_watch(std::shared_ptr<watch_state> ws, completion<> done) = 0;

    // The session.
    /// The current session's id, read live; 0 while there is none.
    virtual std::int64_t session_id() const = 0;
    virtual session_health health(std::int64_t session) const = 0;
    /// Until when `session` surely lives on the server (the epoch unless it is live now).
    virtual std::chrono::steady_clock::time_point lease_until(std::int64_t session) const = 0;
    virtual std::chrono::milliseconds session_timeout() const = 0;
    virtual bool is_connected() const = 0;
    virtual std::uint64_t session_count() const = 0;
    /// How many times a connection of this client dropped (counted as the C client delivers its
    /// CONNECTING event, before any reply of the next connection; a spurious count is possible, a
    /// missed one is not). A watch set before a drop may have missed an event for good: a
    /// reconnection's SetWatches replays a change only as the node stands then (an exists watch
    /// sees nothing of a node made and deleted meanwhile). Read it in a reply's completion and
    /// compare it with an earlier reading.
    virtual std::uint64_t connection_drops() const = 0;
    virtual bool closed() const = 0;
    /// Called on the session thread, in order, before any user code hears of the event.
    virtual subscription on_session_event(std::function<void(const session_event&)> listener) = 0;

    /// Where the client's observer (client_options::observer) hears of recipe events: null when it
    /// has none. Holding it keeps the channel (not the client) alive.
    virtual const std::shared_ptr<observer_channel>& observer_events() const = 0;

    // Where things run.
    /// Where user handlers run.
    virtual boost::asio::any_io_executor executor() const = 0;
    /// The client's threads: recipes arm their timers on `session` (never user code there) and
    /// keep the runtime alive for as long as such a timer may exist.
    virtual const std::shared_ptr<runtime>& threads() const = 0;

    /// Per-client state of a recipe family, made on first use and dropped when the client shuts
    /// down; null once the client is closed.
    virtual std::shared_ptr<void> extension(const void* key, const std::function<std::shared_ptr<void>()>& make) = 0;
    /// This port, held weakly by what must not keep the client alive.
    virtual std::weak_ptr<session_port> weak_port() = 0;
};

/// The session layer of a client.
std::shared_ptr<session_port> port_of(const zkr::client& c);

/// The per-client instance of a recipe family's state `T`, made with `T(port)` on first use.
/// Throws zkr::system_error(errc::client_closed) for a closed client.
template <class T>
std::shared_ptr<T> per_client(session_port& port) {
    static const int key = 0;
    auto made = std::static_pointer_cast<T>(port.extension(&key, [&port]() -> std::shared_ptr<void> {
        auto t = std::make_shared<T>(port);
        t->attach();
        return t;
    }));
    if (!made) throw zkr::system_error(make_error_code(errc::client_closed), "zkr: a recipe on a closed client");
    return made;
}

}  // namespace zkr::detail
