#include "zkr/version.hpp"

namespace zkr {

const char* version() noexcept { return ZKR_VERSION_STRING; }

}  // namespace zkr
