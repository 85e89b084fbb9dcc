// Reading a semaphore's leases from ZooKeeper (zkr::semaphore, Curator's InterProcessSemaphoreV2:
// PATH/leases holds one node per lease, PATH/locks is the mutex its acquirers queue on).
#pragma once

#include "event_loop.hpp"
#include "node_reading.hpp"

#include <zkr/client.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zklock {

struct lease_entry {
    std::string name;           ///< _c_<uuid>-lease-<seq> (Curator without protection: lease-<seq>)
    std::int64_t sequence = 0;
    /// False for a lease node made under the mutex's current hold: its acquirer (zkr's or
    /// Curator's) makes the node, then counts, and waits while there are too many.
    bool holds = true;
    node_reading node;
};

struct semaphore_snapshot {
    std::string path;
    std::optional<int> max_leases;    ///< as given with --max: the nodes do not record it
    std::vector<lease_entry> leases;  ///< in the order they were made, held or not
    std::size_t waiting = 0;          ///< nodes queued on PATH/locks: acquisitions under way
    std::size_t other_children = 0;   ///< children of PATH/leases that are no lease nodes
    std::int64_t taken_at_ms = 0;     ///< wall clock when read, for ages
};

/// True when PATH is a semaphore's: it has a "leases" child. Throws zklock::failure
/// (unavailable) when the ensemble does not answer by `deadline`, or for a signal.
bool is_semaphore_path(zkr::client& client, event_loop& loop, const std::string& path, steady_time deadline);

/// Lists PATH/leases and PATH/locks, then reads every lease node, and the mutex holder's node,
/// at once. Throws as is_semaphore_path.
semaphore_snapshot read_semaphore(zkr::client& client, event_loop& loop, const std::string& path,
                                  std::optional<int> max_leases, steady_time deadline);

}  // namespace zklock
