// The owner identity zkr writes into its lock nodes, and reading it back (zkr's or anyone's).
#pragma once

#include "zkr/lock_types.hpp"

#include <string>
#include <string_view>

namespace zkr::detail {

/// "zkr:1;host=<host>;pid=<pid>;thread=<tid>" (';' and '=' in the host name become '_').
std::string encode_owner(std::string_view host, std::int64_t pid, std::int64_t thread);

/// Parses zkr's format; anything else comes back with only `raw` set.
lock_owner decode_owner(std::string_view data);

/// This process's host name, pid, and the calling thread's Linux thread id, encoded.
std::string current_owner_data();

}  // namespace zkr::detail
