// Internal: the async waits of a persistent node and of a tree cache without telling the
// observer, for a recipe that waits on them as part of a wait of its own (a group member's
// async_wait_joined), which the observer hears instead.
#pragma once

#include "toolkit/observed_operation.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/tree_cache.hpp"

#include <memory>

namespace zkr::detail {

void start_unobserved_wait_created(const std::shared_ptr<persistent_node_impl>& node, node_created_handler handler);
void start_unobserved_wait_initialized(const std::shared_ptr<cache_impl>& cache, cache_init_handler handler);
/// The observer's record of a group member's wait: a group_member wait on the group's path (its
/// cache's path).
observed_operation observed_group_wait(const cache_impl& group_cache);

}  // namespace zkr::detail
