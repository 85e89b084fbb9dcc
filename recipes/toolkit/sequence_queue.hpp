// A sequence queue: contenders make ephemeral sequential children of one path, named after
// their recipe (Curator's names), and queue in the order of the number after the LAST
// occurrence of that name. This file is the pure part — which children take part, in what order,
// who is first, whom a waiter watches — shared by every queue recipe (mutex, read/write lock,
// leader latch, the semaphore's mutex). No I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkr::detail {

/// What a contender's node is. Kinds of one family queue together: a mutex's `exclusive` nodes;
/// a read/write lock's `read` and `write` nodes; a leader latch's `latch` nodes.
enum class queue_kind { exclusive, read, write, latch };

/// The name in a node of that kind, as Curator names them: "lock-", "__READ__", "__WRIT__", "latch-".
std::string_view queue_marker(queue_kind kind) noexcept;

/// True for the read/write lock's kinds (its nodes queue by both names).
constexpr bool is_read_write(queue_kind kind) noexcept { return kind == queue_kind::read || kind == queue_kind::write; }

/// True where zkr's holders mark their node holding (docs/lock-protocol.md): the locks. A latch
/// node's data is its participant's id, which Curator's participants read: it is never written.
constexpr bool has_marks(queue_kind kind) noexcept { return kind != queue_kind::latch; }

/// One node among the children of a queue's path.
struct contender {
    std::string name;          ///< child name, e.g. "_c_<uuid>-lock-0000000007"
    queue_kind kind;           ///< which name it carries
    std::int64_t sequence;     ///< the counter after the name
};

/// Parses a child name as a node of `family`'s queue (the family of that kind); std::nullopt for
/// children that are not (other recipes' nodes, anything else).
std::optional<contender> parse_contender(std::string_view child, queue_kind family);

/// The nodes of `family`'s queue among `children`, in queue order (by sequence, then name).
std::vector<contender> sorted_contenders(const std::vector<std::string>& children, queue_kind family);

/// What a contender should do, given the queue.
struct decision {
    bool holds = false;
    std::string watch;  ///< the node to watch when it does not hold (empty when it holds)
};

/// Nodes of a queue to read as if they were not in it (our own leftovers being deleted, a node
/// whose departure we work out ahead): a few names, so a shared queue need not be copied.
using skipped_nodes = std::vector<std::string>;

/// The node named `name` in `queue` (sorted as sorted_contenders sorts), found by its sequence
/// number in O(log n); queue.end() if it is not there.
std::vector<contender>::const_iterator locate(const std::vector<contender>& queue, std::string_view name);

/// Decides for `ours` (which must be in `queue`), reading `queue` without the nodes in `skipped`.
/// `ignore` names a node of our own that must not block us (the write node of a thread that
/// downgrades to a read lock).
/// - exclusive, write, latch: first holds; else watch the immediate predecessor.
/// - read: holds when no write node precedes it, or when `ignore` precedes it with only readers
///   before that (the thread's own write node: a downgrade); else watch the nearest preceding writer.
decision decide(const std::vector<contender>& queue, std::string_view ours, std::string_view ignore = {},
                const skipped_nodes& skipped = {});

/// True if a node other than a reader (and not in `skipped`) stands between `first` and `second`.
bool writer_between(const std::vector<contender>& queue, std::string_view first, std::string_view second,
                    const skipped_nodes& skipped = {});

/// The protection prefix of a node we create: "_c_<uuid>-".
std::string protection_prefix(std::string_view uuid);

/// True if `child` was created with `prefix` (Curator's protected-mode name check).
bool has_prefix(std::string_view child, std::string_view prefix) noexcept;

/// A fresh random uuid ("8-4-4-4-12" hex), as Curator's protected names carry.
std::string random_uuid();

}  // namespace zkr::detail
