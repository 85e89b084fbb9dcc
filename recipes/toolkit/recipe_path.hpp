// What every recipe checks of its input before anything is sent: a path the server can take and
// that is not the server's own, and node data that fits in a request.
#pragma once

#include "zkr/client.hpp"

#include <string>
#include <string_view>

namespace zkr::detail {

/// Returns `name`, or throws std::invalid_argument naming `who` and `what` ("member id", "child
/// name") when it cannot be one node's name: empty, ".", "..", a '/', or against ZooKeeper's rules.
const std::string& checked_node_name(const std::string& name, const char* who, const char* what);
/// Throws std::invalid_argument, naming `who`, `what` ("lock path", "election path"...), the path
/// (escaped, shortened when long) and the rule it breaks: ZooKeeper's path rules, the root "/",
/// the server's own subtree "/zookeeper" (also through the client's chroot), or a path too long
/// for the recipe's nodes under it to fit in a request (client_options::max_request_size).
void check_recipe_path(const zkr::client& c, std::string_view path, const char* who, const char* what);

/// Throws std::invalid_argument, naming `who` and `what`, for node data that would not fit in a
/// create under `path` (client_options::max_request_size).
void check_node_data(const zkr::client& c, std::string_view path, std::string_view data, const char* who,
                     const char* what);
/// The same, with the client's options (for a recipe that may outlive its client).
void check_node_data(const zkr::client_options& options, std::string_view path, std::string_view data, const char* who,
                     const char* what);

}  // namespace zkr::detail
