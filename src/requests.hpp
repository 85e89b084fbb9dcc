// Internal: requests to the ZooKeeper server. This is the only code that calls the C client's
// zoo_a* functions; their replies come back on the C client's completion thread, where a
// request only hands its result on (see completion.hpp) and never blocks.
#pragma once

#include "completion.hpp"
#include "live_objects.hpp"
#include "watch_registry.hpp"
#include "zkr/observer.hpp"
#include "zkr/types.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>

#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

namespace zkr::detail {

class client_impl;

zkr::stat to_stat(const Stat& s) noexcept;

/// A request, resent under the retry policy when that is safe. It deletes itself once its
/// result is delivered.
/// What a request that failed for good completes with: `last`, its last attempt's error, unless
/// that is a refusal the retry policy retries (throttled_op: the server did not apply that attempt)
/// while an earlier attempt was in doubt (`doubt`: may_have_been_applied) — then that one, so
/// the caller still learns the write may have been applied.
inline error_code final_failure(error_code last, error_code doubt) noexcept {
    if (doubt && !may_have_been_applied(last) && is_retryable(last)) return doubt;
    return last;
}

class request {
public:
    request(client_impl& c, bool retry_allowed) : client(c), retry_allowed(retry_allowed) {}
    virtual ~request() = default;
    /// Issues the C call with `this` as its data; returns the C client's synchronous rc.
    virtual int send(zhandle_t* zh) = 0;
    /// Delivers an error and deletes this.
    virtual void fail(error_code ec) = 0;
    /// Called before each send, under the handle lock.
    virtual void on_send(std::uint64_t generation) { sent_generation = generation; }
    /// What an observer is told it is (client_options::observer).
    virtual zkr::operation observed_operation() const = 0;
    virtual std::string_view observed_path() const = 0;

    client_impl& client;
    const bool retry_allowed;
    int retries = 0;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point sent_at;  // of the latest send
    std::uint64_t sent_generation = 0;              // the handle of the latest send
    std::unique_ptr<boost::asio::steady_timer> backoff;
    // While the C client holds this request (sent, not answered yet) it is on the client's list
    // of requests in flight, under client_impl::in_flight_mutex_: see client_impl::answer_lost.
    request* in_flight_prev = nullptr;
    request* in_flight_next = nullptr;
    bool in_flight = false;
    bool session_own = false;      // a heartbeat or stall probe: the session's, not a caller's
    // Nonzero: sent on this session only (session_port::remove_on_session): a handle of another
    // session fails it with session_expired, and that answer is final, never retried.
    std::int64_t only_on_session = 0;
    std::uint64_t observe_id = 0;  // nonzero once an observer was told it started
    // The first attempt's error that left the request in doubt (may_have_been_applied): a later
    // attempt's refusal does not make it less so (final_failure).
    error_code doubt{};

protected:
    /// Every reply passes here first: the request leaves the list of those in flight, and an
    /// answer from the server renews the session's lease.
    void replied(int rc);

private:
    live_counter<&live_objects::requests> counted_;
};

/// `ttl` > 0: a TTL node (mode persistent or persistent_sequential, checked by the caller).
request* make_create(client_impl& c, std::string path, std::string data, create_mode mode, completion<create_result> done,
                     std::chrono::milliseconds ttl = {});
request* make_remove(client_impl& c, std::string path, std::int32_t version, completion<> done);
request* make_exists(client_impl& c, std::string path, std::shared_ptr<watch_state> watch, completion<exists_result> done);
request* make_get_data(client_impl& c, std::string path, std::shared_ptr<watch_state> watch, completion<data_result> done);
request* make_get_children(client_impl& c, std::string path, std::shared_ptr<watch_state> watch,
                           completion<children_result> done);
request* make_set_data(client_impl& c, std::string path, std::string data, std::int32_t version, completion<zkr::stat> done);
request* make_multi(client_impl& c, std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done);
/// Removes every watch of `ws`'s kind our session has on its path (REMOVE_WATCHES).
request* make_remove_all_watches(client_impl& c, std::shared_ptr<watch_state> ws, completion<> done);
/// A cheap read whose only purpose is its answer: it renews the session's lease when idle, and
/// wakes a server that holds a request (the stall probe, stall_probe.hpp).
request* make_heartbeat(client_impl& c);

/// Drops only `ws` at the C client, leaving the server's watch for other local watchers
/// (ZooKeeper's CHECK_WATCHES). Returns the C client's rc.
int remove_watch_locally(zhandle_t* zh, watch_state& ws);

}  // namespace zkr::detail
