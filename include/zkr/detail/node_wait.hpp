// Internal: the async waits of zkr::barrier and zkr::count_down_latch — until a node is gone, or
// until it exists — driven by one-shot watches, with nothing blocked while they wait.
#pragma once
#include "zkr/export.hpp"

#include "zkr/error.hpp"
#include "zkr/observer.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace zkr::detail {

class session_port;

using node_wait_handler = boost::asio::any_completion_handler<void(error_code)>;

/// Completes `handler` once `path` exists (`until_exists`) or is gone, as read from the server;
/// errc::client_closed when the client closes first, errc::cancelled on per-operation
/// cancellation (any type: the watch is removed), or the error of a read the retry policy gave
/// up on. The handler runs on `executor`, or its own associated executor. The observer hears of
/// it as a `recipe` wait (recipe_operation::wait).
ZKR_EXPORT void start_node_wait(const std::weak_ptr<session_port>& port, const boost::asio::any_io_executor& executor,
                                std::string path, bool until_exists, recipe_kind recipe, node_wait_handler handler);

}  // namespace zkr::detail
