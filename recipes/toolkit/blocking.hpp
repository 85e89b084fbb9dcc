// Blocking requests for the recipes whose calls block their caller anyway (barriers, the
// count-down latch, the counters): one request through the session port, waited for on the
// caller's thread, never on the client's; each ends as the client's retry policy ends it. The
// blocking waits on a node are node_wait.hpp's.
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
data_result get_data(session_port& port, const std::string& path, error_code& ec);
exists_result exists(session_port& port, const std::string& path, bool watch, error_code& ec);
children_result get_children(session_port& port, const std::string& path, bool watch, error_code& ec);
create_result create(session_port& port, const std::string& path, std::string data, create_mode mode, error_code& ec);
void remove(session_port& port, const std::string& path, std::int32_t version, error_code& ec);
std::vector<multi_op_result> multi(session_port& port, std::vector<multi_op> ops, error_code& ec);
/// Makes `path`'s missing ancestors and `path` itself as containers (Curator's
/// creatingParentContainersIfNeeded makes the parents of a node so).
void create_containers(session_port& port, const std::string& path, error_code& ec);

/// The "<uuid>" Curator's DistributedDoubleBarrier names its members with (36 characters).
std::string member_uuid();

}  // namespace zkr::detail::blocking
