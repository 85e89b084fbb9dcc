// Internal: the blocking node waits of the recipes (zkr::barrier, zkr::count_down_latch): the
// machine of the async ones (zkr/detail/node_wait.hpp), waited for on the caller's thread, never
// on one of the client's.
#pragma once

#include "zkr/error.hpp"

#include <chrono>
#include <string>

namespace zkr::detail {

class session_port;

/// Blocks until `path` exists (`until_exists`) or is gone, as read from the server: true. False
/// once `deadline` passed first (time_point::max(): never); the watch is removed then. A deadline
/// already past reads once (a poll, answered within a session timeout). A lost connection or
/// session never lets the wait through: the next session's read decides. `ec`: errc::client_closed
/// when the client closed, or the error of a read the retry policy gave up on (then false).
bool wait_node(session_port& port, std::string path, bool until_exists, std::chrono::steady_clock::time_point deadline,
               error_code& ec);

}  // namespace zkr::detail
