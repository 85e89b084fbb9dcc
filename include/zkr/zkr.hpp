// zkr: ZooKeeper recipes for C++ — the umbrella header.
#pragma once

#include "zkr/client.hpp"
#include "zkr/error.hpp"
#include "zkr/lock_hold.hpp"
#include "zkr/lock_types.hpp"
#include "zkr/log.hpp"
#include "zkr/lock_view.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"
#include "zkr/retry.hpp"
#include "zkr/shared_mutex.hpp"
#include "zkr/types.hpp"
#include "zkr/watch.hpp"
