// Durations on the command line: "500ms", "10s", "2m", "1h", or a bare number of seconds
// ("1.5", as flock's -w takes them).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace zklock {

/// The duration `text` names, or std::nullopt if it is not one (negative, unknown unit, junk).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

/// "1.5s", "250ms", "2m": for messages.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace zklock
