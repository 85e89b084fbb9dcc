// Internal: checks a connect string before the C client sees it (it reports little on bad input).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkr::detail {

/// Why `connect` is not "host:port[,host:port...][/chroot]", or an empty string if it is.
std::string connect_string_problem(std::string_view connect);

/// The chroot of a well-formed connect string ("/app" of "h:1/app"), or empty if it has none
/// (nor for "h:1/": the C client then uses none either). The C client puts it before every path.
std::string_view connect_string_chroot(std::string_view connect);

/// The (host, port) pairs of a well-formed connect string, brackets of IPv6 literals removed.
std::vector<std::pair<std::string, std::string>> connect_string_hosts(std::string_view connect);

}  // namespace zkr::detail
