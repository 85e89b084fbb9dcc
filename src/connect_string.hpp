// Internal: checks a connect string before the C client sees it (it reports little on bad input).
#pragma once

#include <string>
#include <string_view>

namespace zkr::detail {

/// Why `connect` is not "host:port[,host:port...][/chroot]", or an empty string if it is.
std::string connect_string_problem(std::string_view connect);

}  // namespace zkr::detail
