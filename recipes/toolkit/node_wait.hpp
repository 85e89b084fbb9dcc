// Internal: the blocking node waits of the recipes (zkr::barrier, zkr::count_down_latch): the
// machine of the async ones (zkr/detail/node_wait.hpp), waited for on the caller's thread, never
// on one of the client's.
#pragma once

#include "zkr/error.hpp"
#include "zkr/observer.hpp"

#include "zkr/detail/node_wait.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace zkr::detail {

class session_port;

/// start_node_wait (zkr/detail/node_wait.hpp) for a recipe's own wait, not its caller's: the
/// observer does not hear of it (a TTL node waiting for its container).
void start_unobserved_node_wait(const std::weak_ptr<session_port>& port, const boost::asio::any_io_executor& executor,
                                std::string path, bool until_exists, node_wait_handler handler);

/// Blocks until `path` exists (`until_exists`) or is gone, as read from the server: true. False
/// once `deadline` passed first (time_point::max(): never); the watch is removed then. A deadline
/// already past reads once (a poll, answered within a session timeout). A lost connection or
/// session never lets the wait through: the next session's read decides. `ec`: errc::client_closed
/// when the client closed, or the error of a read the retry policy gave up on (then false).
/// The observer hears of it as a `recipe` wait on `observed_path` (the recipe's own path).
bool wait_node(session_port& port, std::string path, bool until_exists, std::chrono::steady_clock::time_point deadline,
               recipe_kind recipe, const std::string& observed_path, error_code& ec);

}  // namespace zkr::detail
