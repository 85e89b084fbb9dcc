// zklock's subcommands. Each returns the exit status, or throws zklock::failure.
#pragma once

#include "options.hpp"

namespace zklock {

int run_command(const run_options& o);
int status_command(const status_options& o);
int watch_command(const watch_options& o);
int tree_command(const tree_options& o);
int release_stale_command(const release_stale_options& o);

}  // namespace zklock
