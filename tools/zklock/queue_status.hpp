// Reading a lock's queue from ZooKeeper: its lock nodes with their data and stat, in order.
#pragma once

#include "event_loop.hpp"
#include "lock_nodes.hpp"

#include <zkr/client.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zklock {

struct queue_entry {
    lock_node_name name;
    bool holds = false;
    std::string data;                ///< the node's data, raw
    std::optional<zkr_owner> owner;  ///< decoded when zkr wrote it
    zkr::stat stat;                  ///< ephemeral_owner is the session, ctime the age
    zkr::error_code data_error;      ///< why `data` is unknown (no_auth: its ACL hides it)
};

struct queue_snapshot {
    std::string path;
    bool path_exists = false;
    std::vector<queue_entry> entries;  ///< holders first, then waiters in queue order
    std::size_t other_children = 0;    ///< children that are no lock nodes
    std::int64_t taken_at_ms = 0;      ///< wall clock when read, for ages
};

/// Lists PATH's children (leaving a child watch in `*children_changed` when given; an exists
/// watch when PATH is missing), then reads every lock node at once. Throws zklock::failure
/// (unavailable) when the ensemble does not answer by `deadline`, or for a signal.
queue_snapshot read_queue(zkr::client& client, event_loop& loop, const std::string& path, steady_time deadline,
                          zkr::watch* children_changed = nullptr);

}  // namespace zklock
