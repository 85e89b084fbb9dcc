/// \file
/// Znode path rules, checked on our side so bad input fails fast with a message naming the rule.
#pragma once
#include "zkr/export.hpp"

#include <string>
#include <string_view>

namespace zkr {

/// Why a path is invalid, or an empty string if it is valid. The rules are ZooKeeper's:
/// absolute, no empty segment (so no "//" and no trailing "/" except the root itself),
/// no "." or ".." segment, no NUL or other control characters; valid UTF-8 and none of the
/// characters the server refuses (U+007F-U+009F, U+E000-U+F8FF, U+FFF0-U+FFFF, and every
/// character past U+FFFF: the server checks Java chars, where those are surrogates).
/// `sequential` allows the trailing "/" of a sequential create's prefix ("/locks/" + seq).
/// A path's length is checked against client_options::max_request_size by the client.
ZKR_EXPORT std::string path_problem(std::string_view path, bool sequential = false);

/// Throws std::invalid_argument("invalid znode path \"...\": <rule>") if the path is invalid
/// (the path shown as quoted_path() shows it).
ZKR_EXPORT void validate_path(std::string_view path, bool sequential = false);

/// The path as zkr's messages show it: in double quotes, with NUL as `\0` and other control
/// characters and bytes that are not UTF-8 as `\xNN`; a path over 120 bytes is cut in the middle
/// ("…") and followed by its length, e.g. "/locks/aaaa…aaaa" (1153434 bytes), so that no message
/// carries a huge path.
ZKR_EXPORT std::string quoted_path(std::string_view path);

/// The parent of an absolute path ("/a/b" -> "/a", "/a" -> "/").
ZKR_EXPORT std::string parent_path(std::string_view path);

/// The last segment of an absolute path ("/a/b" -> "b").
ZKR_EXPORT std::string_view node_name(std::string_view path);

/// Joins a parent path and a child name ("/" + "a" -> "/a", "/a" + "b" -> "/a/b").
ZKR_EXPORT std::string join_path(std::string_view parent, std::string_view child);

}  // namespace zkr
