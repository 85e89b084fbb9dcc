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

decision decide(const std::vector<contender>& queue, std::string_view ours, std::string_view ignore) {
    auto self = std::find_if(queue.begin(), queue.end(), [&](const contender& c) { return c.name == ours; });
    if (self == queue.end()) return {};  // the caller checks presence first
    if (self->kind == queue_kind::read) {
        // The thread holding the write lock may read at once (a downgrade): its own write node
        // precedes ours, no writer precedes that, so no one else can hold meanwhile.
        auto own = std::find_if(queue.begin(), self, [&](const contender& c) { return c.name == ignore; });
        if (!ignore.empty() && own != self &&
            std::none_of(queue.begin(), own, [](const contender& c) { return c.kind != queue_kind::read; }))
            return {true, {}};
        for (auto it = self; it != queue.begin();) {
            --it;
            if (it->kind != queue_kind::read && it->name != ignore) return {false, it->name};
        }
        return {true, {}};
    }
    for (auto it = self; it != queue.begin();) {
        --it;
        if (it->name != ignore) return {false, it->name};
    }
    return {true, {}};
}

bool writer_between(const std::vector<contender>& queue, std::string_view first, std::string_view second) {
    auto a = std::find_if(queue.begin(), queue.end(), [&](const contender& c) { return c.name == first; });
    auto b = std::find_if(queue.begin(), queue.end(), [&](const contender& c) { return c.name == second; });
    if (a == queue.end() || b == queue.end() || a >= b) return false;
    return std::any_of(a + 1, b, [](const contender& c) { return c.kind != queue_kind::read; });
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
