#include "duration.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace zklock {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
    double amount = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), amount);
    if (ec != std::errc() || end == text.data()) return std::nullopt;
    std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
    static constexpr std::pair<std::string_view, double> units[] = {
        {"", 1000.0}, {"ms", 1.0}, {"s", 1000.0}, {"m", 60'000.0}, {"h", 3'600'000.0}};
    for (const auto& [name, milliseconds_per_unit] : units) {
        if (unit != name) continue;
        double milliseconds = amount * milliseconds_per_unit;
        // A week is far beyond any sensible lock wait; the bound keeps the cast defined.
        if (!std::isfinite(milliseconds) || milliseconds < 0 || milliseconds > 7 * 24 * 3'600'000.0) return std::nullopt;
        return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(milliseconds)));
    }
    return std::nullopt;
}

std::string format_duration(std::chrono::milliseconds d) {
    auto ms = d.count();
    if (ms % 60'000 == 0 && ms != 0) return std::to_string(ms / 60'000) + "m";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    if (ms < 1000) return std::to_string(ms) + "ms";
    char text[32];
    std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(ms) / 1000.0);
    return text;
}

}  // namespace zklock
