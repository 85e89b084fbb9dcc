// The one place where the mutex and the read/write lock differ (Curator's driver split):
// which children take part, in what order, who may hold and whom a waiter watches.
// Pure logic, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkr::detail {

/// What a contender wants.
enum class lock_kind { exclusive, read, write };

/// The marker in a node's name, as Curator names them: "lock-", "__READ__", "__WRIT__".
std::string_view lock_marker(lock_kind kind) noexcept;

/// One lock node among the children of a lock path.
struct contender {
    std::string name;          ///< child name, e.g. "_c_<uuid>-lock-0000000007"
    lock_kind kind;            ///< exclusive, read or write
    std::int64_t sequence;     ///< the counter after the marker
};

/// Parses a child name; std::nullopt for children that are not lock nodes of this family
/// (`read_write` selects "__READ__"/"__WRIT__", otherwise "lock-").
std::optional<contender> parse_contender(std::string_view child, bool read_write);

/// Lock nodes among `children`, in queue order (by sequence, then name).
std::vector<contender> sorted_contenders(const std::vector<std::string>& children, bool read_write);

/// What a contender should do, given the queue.
struct decision {
    bool holds = false;
    std::string watch;  ///< the node to watch when it does not hold (empty when it holds)
};

/// Decides for `ours` (which must be in `queue`). `ignore` names a node of our own thread that
/// must not block us (the write node of a thread that downgrades to a read lock).
/// - exclusive / write: holds when lowest; else watches its immediate predecessor.
/// - read: holds when no write node precedes it, or when `ignore` precedes it (the thread's own
///   write node: a downgrade); else watches the nearest preceding writer.
decision decide(const std::vector<contender>& queue, std::string_view ours, std::string_view ignore = {});

/// True if a write (or exclusive) node stands between `first` and `second` in the queue.
bool writer_between(const std::vector<contender>& queue, std::string_view first, std::string_view second);

/// The protection prefix of a node we create: "_c_<uuid>-".
std::string protection_prefix(std::string_view uuid);

/// True if `child` was created with `prefix` (Curator's protected-mode name check).
bool has_prefix(std::string_view child, std::string_view prefix) noexcept;

}  // namespace zkr::detail
