// One listing of a queue's parent: the children as the server sent them, shared — never copied —
// by every step that one coalesced listing answers (listing_coalescer.hpp), with each family's
// queue order worked out once for all of them. Ten thousand waiters of one client answered by
// one listing of ten thousand children then cost one sort, not ten thousand.
#pragma once

#include "sequence_queue.hpp"

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace zkr::detail {

class listing {
public:
    listing() noexcept;  ///< no children (allocates nothing)
    listing(std::vector<std::string> children);  // NOLINT: a listing is its children
    listing(std::initializer_list<std::string> children);

    const std::vector<std::string>& children() const noexcept;
    /// The nodes of `family`'s queue among the children, in queue order (sorted_contenders),
    /// worked out on first use and then shared. Thread-safe.
    const std::vector<contender>& queue(queue_kind family) const;

private:
    struct shared;
    std::shared_ptr<const shared> shared_;
};

}  // namespace zkr::detail
