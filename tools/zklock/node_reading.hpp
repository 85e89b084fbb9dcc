// Reading a set of nodes from ZooKeeper at once: their data (zkr's owner decoded) and stat.
#pragma once

#include "event_loop.hpp"
#include "lock_nodes.hpp"

#include <zkr/client.hpp>

#include <optional>
#include <string>
#include <vector>

namespace zklock {

struct node_reading {
    std::string data;                ///< the node's data, raw
    std::optional<zkr_owner> owner;  ///< decoded when zkr wrote it
    zkr::stat stat;                  ///< ephemeral_owner is the session, ctime the age
    zkr::error_code data_error;      ///< why `data` is unknown (no_auth: its ACL hides it)
};

/// Reads every node of `node_paths` at once (one round trip for the lot): std::nullopt for a
/// node gone meanwhile. Throws zklock::failure (unavailable) when the ensemble does not answer
/// by `deadline`, or for a signal.
std::vector<std::optional<node_reading>> read_nodes(zkr::client& client, event_loop& loop,
                                                    const std::vector<std::string>& node_paths, steady_time deadline);

}  // namespace zklock
