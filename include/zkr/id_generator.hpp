/// \file
/// zkr::id_generator — unique, increasing 64-bit ids drawn from a ZooKeeper counter in blocks.
#pragma once
#include "zkr/export.hpp"

#include "zkr/atomic.hpp"
#include "zkr/client.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace zkr {

/// Ids from the counter at `path` (an atomic_long: Curator's DistributedAtomicLong reads it).
/// Each generator reserves a block of `block_size` ids with one exactly-once add() and hands
/// them out locally, so next() is a local call but once per block.
///
/// Promises: ids are unique across every generator, process and session on the path, and each
/// generator's are strictly increasing; a block is never handed out twice, even after a crash
/// or a lost reply (the reservation is exactly once). Not promised: no gaps (a generator's unused
/// ids are skipped when it goes) and a global order between generators. The first id of a new
/// counter is 1. Thread-safe.
class ZKR_EXPORT id_generator {
public:
    /// Throws std::invalid_argument for a bad path or a `block_size` below 1 (naming it),
    /// zkr::system_error(client_closed) for a closed client. Sends nothing.
    id_generator(client& c, std::string path, std::int64_t block_size = 1000);
    /// The next id; reserves a block when this one is used up. Throws zkr::system_error: a
    /// reservation that failed (errc::outcome_unknown when it may have been made: its block is
    /// then never used), lost to other writers `atomic_options::max_attempts` times
    /// (attempts_exhausted), or would pass the largest 64-bit id (bad_arguments; nothing reserved).
    std::int64_t next();
    /// Ids left in this generator's block.
    std::int64_t reserved() const;
    /// The counter's path.
    const std::string& path() const noexcept;

private:
    std::shared_ptr<detail::atomic_engine> counter_;
    std::int64_t block_size_;
    mutable std::mutex mutex_;
    std::int64_t next_ = 0, end_ = 0;  // [next_, end_) is ours
};

}  // namespace zkr
