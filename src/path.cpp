#include "zkr/path.hpp"

#include <stdexcept>

namespace zkr {

std::string path_problem(std::string_view path, bool sequential) {
    if (path.empty()) return "path is empty";
    if (path.front() != '/') return "path must start with '/'";
    if (path.size() == 1) return {};
    if (path.back() == '/' && !sequential) return "path must not end with '/'";
    for (unsigned char c : path) {
        if (c == '\0') return "path contains a NUL character";
        if (c < 0x20 || c == 0x7f) return "path contains a control character";
    }
    std::size_t start = 1;
    while (start <= path.size()) {
        std::size_t end = path.find('/', start);
        if (end == std::string_view::npos) end = path.size();
        std::string_view segment = path.substr(start, end - start);
        bool last = end == path.size();
        if (segment.empty() && !(last && sequential)) return "path contains an empty segment ('//')";
        if (segment == "." || segment == "..") return "path contains a '.' or '..' segment";
        start = end + 1;
    }
    return {};
}

void validate_path(std::string_view path, bool sequential) {
    std::string problem = path_problem(path, sequential);
    if (problem.empty()) return;
    std::string shown;
    for (char c : path) {
        if (c == '\0') shown += "\\0";
        else shown += c;
    }
    throw std::invalid_argument("invalid znode path \"" + shown + "\": " + problem);
}

std::string parent_path(std::string_view path) {
    std::size_t slash = path.rfind('/');
    if (slash == std::string_view::npos || slash == 0) return "/";
    return std::string(path.substr(0, slash));
}

std::string_view node_name(std::string_view path) {
    std::size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string join_path(std::string_view parent, std::string_view child) {
    std::string joined(parent);
    if (joined.empty() || joined.back() != '/') joined += '/';
    joined += child;
    return joined;
}

}  // namespace zkr
