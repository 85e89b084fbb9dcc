// Lock nodes as zkr, Curator and kazoo name them, whose they are, and who holds. Pure logic.
//
//   zkr / Curator mutex:      _c_<uuid>-lock-<seq>                      (writer: exclusive)
//   zkr / Curator read/write: _c_<uuid>-__READ__<seq>, _c_<uuid>-__WRIT__<seq>
//   kazoo Lock / WriteLock:   <uuid>__lock__<seq>;  kazoo ReadLock: <uuid>__rlock__<seq>
// (Curator names nodes without the "_c_<uuid>-" protection prefix too: the marker is what counts.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zklock {

enum class lock_role { reader, writer };
/// Which lock a node belongs to. Each recipe looks only at its own nodes, so nodes of two
/// recipes under one path are two locks that do not exclude each other.
enum class lock_recipe {
    mutex,       ///< zkr::mutex, Curator's InterProcessMutex
    read_write,  ///< zkr::shared_mutex (and zklock), Curator's InterProcessReadWriteLock
    kazoo,       ///< kazoo's Lock, WriteLock and ReadLock
};

/// "mutex", "read-write", "kazoo".
const char* to_string(lock_recipe r) noexcept;

struct lock_node_name {
    std::string name;
    std::int64_t sequence = 0;
    lock_role role = lock_role::writer;
    lock_recipe recipe = lock_recipe::read_write;
};

/// The lock node `child` names, or std::nullopt for a child that is not one. As Curator does,
/// the sequence is the number after the last marker.
std::optional<lock_node_name> parse_lock_node_name(std::string_view child);

/// zkr's owner data, "zkr:1;host=<host>;pid=<pid>;thread=<tid>[;async=1]".
struct zkr_owner {
    std::string host;
    std::int64_t pid = 0;
    std::int64_t thread = 0;
    bool async = false;  ///< held by an async operation's lock_hold, not by a thread
};

/// Decodes zkr's owner data; std::nullopt for anything else (Curator's IP address, kazoo's
/// identifier...), which is shown raw.
std::optional<zkr_owner> parse_zkr_owner(std::string_view data);

/// One node's place in the queue, for deciding who holds.
struct queue_position {
    lock_recipe recipe = lock_recipe::read_write;
    lock_role role = lock_role::writer;
    std::optional<zkr_owner> owner;
};

/// Who holds, for nodes in queue order, each recipe's nodes on their own: a writer when first
/// of its recipe; a reader when no writer of its recipe precedes it, or when the only one that
/// does is the head and belongs to the same zkr thread (zkr's downgrade: the thread holding the
/// write lock reads at once).
std::vector<bool> holders(const std::vector<queue_position>& queue);

}  // namespace zklock
