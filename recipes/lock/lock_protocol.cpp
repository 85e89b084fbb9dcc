#include "zkr/lock_protocol.hpp"

#include "toolkit/owner_data.hpp"

#include <algorithm>
#include <charconv>

namespace zkr::lock_protocol {
namespace {

struct marker {
    std::string_view text;
    role node_role;
    recipe node_recipe;
};

constexpr marker markers[] = {
    {"lock-", role::writer, recipe::mutex},
    {"__WRIT__", role::writer, recipe::read_write},
    {"__READ__", role::reader, recipe::read_write},
    {"__lock__", role::writer, recipe::kazoo},
    {"__rlock__", role::reader, recipe::kazoo},
};

std::optional<std::int64_t> to_int(std::string_view digits) {
    std::int64_t value = 0;
    if (digits.empty() || digits.front() == '-' || digits.front() == '+') return std::nullopt;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
}

bool same_thread(const lock_owner& a, const lock_owner& b) {
    return a.is_zkr() && b.is_zkr() && !a.async && !b.async && a.host == b.host && a.pid == b.pid &&
           a.thread == b.thread;
}

}  // namespace

const char* to_string(recipe r) noexcept {
    switch (r) {
        case recipe::mutex: return "mutex";
        case recipe::read_write: return "read-write";
        case recipe::kazoo: return "kazoo";
    }
    return "?";
}

std::optional<node_name> parse_node_name(std::string_view child) {
    // The name that occurs last names the node; the number after it is its place.
    std::optional<node_name> found;
    std::size_t found_at = 0;
    for (const auto& m : markers) {
        std::size_t at = child.rfind(m.text);
        if (at == std::string_view::npos || (found && at < found_at)) continue;
        auto sequence = to_int(child.substr(at + m.text.size()));
        if (!sequence) continue;
        found = node_name{std::string(child), *sequence, m.node_role, m.node_recipe};
        found_at = at;
    }
    return found;
}

lock_owner decode_owner(std::string_view data) { return detail::decode_owner(data); }

bool is_marked_holding(std::string_view data) { return detail::is_marked_holding(data); }

void sort_queue(std::vector<queued>& nodes) {
    std::stable_sort(nodes.begin(), nodes.end(), [](const queued& a, const queued& b) {
        return a.name.sequence != b.name.sequence ? a.name.sequence < b.name.sequence : a.name.name < b.name.name;
    });
}

std::vector<bool> holders(const std::vector<queued>& queue) {
    std::vector<bool> holds(queue.size(), false);
    for (auto r : {recipe::mutex, recipe::read_write, recipe::kazoo}) {
        bool any = false, writer_seen = false;
        for (std::size_t i = 0; i < queue.size(); ++i) {
            const auto& node = queue[i];
            if (node.name.node_recipe != r) continue;
            bool first = !any;
            any = true;
            if (node.name.node_role == role::writer) {
                holds[i] = first;
                writer_seen = true;
                continue;
            }
            if (!writer_seen) {
                holds[i] = true;
                continue;
            }
            // A downgrade: a write node of this very thread with only readers of this recipe before it.
            bool readers_only = true;
            for (std::size_t j = 0; j < i; ++j) {
                const auto& before = queue[j];
                if (before.name.node_recipe != r) continue;
                if (before.name.node_role == role::writer) {
                    if (readers_only && same_thread(before.owner, node.owner)) holds[i] = true;
                    readers_only = false;
                }
            }
        }
    }
    return holds;
}

}  // namespace zkr::lock_protocol
