/// \file
/// zkr::id_generator — unique, increasing 64-bit ids drawn from a ZooKeeper counter in blocks.
#pragma once
#include "zkr/export.hpp"

#include "zkr/atomic.hpp"
#include "zkr/client.hpp"
#include "zkr/detail/initiation.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace zkr {

namespace detail {
class id_blocks;
using id_handler = boost::asio::any_completion_handler<void(error_code, std::int64_t)>;
ZKR_EXPORT void start_next_id(const std::shared_ptr<id_blocks>& blocks, id_handler handler);
ZKR_EXPORT boost::asio::any_io_executor id_executor(const std::shared_ptr<id_blocks>& blocks);
}  // namespace detail

/// Ids from the counter at `path` (an atomic_long: Curator's DistributedAtomicLong reads it).
/// Each generator reserves a block of `block_size` ids with one exactly-once add() and hands
/// them out locally, so next() is a local call but once per block.
///
/// Promises: ids are unique across every generator, process and session on the path, and each
/// generator's are strictly increasing; a block is never handed out twice, even after a crash
/// or a lost reply (the reservation is exactly once). Not promised: no gaps (a generator's unused
/// ids are skipped when it goes) and a global order between generators. The first id of a new
/// counter is 1. Thread-safe. One reservation at a time per generator: callers that find the
/// block used up wait for it and are handed its ids in the order they asked; a reservation that
/// fails fails each of them.
class ZKR_EXPORT id_generator {
public:
    /// Throws std::invalid_argument for a bad path or a `block_size` below 1 (naming it),
    /// zkr::system_error(client_closed) for a closed client. Sends nothing.
    id_generator(client& c, std::string path, std::int64_t block_size = 1000);
    /// Its unused ids are skipped for good; its counter's child is deleted once no call is left.
    ~id_generator();
    id_generator(const id_generator&) = delete;
    id_generator& operator=(const id_generator&) = delete;
    /// The next id; reserves a block when this one is used up. Throws zkr::system_error: a
    /// reservation that failed (errc::outcome_unknown when it may have been made: its block is
    /// then never used), lost to other writers `atomic_options::max_attempts` times
    /// (attempts_exhausted), or would pass the largest 64-bit id (bad_arguments; nothing reserved).
    std::int64_t next();
    /// next() blocking nothing: completes at once (posted) while the block has ids, else once a
    /// block is reserved. Handler: void(zkr::error_code, std::int64_t id) — next()'s errors, the
    /// id 0 with an error. Runs on the handler's associated executor, by default the client's;
    /// never on the ZooKeeper C client's threads. Not cancellable (a reservation once sent is
    /// seen through). The generator may go before it completes.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_next(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, std::int64_t)>(
            detail::initiation{get_executor(), [blocks = blocks_](auto handler) { detail::start_next_id(blocks, std::move(handler)); }},
            token);
    }
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;
    /// The client's executor: where async_next completes by default.
    executor_type get_executor() const { return detail::id_executor(blocks_); }
    /// Ids left in this generator's block.
    std::int64_t reserved() const;
    /// The counter's path.
    const std::string& path() const noexcept;

private:
    std::shared_ptr<detail::id_blocks> blocks_;
};

}  // namespace zkr
