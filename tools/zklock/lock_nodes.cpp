#include "lock_nodes.hpp"

#include <charconv>

namespace zklock {
namespace {

struct marker {
    std::string_view text;
    lock_role role;
    lock_recipe recipe;
};

constexpr marker markers[] = {
    {"lock-", lock_role::writer, lock_recipe::mutex},
    {"__WRIT__", lock_role::writer, lock_recipe::read_write},
    {"__READ__", lock_role::reader, lock_recipe::read_write},
    {"__lock__", lock_role::writer, lock_recipe::kazoo},
    {"__rlock__", lock_role::reader, lock_recipe::kazoo},
};

std::optional<std::int64_t> to_int(std::string_view digits) {
    std::int64_t value = 0;
    if (digits.empty() || digits.front() == '-' || digits.front() == '+') return std::nullopt;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
}

}  // namespace

const char* to_string(lock_recipe r) noexcept {
    switch (r) {
        case lock_recipe::mutex: return "mutex";
        case lock_recipe::read_write: return "read-write";
        case lock_recipe::kazoo: return "kazoo";
    }
    return "?";
}

std::optional<lock_node_name> parse_lock_node_name(std::string_view child) {
    std::optional<lock_node_name> found;
    std::size_t found_at = 0;
    for (const auto& m : markers) {
        std::size_t at = child.rfind(m.text);
        if (at == std::string_view::npos || (found && at < found_at)) continue;
        auto sequence = to_int(child.substr(at + m.text.size()));
        if (!sequence) continue;
        found = lock_node_name{std::string(child), *sequence, m.role, m.recipe};
        found_at = at;
    }
    return found;
}

std::optional<zkr_owner> parse_zkr_owner(std::string_view data) {
    constexpr std::string_view prefix = "zkr:1;";
    if (data.substr(0, prefix.size()) != prefix) return std::nullopt;
    zkr_owner owner;
    std::string_view rest = data.substr(prefix.size());
    while (!rest.empty()) {
        std::size_t end = rest.find(';');
        std::string_view field = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        std::size_t eq = field.find('=');
        if (eq == std::string_view::npos) return std::nullopt;
        std::string_view key = field.substr(0, eq), value = field.substr(eq + 1);
        if (key == "host") owner.host = std::string(value);
        else if (key == "pid") owner.pid = to_int(value).value_or(0);
        else if (key == "thread") owner.thread = to_int(value).value_or(0);
        else if (key == "async") owner.async = value == "1";
        // Other keys are for later versions of the format.
    }
    if (owner.pid == 0) return std::nullopt;
    return owner;
}

namespace {
bool same_blocking_owner(const std::optional<zkr_owner>& a, const std::optional<zkr_owner>& b) {
    return a && b && !a->async && !b->async && a->host == b->host && a->pid == b->pid && a->thread == b->thread;
}
}  // namespace

std::vector<bool> holders(const std::vector<queue_position>& queue) {
    std::vector<bool> holds(queue.size(), false);
    for (auto recipe : {lock_recipe::mutex, lock_recipe::read_write, lock_recipe::kazoo}) {
        std::optional<std::size_t> head, first_writer;
        std::size_t writers_seen = 0;
        for (std::size_t i = 0; i < queue.size(); ++i) {
            const auto& node = queue[i];
            if (node.recipe != recipe) continue;
            if (!head) head = i;
            if (node.role == lock_role::writer) {
                holds[i] = i == *head;
                if (!first_writer) first_writer = i;
                ++writers_seen;
                continue;
            }
            holds[i] = writers_seen == 0 || (writers_seen == 1 && *first_writer == *head &&
                                             same_blocking_owner(queue[*head].owner, node.owner));
        }
    }
    return holds;
}

}  // namespace zklock
