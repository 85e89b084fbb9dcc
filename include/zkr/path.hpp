/// \file
/// Znode path rules, checked on our side so bad input fails fast with a message naming the rule.
#pragma once
#include "zkr/export.hpp"

#include <string>
#include <string_view>

namespace zkr {

/// Why a path is invalid, or an empty string if it is valid. The rules are ZooKeeper's:
/// absolute, no empty segment (so no "//" and no trailing "/" except the root itself),
/// no "." or ".." segment, no NUL or other control characters.
/// `sequential` allows the trailing "/" of a sequential create's prefix ("/locks/" + seq).
ZKR_EXPORT std::string path_problem(std::string_view path, bool sequential = false);

/// Throws std::invalid_argument("invalid znode path \"...\": <rule>") if the path is invalid.
ZKR_EXPORT void validate_path(std::string_view path, bool sequential = false);

/// The parent of an absolute path ("/a/b" -> "/a", "/a" -> "/").
ZKR_EXPORT std::string parent_path(std::string_view path);

/// The last segment of an absolute path ("/a/b" -> "b").
ZKR_EXPORT std::string_view node_name(std::string_view path);

/// Joins a parent path and a child name ("/" + "a" -> "/a", "/a" + "b" -> "/a/b").
ZKR_EXPORT std::string join_path(std::string_view parent, std::string_view child);

}  // namespace zkr
