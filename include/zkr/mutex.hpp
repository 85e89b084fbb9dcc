/// \file
/// zkr::mutex — a distributed, reentrant, fair (FIFO) mutex on ZooKeeper, wire-compatible with
/// Curator's InterProcessMutex.
#pragma once
#include "zkr/export.hpp"

#include "zkr/lock_view.hpp"

namespace zkr {

/// std::lock_guard, std::unique_lock and std::scoped_lock work with it; see lock_view for the
/// operations, their errors and what a hold is.
class ZKR_EXPORT mutex : public lock_view {
public:
    /// A mutex on the lock path `path` through `c` (nothing is sent until it is used). Throws
    /// std::invalid_argument naming the path and the rule it breaks (the root "/" is refused too),
    /// or zkr::system_error(errc::client_closed) for a closed client.
    mutex(client& c, std::string path);
};

}  // namespace zkr
