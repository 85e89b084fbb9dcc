#include "recipe_path.hpp"

#include "zkr/path.hpp"

#include <cstdio>
#include <stdexcept>

namespace zkr::detail {
namespace {

// ZooKeeper's default jute.maxbuffer is 1 MiB for a whole request: the path, the data, the ACL
// and the framing. What is left for a node's data once a path of the longest sensible length is in.
constexpr std::size_t max_data = 1024 * 1024 - 8 * 1024;

}  // namespace

std::string shown_path(std::string_view path) {
    std::string out;
    std::size_t shown = std::min<std::size_t>(path.size(), 200);
    for (std::size_t i = 0; i < shown; ++i) {
        unsigned char c = static_cast<unsigned char>(path[i]);
        if (c < 0x20 || c == 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (shown < path.size()) out += "... (" + std::to_string(path.size()) + " bytes)";
    return out;
}

void check_recipe_path(std::string_view path, const char* who) {
    auto fail = [&](const std::string& rule) {
        throw std::invalid_argument(std::string(who) + ": invalid path \"" + shown_path(path) + "\": " + rule);
    };
    if (std::string problem = path_problem(path); !problem.empty()) fail(problem);
    if (path == "/") fail("the root \"/\" cannot be a recipe's path");
    if (path == "/zookeeper" || path.substr(0, 11) == "/zookeeper/") fail("\"/zookeeper\" is the server's own subtree");
    if (path.size() > 4096) fail("longer than 4096 bytes");
}

void check_node_data(std::string_view data, const char* who, const char* what) {
    if (data.size() > max_data)
        throw std::invalid_argument(std::string(who) + ": " + what + " is " + std::to_string(data.size()) +
                                    " bytes; a node holds at most " + std::to_string(max_data) +
                                    " (the server's default request limit, jute.maxbuffer, is 1 MiB)");
}

}  // namespace zkr::detail
