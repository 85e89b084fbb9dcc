// The owner identity zkr writes into its lock nodes, and reading it back (zkr's or anyone's).
#pragma once

#include "zkr/lock_types.hpp"

#include <string>
#include <string_view>

namespace zkr::detail {

/// "zkr:1;host=<host>;pid=<pid>;thread=<tid>[;async=1]" (';' and '=' in the host name become '_').
/// `async`: the hold belongs to an async operation's lock_hold, not to the thread that started it.
std::string encode_owner(std::string_view host, std::int64_t pid, std::int64_t thread, bool async = false);

/// Parses zkr's format; anything else comes back with only `raw` set.
lock_owner decode_owner(std::string_view data);

/// The data a holder sets on its node to say it holds: its owner data plus ";held=1".
std::string holding_mark(std::string_view owner_data);

/// True if `data` is zkr's owner data ("zkr:1;...").
bool is_zkr_owner_data(std::string_view data);

/// True if `data` is zkr's owner data carrying the holding mark.
bool is_marked_holding(std::string_view data);

/// This process's host name, pid, and the calling thread's Linux thread id, encoded.
std::string current_owner_data(bool async = false);

}  // namespace zkr::detail
