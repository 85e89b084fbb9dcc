/// \file
/// zkr::shared_count — an integer shared through one node, wire-compatible with Curator's
/// SharedCount (a persistent node holding a 4-byte big-endian int): a semaphore's maximum that
/// its participants can change while they run.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace zkr {

namespace detail {
class count_impl;
}

/// A count with the version of the node it was read at (Curator's VersionedValue<Integer>).
struct versioned_count {
    std::int32_t value = 0;     ///< the count
    std::int32_t version = -1;  ///< the node's data version
};

/// A count kept in the node `path`, read once and then kept fresh by a watch (read again after a
/// new session or a reconnection). Thread-safe. Listeners run on the client's executor, in order.
class ZKR_EXPORT shared_count {
public:
    /// Makes the node with `seed` if it does not exist (its missing parents as containers), then
    /// reads it; blocks for that. Throws std::invalid_argument for a bad path, zkr::system_error
    /// when the server cannot be read or the node does not hold a 4-byte count.
    shared_count(client& c, std::string path, std::int32_t seed);
    ~shared_count();
    shared_count(const shared_count&) = delete;
    shared_count& operator=(const shared_count&) = delete;

    /// The count as last read.
    std::int32_t get() const;
    /// Sets it (unconditionally); blocks until the server applied it. Throws zkr::system_error.
    void set(std::int32_t value);
    /// Sets it only if nobody changed it since this object last read it (its version): true if
    /// set; false if it changed meanwhile (the new value is read then). Throws zkr::system_error.
    bool try_set(std::int32_t value);
    /// The count as last read, with its version: for try_set(previous, value).
    versioned_count get_versioned() const;
    /// Sets it only if the node is still at `previous.version` (Curator's trySetCount(previous,
    /// newCount)): true if set; false if anyone changed it since `previous` was read, this object
    /// included (the new value is read then). Throws zkr::system_error.
    bool try_set(const versioned_count& previous, std::int32_t value);
    /// Calls `fn(count)` on the client's executor after every change this object reads.
    [[nodiscard]] subscription on_change(std::function<void(std::int32_t)> fn);
    /// The node's path.
    const std::string& path() const noexcept;

private:
    friend class semaphore;
    std::shared_ptr<detail::count_impl> impl_;
};

}  // namespace zkr
