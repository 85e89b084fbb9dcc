/// \file
/// zkr: ZooKeeper recipes for C++ — the umbrella header.
#pragma once

#include "zkr/atomic.hpp"
#include "zkr/barrier.hpp"
#include "zkr/client.hpp"
#include "zkr/count_down_latch.hpp"
#include "zkr/double_barrier.hpp"
#include "zkr/election_types.hpp"
#include "zkr/leader_latch.hpp"
#include "zkr/leader_observer.hpp"
#include "zkr/leader_selector.hpp"
#include "zkr/error.hpp"
#include "zkr/group_member.hpp"
#include "zkr/id_generator.hpp"
#include "zkr/lock_hold.hpp"
#include "zkr/lock_protocol.hpp"
#include "zkr/lock_types.hpp"
#include "zkr/log.hpp"
#include "zkr/lock_view.hpp"
#include "zkr/metrics.hpp"
#include "zkr/multi_lock.hpp"
#include "zkr/observer.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/retry.hpp"
#include "zkr/semaphore.hpp"
#include "zkr/shared_count.hpp"
#include "zkr/shared_mutex.hpp"
#include "zkr/tree_cache.hpp"
#include "zkr/ttl_node.hpp"
#include "zkr/types.hpp"
#include "zkr/version.hpp"
#include "zkr/watch.hpp"

/// \namespace zkr
/// ZooKeeper lock recipes for C++, in the style of Apache Curator and wire-compatible with it:
/// zkr::client (one ZooKeeper session, kept alive and renewed), zkr::mutex and zkr::shared_mutex
/// (distributed locks; zkr::lock_view is one side of a lock, zkr::lock_hold an async hold), and
/// the plain data they exchange. zkr::detail is internal, not API.
