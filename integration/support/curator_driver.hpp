// The command line that runs the Curator 5.4 driver (integration/interop), built by CMake.
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>

namespace zkr::test {

/// "java ... CuratorLockDriver <args>"; ZKR_CURATOR_DRIVER_DIR is set by the build.
inline std::string curator_command(const std::string& args) {
    std::ifstream in(ZKR_CURATOR_DRIVER_DIR "/run-prefix");
    std::string prefix;
    if (!std::getline(in, prefix) || prefix.empty())
        throw std::runtime_error("the Curator driver is not built: " ZKR_CURATOR_DRIVER_DIR "/run-prefix");
    return prefix + " " + args;
}

}  // namespace zkr::test
