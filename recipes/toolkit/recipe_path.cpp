#include "recipe_path.hpp"

#include "connect_string.hpp"
#include "request_limits.hpp"
#include "zkr/path.hpp"

#include <stdexcept>

namespace zkr::detail {
namespace {

// Room for a recipe's node under its path: a name (protection uuid, recipe name, sequence) and
// owner data.
constexpr std::size_t node_room = 512;

}  // namespace

const std::string& checked_node_name(const std::string& name, const char* who, const char* what) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
        throw std::invalid_argument(std::string(who) + ": " + what + " \"" + name +
                                    "\" is not a node name (empty, \".\", \"..\" and '/' are not allowed)");
    if (auto problem = path_problem("/" + name); !problem.empty())
        throw std::invalid_argument(std::string(who) + ": " + what + " \"" + name + "\": " + problem);
    return name;
}

void check_recipe_path(const zkr::client& c, std::string_view path, const char* who, const char* what) {
    auto fail = [&](const std::string& rule) {
        throw std::invalid_argument(std::string(who) + ": invalid " + what + " " + quoted_path(path) + ": " + rule);
    };
    if (std::string problem = path_problem(path); !problem.empty()) fail(problem);
    if (path == "/") fail("it must not be the root \"/\"");
    // The server's own subtree (its quotas, its configuration) is no place for recipe nodes.
    std::string full = std::string(connect_string_chroot(c.options().connect)) + std::string(path);
    if (full == "/zookeeper" || full.starts_with("/zookeeper/")) {
        fail(std::string("it is under /zookeeper, the server's own subtree") +
             (full == path ? "" : " (with the chroot, " + quoted_path(full) + ")"));
    }
    request_sizer sizer(c.options());
    if (std::size_t request = sizer.create(path.size() + node_room, node_room); !sizer.fits(request))
        fail("too long: creating a node under it would take up to " + std::to_string(request) +
             " bytes, over client_options::max_request_size (" + std::to_string(sizer.limit()) + " bytes)");
}

void check_node_data(const zkr::client& c, std::string_view path, std::string_view data, const char* who,
                     const char* what) {
    check_node_data(c.options(), path, data, who, what);
}

void check_node_data(const zkr::client_options& options, std::string_view path, std::string_view data, const char* who,
                     const char* what) {
    request_sizer sizer(options);
    if (std::size_t request = sizer.create(path.size() + node_room, data.size()); !sizer.fits(request))
        throw std::invalid_argument(std::string(who) + ": " + what + " is " + std::to_string(data.size()) +
                                    " bytes: its node's create would take " + std::to_string(request) +
                                    " bytes, over client_options::max_request_size (" + std::to_string(sizer.limit()) +
                                    " bytes)");
}

}  // namespace zkr::detail
