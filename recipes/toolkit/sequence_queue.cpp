#include "sequence_queue.hpp"

#include <boost/uuid/uuid_generators.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <algorithm>
#include <charconv>

namespace zkr::detail {

std::string_view queue_marker(queue_kind kind) noexcept {
    switch (kind) {
        case queue_kind::exclusive: return "lock-";
        case queue_kind::read: return "__READ__";
        case queue_kind::write: return "__WRIT__";
        case queue_kind::latch: return "latch-";
    }
    return "lock-";
}

std::optional<contender> parse_contender(std::string_view child, queue_kind family) {
    // As Curator's drivers: the text after the LAST occurrence of the name is the sequence.
    auto try_kind = [&](queue_kind kind) -> std::optional<contender> {
        std::string_view marker = queue_marker(kind);
        std::size_t at = child.rfind(marker);
        if (at == std::string_view::npos) return std::nullopt;
        std::string_view digits = child.substr(at + marker.size());
        if (digits.empty()) return std::nullopt;
        std::int64_t sequence = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), sequence);
        if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
        return contender{std::string(child), kind, sequence};
    };
    if (!is_read_write(family)) return try_kind(family);
    auto read = try_kind(queue_kind::read);
    auto write = try_kind(queue_kind::write);
    if (read && write) {
        // Both names (a uuid cannot contain them, but be exact): the later one names the node.
        return child.rfind(queue_marker(queue_kind::read)) > child.rfind(queue_marker(queue_kind::write)) ? read : write;
    }
    return read ? read : write;
}

std::vector<contender> sorted_contenders(const std::vector<std::string>& children, queue_kind family) {
    std::vector<contender> queue;
    queue.reserve(children.size());
    for (const auto& child : children) {
        if (auto c = parse_contender(child, family)) queue.push_back(std::move(*c));
    }
    std::sort(queue.begin(), queue.end(), [](const contender& a, const contender& b) {
        return a.sequence != b.sequence ? a.sequence < b.sequence : a.name < b.name;
    });
    return queue;
}

namespace {

bool queue_order(const contender& a, std::int64_t sequence, std::string_view name) {
    return a.sequence != sequence ? a.sequence < sequence : a.name < name;
}

bool is_skipped(const skipped_nodes& skipped, std::string_view name) {
    return std::find(skipped.begin(), skipped.end(), name) != skipped.end();
}

}  // namespace

std::vector<contender>::const_iterator locate(const std::vector<contender>& queue, std::string_view name) {
    // Every contender's name ends in its sequence number (the text after its recipe's name).
    std::size_t digits = name.size();
    while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') --digits;
    std::int64_t sequence = 0;
    auto [end, ec] = std::from_chars(name.data() + digits, name.data() + name.size(), sequence);
    if (digits == name.size() || ec != std::errc()) {
        return std::find_if(queue.begin(), queue.end(), [&](const contender& c) { return c.name == name; });
    }
    auto it = std::lower_bound(queue.begin(), queue.end(), name,
                               [&](const contender& c, std::string_view n) { return queue_order(c, sequence, n); });
    return it != queue.end() && it->name == name ? it : queue.end();
}

decision decide(const std::vector<contender>& queue, std::string_view ours, std::string_view ignore,
                const skipped_nodes& skipped) {
    auto self = locate(queue, ours);
    if (self == queue.end()) return {};  // the caller checks presence first
    auto counts = [&](const contender& c) { return !is_skipped(skipped, c.name); };
    if (self->kind == queue_kind::read) {
        // The thread holding the write lock may read at once (a downgrade): its own write node
        // precedes ours, no writer precedes that, so no one else can hold meanwhile.
        auto own = ignore.empty() ? self : locate(queue, ignore);
        if (own != queue.end() && own < self &&
            std::none_of(queue.begin(), own, [&](const contender& c) { return counts(c) && c.kind != queue_kind::read; }))
            return {true, {}};
        for (auto it = self; it != queue.begin();) {
            --it;
            if (it->kind != queue_kind::read && it->name != ignore && counts(*it)) return {false, it->name};
        }
        return {true, {}};
    }
    for (auto it = self; it != queue.begin();) {
        --it;
        if (it->name != ignore && counts(*it)) return {false, it->name};
    }
    return {true, {}};
}

bool writer_between(const std::vector<contender>& queue, std::string_view first, std::string_view second,
                    const skipped_nodes& skipped) {
    auto a = locate(queue, first);
    auto b = locate(queue, second);
    if (a == queue.end() || b == queue.end() || a >= b) return false;
    return std::any_of(a + 1, b, [&](const contender& c) { return c.kind != queue_kind::read && !is_skipped(skipped, c.name); });
}

std::string protection_prefix(std::string_view uuid) { return "_c_" + std::string(uuid) + "-"; }

bool has_prefix(std::string_view child, std::string_view prefix) noexcept {
    return child.substr(0, prefix.size()) == prefix;
}

std::string random_uuid() {
    thread_local boost::uuids::random_generator generate;
    return boost::uuids::to_string(generate());
}

}  // namespace zkr::detail
