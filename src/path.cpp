#include "zkr/path.hpp"

#include <cstdio>
#include <stdexcept>

namespace zkr {
namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// One UTF-8 sequence at `at`: its code point and length in bytes, or a length of 0 where the
// bytes are not UTF-8 (a stray continuation byte, a sequence cut short, an overlong form, an
// encoded surrogate, past U+10FFFF). The server would read each such byte as U+FFFD.
struct decoded {
    char32_t code_point;
    std::size_t length;
};
decoded decode_utf8(std::string_view s, std::size_t at) {
    auto lead = static_cast<unsigned char>(s[at]);
    if (lead < 0x80) return {lead, 1};
    std::size_t length;
    char32_t code_point, smallest;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2, code_point = lead & 0x1f, smallest = 0x80;
    } else if ((lead & 0xf0) == 0xe0) {
        length = 3, code_point = lead & 0x0f, smallest = 0x800;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4, code_point = lead & 0x07, smallest = 0x10000;
    } else {
        return {0, 0};
    }
    if (s.size() - at < length) return {0, 0};
    for (std::size_t k = 1; k < length; ++k) {
        if (!is_continuation(s[at + k])) return {0, 0};
        code_point = (code_point << 6) | (static_cast<unsigned char>(s[at + k]) & 0x3f);
    }
    if (code_point < smallest || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) return {0, 0};
    return {code_point, length};
}

std::string byte_text(char c) {
    char text[8];
    std::snprintf(text, sizeof text, "\\x%02x", static_cast<unsigned char>(c));
    return text;
}

std::string code_point_text(char32_t c) {
    char text[16];
    std::snprintf(text, sizeof text, "U+%04X", static_cast<unsigned>(c));
    return text;
}

bool is_control(char32_t c) { return c < 0x20 || (c >= 0x7f && c <= 0x9f); }

// NUL as \0; control characters and bytes that are not UTF-8 as \xNN; the rest as it is.
void append_escaped(std::string& out, std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        auto [c, length] = decode_utf8(s, i);
        if (length == 0) {
            out += byte_text(s[i++]);
            continue;
        }
        if (c == 0) out += "\\0";
        else if (is_control(c)) for (std::size_t k = 0; k < length; ++k) out += byte_text(s[i + k]);
        else out.append(s.substr(i, length));
        i += length;
    }
}

}  // namespace

std::string path_problem(std::string_view path, bool sequential) {
    if (path.empty()) return "path is empty";
    if (path.front() != '/') return "path must start with '/'";
    if (path.size() == 1) return {};
    if (path.back() == '/' && !sequential) return "path must not end with '/'";
    // The server's own character rule (PathUtils.validatePath), on the code points.
    for (std::size_t i = 0; i < path.size();) {
        auto [c, length] = decode_utf8(path, i);
        if (length == 0)
            return "path is not valid UTF-8 (byte " + byte_text(path[i]) + " at offset " + std::to_string(i) + ")";
        if (c == 0) return "path contains a NUL character";
        if (is_control(c)) return "path contains a control character (" + code_point_text(c) + ")";
        if (c >= 0xe000 && c <= 0xf8ff)
            return "path contains " + code_point_text(c) + ", a private-use character the server refuses (U+E000-U+F8FF)";
        if (c >= 0xfff0 && c <= 0xffff)
            return "path contains " + code_point_text(c) + ", which the server refuses (U+FFF0-U+FFFF)";
        if (c > 0xffff)
            return "path contains " + code_point_text(c) + ": the server refuses every character past U+FFFF";
        i += length;
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
    throw std::invalid_argument("invalid znode path " + quoted_path(path) + ": " + problem);
}

std::string quoted_path(std::string_view path) {
    // Enough to recognise a path by, short enough for any message.
    constexpr std::size_t longest = 120, head = 80, tail = 24;
    std::string out = "\"";
    if (path.size() <= longest) {
        append_escaped(out, path);
        return out + "\"";
    }
    // Cut between characters, not inside one.
    std::size_t head_end = head, tail_start = path.size() - tail;
    for (int k = 0; k < 3 && head_end > 0 && is_continuation(path[head_end]); ++k) --head_end;
    for (int k = 0; k < 3 && tail_start < path.size() && is_continuation(path[tail_start]); ++k) ++tail_start;
    append_escaped(out, path.substr(0, head_end));
    out += "...";
    append_escaped(out, path.substr(tail_start));
    return out + "\" (" + std::to_string(path.size()) + " bytes)";
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
