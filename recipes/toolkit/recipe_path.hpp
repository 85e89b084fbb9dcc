// What every recipe checks of its input before anything is sent: a path the server can take and
// that is not the server's own, and node data that fits in a request.
#pragma once

#include <string>
#include <string_view>

namespace zkr::detail {

/// Throws std::invalid_argument, naming `who`, the path (shortened when long) and the rule it
/// breaks: ZooKeeper's path rules, the root "/", the server's own subtree "/zookeeper".
void check_recipe_path(std::string_view path, const char* who);

/// Throws std::invalid_argument, naming `who` and `what`, for node data too large for a request.
void check_node_data(std::string_view data, const char* who, const char* what);

/// A path for messages: at most 200 characters (the rest elided, with its length), control
/// characters escaped.
std::string shown_path(std::string_view path);

}  // namespace zkr::detail
