#pragma once
// Internal, exported for zkr::testkit (which joins a client's session from a second handle to
// expire it, as the server would): not part of zkr's API, and not for recipes.
#include "zkr/export.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace zkr {
class client;
}

namespace zkr::detail {

/// The client's current session: its id and password ({0, ""} while it has none).
ZKR_EXPORT std::pair<std::int64_t, std::string> session_credentials(const client& c);

}  // namespace zkr::detail
