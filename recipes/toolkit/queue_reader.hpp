// Reading a sequence queue as it stands: one listing, then every node's data in one round trip.
// For participants(), leader() and the like; blocking, so never on zkr's own threads.
#pragma once

#include "sequence_queue.hpp"
#include "session_port.hpp"

#include <string>
#include <vector>

namespace zkr::detail {

struct queued_node {
    contender node;
    error_code read_error;  ///< why its data is unknown (no_auth: its ACL); never no_node (those are left out)
    std::string data;
};

/// The nodes of `family`'s queue under `path`, in queue order, with their data; nodes that left
/// between the listing and the read are left out. A missing path is an empty queue. Throws
/// zkr::system_error when it cannot list (the message names `what` and the path).
std::vector<queued_node> read_queue(session_port& port, const std::string& path, queue_kind family, const char* what);

}  // namespace zkr::detail
