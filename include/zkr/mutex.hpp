// zkr::mutex — a distributed, reentrant, fair (FIFO) mutex on ZooKeeper, wire-compatible with
// Curator's InterProcessMutex.
#pragma once

#include "zkr/lock_view.hpp"

namespace zkr {

/// std::lock_guard, std::unique_lock and std::scoped_lock work with it; see lock_view for the
/// operations, their errors and what a hold is.
class mutex : public lock_view {
public:
    /// Throws std::invalid_argument naming the path and the rule it breaks.
    mutex(client& c, std::string path);
};

}  // namespace zkr
