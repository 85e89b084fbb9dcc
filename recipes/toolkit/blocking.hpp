// Blocking requests for the recipes whose calls block their caller anyway (barriers, the
// count-down latch, the counters): one request through the session port, waited for on the
// caller's thread, never on the client's. Plain requests end as the client's retry policy
// ends them; the watched reads (exists_watched, children_watched) also give up at a deadline,
// and then drop the request's late answer and remove the watch it set (nothing left behind).
#pragma once

#include "session_port.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace zkr::detail::blocking {

using clock = std::chrono::steady_clock;

/// When a call that may wait `timeout` must return: nullopt for milliseconds::max() (for ever),
/// computed without overflow.
std::optional<clock::time_point> deadline_after(std::chrono::milliseconds timeout);
/// When the first read of a wait with `timeout` must be answered: the deadline, except that a
/// timeout of 0 is a poll — one read, answered (bounded by the session timeout, so a server that
/// does not answer still cannot hold the caller for ever).
std::optional<clock::time_point> first_read_by(const std::optional<clock::time_point>& deadline,
                                               std::chrono::milliseconds timeout, const session_port& port);
/// What is left until `deadline` (zero once past; milliseconds::max() without one).
std::chrono::milliseconds left(const std::optional<clock::time_point>& deadline);

data_result get_data(session_port& port, const std::string& path, error_code& ec);
exists_result exists(session_port& port, const std::string& path, bool watch, error_code& ec);
children_result get_children(session_port& port, const std::string& path, bool watch, error_code& ec);
create_result create(session_port& port, const std::string& path, std::string data, create_mode mode, error_code& ec);
void remove(session_port& port, const std::string& path, std::int32_t version, error_code& ec);
std::vector<multi_op_result> multi(session_port& port, std::vector<multi_op> ops, error_code& ec);
/// Makes `path`'s missing ancestors and `path` itself as containers (Curator's
/// creatingParentContainersIfNeeded makes the parents of a node so).
void create_containers(session_port& port, const std::string& path, error_code& ec);

/// exists() and get_children() with a watch that give up at `deadline` (std::nullopt when it
/// passed first; the watch a late answer sets is removed).
std::optional<exists_result> exists_watched(session_port& port, const std::string& path,
                                            const std::optional<clock::time_point>& deadline, error_code& ec);
std::optional<children_result> children_watched(session_port& port, const std::string& path,
                                                 const std::optional<clock::time_point>& deadline, error_code& ec);

/// How a wait on a watch ended.
enum class watch_end {
    fired,      ///< the node changed (or the watch ended without a change: look again)
    session,    ///< the watch went with its session (expired): look again on the new one
    timed_out,  ///< the deadline passed; the watch was removed
};
/// Waits for `w` to fire until `deadline`. Throws zkr::system_error(client_closed) when the
/// client closes meanwhile.
/// `event`, when given, receives the event of a watch that fired.
watch_end wait(session_port& port, zkr::watch& w, const std::optional<clock::time_point>& deadline,
               event_type* event = nullptr);
/// Removes `w` from this client and the server without waiting for the answer.
void drop_watch(session_port& port, const zkr::watch& w);

/// The "<uuid>" Curator's DistributedDoubleBarrier names its members with (36 characters).
std::string member_uuid();

/// Whether an error leaves a write in doubt: it may or may not have been applied.
bool in_doubt(error_code ec);

}  // namespace zkr::detail::blocking
