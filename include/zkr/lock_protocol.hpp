/// \file
/// zkr::lock_protocol — the lock protocol as data: how zkr, Curator and kazoo name lock nodes,
/// what zkr writes into them, and who holds. Pure functions, no I/O: what
/// `lock_view::participants()` and `zklock status` both decide with, and what a tool of your
/// own can use on a listing it made. docs/lock-protocol.md describes the protocol in words.
#pragma once
#include "zkr/export.hpp"

#include "zkr/lock_types.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

/// The lock protocol as data (see the file's description).
namespace zkr::lock_protocol {

/// A lock node waits to read (shared) or to write (exclusive: a mutex's nodes are writers).
enum class role { reader, writer };

/// Which lock a node belongs to. Each looks only at its own nodes: nodes of two recipes under
/// one path are two locks that do not exclude each other.
enum class recipe {
    mutex,       ///< zkr::mutex, Curator's InterProcessMutex: "_c_<uuid>-lock-<seq>"
    read_write,  ///< zkr::shared_mutex, Curator's InterProcessReadWriteLock: "__READ__<seq>", "__WRIT__<seq>"
    kazoo,       ///< kazoo's Lock and WriteLock ("<uuid>__lock__<seq>") and ReadLock ("__rlock__")
};
/// "mutex", "read-write", "kazoo".
ZKR_EXPORT const char* to_string(recipe r) noexcept;

/// A lock node's name, parsed.
struct node_name {
    std::string name;            ///< the child's name
    std::int64_t sequence = 0;   ///< the number after the last occurrence of the recipe's name (Curator's rule)
    role node_role = role::writer;        ///< what it asks for
    recipe node_recipe = recipe::mutex;   ///< which recipe's layout it follows
};

/// The lock node `child` names, or std::nullopt for a child that is not one.
ZKR_EXPORT std::optional<node_name> parse_node_name(std::string_view child);

/// Who made a node, from its data: zkr's "zkr:1;host=<h>;pid=<p>;thread=<t>[;async=1][;held=1]",
/// anything else kept in `raw` only.
ZKR_EXPORT lock_owner decode_owner(std::string_view data);

/// True when `data` is zkr's owner data carrying the holding mark (docs/lock-protocol.md, "the
/// holding mark"): its writer holds, so everything queued before it is gone.
ZKR_EXPORT bool is_marked_holding(std::string_view data);

/// One node in a queue, with its owner (empty when unknown).
struct queued {
    node_name name;     ///< the node
    lock_owner owner;   ///< who made it, from its data
};

/// Sorts nodes into queue order: by sequence, then by name.
ZKR_EXPORT void sort_queue(std::vector<queued>& nodes);

/// Who holds, for nodes in queue order (sort_queue), each recipe's nodes on their own:
/// - a writer holds when it is first of its recipe;
/// - a reader holds when no writer of its recipe precedes it — or when a write node of the same
///   zkr thread precedes it with only readers before that (zkr's downgrade: the thread holding
///   the write lock reads at once, even past a writer queued meanwhile). Curator's and kazoo's
///   data do not name a thread, so their downgrades cannot be seen from outside.
ZKR_EXPORT std::vector<bool> holders(const std::vector<queued>& queue);

}  // namespace zkr::lock_protocol
