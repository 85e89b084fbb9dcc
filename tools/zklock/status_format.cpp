#include "status_format.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace zklock {
namespace {

std::int64_t age_ms(std::int64_t taken_at_ms, const zkr::stat& stat) {
    // Server and local clocks may disagree a little: never a negative age.
    return std::max<std::int64_t>(0, taken_at_ms - stat.ctime);
}

std::int64_t age_ms(const queue_snapshot& snapshot, const queue_entry& entry) { return age_ms(snapshot.taken_at_ms, entry.stat); }

std::string format_age(std::int64_t ms) {
    char text[32];
    if (ms < 1000) std::snprintf(text, sizeof text, "%lldms", static_cast<long long>(ms));
    else if (ms < 60'000) std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(ms) / 1000.0);
    else if (ms < 3'600'000)
        std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(ms / 60'000),
                      static_cast<long long>(ms / 1000 % 60));
    else
        std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                      static_cast<long long>(ms / 60'000 % 60));
    return text;
}

// The length of the well-formed UTF-8 sequence at text[i] (Unicode's table 3-7: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0 if there is none.
std::size_t utf8_sequence_at(std::string_view text, std::size_t i) {
    auto byte = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
    auto in = [](unsigned b, unsigned low, unsigned high) { return b >= low && b <= high; };
    unsigned lead = byte(0);
    if (lead < 0x80) return 1;
    if (in(lead, 0xc2, 0xdf)) return in(byte(1), 0x80, 0xbf) ? 2 : 0;
    if (in(lead, 0xe0, 0xef)) {
        unsigned low = lead == 0xe0 ? 0xa0 : 0x80, high = lead == 0xed ? 0x9f : 0xbf;
        return in(byte(1), low, high) && in(byte(2), 0x80, 0xbf) ? 3 : 0;
    }
    if (in(lead, 0xf0, 0xf4)) {
        unsigned low = lead == 0xf0 ? 0x90 : 0x80, high = lead == 0xf4 ? 0x8f : 0xbf;
        return in(byte(1), low, high) && in(byte(2), 0x80, 0xbf) && in(byte(3), 0x80, 0xbf) ? 4 : 0;
    }
    return 0;
}

// The code point of a well-formed sequence of `length` bytes at text[i].
char32_t code_point_at(std::string_view text, std::size_t i, std::size_t length) {
    static constexpr unsigned lead_bits[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    char32_t c = static_cast<unsigned char>(text[i]) & lead_bits[length];
    for (std::size_t k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    return c;
}

// Characters that move the cursor or reorder what a terminal shows, beyond ASCII's controls:
// C1 controls, and Unicode's bidirectional and line/paragraph-separator format characters.
bool is_unsafe_on_a_terminal(char32_t c) {
    return (c >= 0x80 && c <= 0x9f) || c == 0x061c || c == 0x200e || c == 0x200f || (c >= 0x2028 && c <= 0x202e) ||
           (c >= 0x2066 && c <= 0x2069);
}

// Text from ZooKeeper (node data, owner fields, node names) for a terminal, on one line: see
// 'zklock status --help'.
std::string escaped(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        auto c = static_cast<unsigned char>(text[i]);
        std::size_t length = utf8_sequence_at(text, i);
        if (c >= 0x80 && length > 0 && !is_unsafe_on_a_terminal(code_point_at(text, i, length))) {
            out.append(text.substr(i, length));  // UTF-8 text as is
            i += length;
            continue;
        }
        std::size_t count = c >= 0x80 && length > 0 ? length : 1;  // an unsafe character: all its bytes
        for (std::size_t k = 0; k < count; ++k, ++i) {
            auto b = static_cast<unsigned char>(text[i]);
            switch (b) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                default:
                    if (b >= 0x20 && b < 0x7f) {
                        out += static_cast<char>(b);
                    } else {
                        char hex[8];
                        std::snprintf(hex, sizeof hex, "\\x%02x", b);
                        out += hex;
                    }
            }
        }
    }
    return out;
}

}  // namespace

std::string terminal_safe(std::string_view text) { return escaped(text); }

namespace {

// Columns an escaped() text takes: one per character (UTF-8 continuation bytes take none).
std::size_t display_width(std::string_view text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

template <class Node>  // a queue_entry or a node_reading: the same fields
std::string owner_text(const Node& e) {
    if (e.data_error) return "(data unreadable: " + escaped(e.data_error.message()) + ")";
    if (!e.owner) return "data \"" + escaped(e.data) + "\"";
    return "host=" + escaped(e.owner->host) + " pid=" + std::to_string(e.owner->pid) +
           " thread=" + std::to_string(e.owner->thread) + (e.owner->async ? " async" : "");
}

// Rows as a table: columns as wide as their widest cell, two spaces in front.
void print_table(std::ostringstream& out, const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> widths(rows.front().size(), 0);
    for (const auto& row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
    }
    for (const auto& row : rows) {
        out << " ";
        for (std::size_t c = 0; c < row.size(); ++c) {
            out << " " << row[c];
            if (c + 1 < row.size()) out << std::string(widths[c] - display_width(row[c]), ' ');
        }
        out << "\n";
    }
}

std::size_t count_held(const semaphore_snapshot& s) {
    return static_cast<std::size_t>(std::count_if(s.leases.begin(), s.leases.end(), [](const lease_entry& e) { return e.holds; }));
}

template <class Node>
void print_owner_json(std::ostringstream& out, const Node& e) {
    out << ",\"owner\":";
    if (e.owner) {
        out << "{\"host\":" << json_string(e.owner->host) << ",\"pid\":" << e.owner->pid
            << ",\"thread\":" << e.owner->thread << ",\"async\":" << (e.owner->async ? "true" : "false") << "}";
    } else {
        out << "null";
    }
    if (e.data_error) out << ",\"data\":null,\"data_error\":" << json_string(e.data_error.message());
    else out << ",\"data\":" << json_string(e.data);
}

const char* role_name(lock_role r) { return r == lock_role::reader ? "reader" : "writer"; }

std::size_t count_holders(const queue_snapshot& s) {
    return static_cast<std::size_t>(std::count_if(s.entries.begin(), s.entries.end(), [](const queue_entry& e) { return e.holds; }));
}

// The recipes whose nodes are under the path, in a fixed order.
std::vector<lock_recipe> recipes_present(const queue_snapshot& s) {
    std::vector<lock_recipe> out;
    for (auto recipe : {lock_recipe::mutex, lock_recipe::read_write, lock_recipe::kazoo}) {
        if (std::any_of(s.entries.begin(), s.entries.end(), [&](const queue_entry& e) { return e.name.recipe == recipe; }))
            out.push_back(recipe);
    }
    return out;
}

const char* recipe_description(lock_recipe r) {
    switch (r) {
        case lock_recipe::mutex: return "zkr/Curator mutex";
        case lock_recipe::read_write: return "zkr/Curator read-write lock";
        case lock_recipe::kazoo: return "kazoo lock";
    }
    return "?";
}

}  // namespace

std::string format_session_id(std::int64_t session) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(session));
    return text;
}

std::string json_string(std::string_view text) {
    std::string out = "\"";
    for (std::size_t i = 0; i < text.size();) {
        auto c = static_cast<unsigned char>(text[i]);
        std::size_t length = utf8_sequence_at(text, i);
        if (c >= 0x80 && length > 0) {
            out.append(text.substr(i, length));
            i += length;
            continue;
        }
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20 || c >= 0x7f) {
                    char escaped[8];
                    std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
                    out += escaped;
                } else {
                    out += static_cast<char>(c);
                }
        }
        ++i;
    }
    return out + "\"";
}

std::string format_text(const queue_snapshot& s) {
    std::ostringstream out;
    if (!s.path_exists) {
        out << escaped(s.path) << ": no such node (nobody holds or waits)\n";
        return out.str();
    }
    std::size_t holders = count_holders(s);
    std::size_t waiters = s.entries.size() - holders;
    out << escaped(s.path) << ": ";
    if (s.entries.empty()) out << "free (no lock nodes)";
    else out << holders << (holders == 1 ? " holder, " : " holders, ") << waiters << (waiters == 1 ? " waiter" : " waiters");
    if (s.other_children > 0) out << " (" << s.other_children << " other children ignored)";
    out << "\n";
    if (s.entries.empty()) return out.str();

    std::vector<std::vector<std::string>> rows{{"STATE", "ROLE", "SEQUENCE", "SESSION", "AGE", "OWNER", "NODE"}};
    for (const auto& e : s.entries) {
        rows.push_back({e.holds ? "holds" : "waits", role_name(e.name.role), std::to_string(e.name.sequence),
                        format_session_id(e.stat.ephemeral_owner), format_age(age_ms(s, e)), owner_text(e), escaped(e.name.name)});
    }
    print_table(out, rows);
    if (auto recipes = recipes_present(s); recipes.size() > 1) {
        // Each recipe sees only its own nodes: these are separate locks, all "held" at once.
        out << "  note: nodes of " << recipes.size() << " lock recipes on this path (";
        for (std::size_t i = 0; i < recipes.size(); ++i) out << (i ? ", " : "") << recipe_description(recipes[i]);
        out << "): they do not exclude each other\n";
    }
    return out.str();
}

std::string format_json(const queue_snapshot& s) {
    std::size_t holders = count_holders(s);
    std::ostringstream out;
    out << "{\"path\":" << json_string(s.path) << ",\"exists\":" << (s.path_exists ? "true" : "false")
        << ",\"holders\":" << holders << ",\"waiters\":" << s.entries.size() - holders << ",\"recipes\":[";
    auto recipes = recipes_present(s);
    for (std::size_t i = 0; i < recipes.size(); ++i) out << (i ? "," : "") << "\"" << to_string(recipes[i]) << "\"";
    out << "],\"nodes\":[";
    for (std::size_t i = 0; i < s.entries.size(); ++i) {
        const auto& e = s.entries[i];
        out << (i ? "," : "") << "{\"node\":" << json_string(e.name.name)
            << ",\"sequence\":" << e.name.sequence
            << ",\"role\":\"" << role_name(e.name.role) << "\""
            << ",\"recipe\":\"" << to_string(e.name.recipe) << "\""
            << ",\"holds\":" << (e.holds ? "true" : "false")
            << ",\"session\":\"" << format_session_id(e.stat.ephemeral_owner) << "\""
            << ",\"czxid\":" << e.stat.czxid
            << ",\"ctime_ms\":" << e.stat.ctime
            << ",\"age_ms\":" << age_ms(s, e);
        print_owner_json(out, e);
        out << "}";
    }
    out << "]}";
    return out.str();
}

std::string format_text(const semaphore_snapshot& s) {
    std::ostringstream out;
    std::size_t held = count_held(s);
    out << escaped(s.path) << ": semaphore, ";
    if (s.max_leases) out << held << " of " << *s.max_leases << " leases held";
    else out << held << (held == 1 ? " lease held" : " leases held");
    out << ", " << s.waiting << " waiting";
    if (s.other_children > 0) out << " (" << s.other_children << " other children ignored)";
    out << "\n";
    if (!s.leases.empty()) {
        std::vector<std::vector<std::string>> rows{{"STATE", "SEQUENCE", "SESSION", "AGE", "OWNER", "NODE"}};
        for (const auto& e : s.leases) {
            rows.push_back({e.holds ? "holds" : "waits", std::to_string(e.sequence),
                            format_session_id(e.node.stat.ephemeral_owner),
                            format_age(age_ms(s.taken_at_ms, e.node.stat)), owner_text(e.node), escaped(e.name)});
        }
        print_table(out, rows);
    }
    if (s.max_leases && held > static_cast<std::size_t>(*s.max_leases)) {
        // The maximum is each participant's own: one that uses a larger one lets more in.
        out << "  note: more leases than --max " << *s.max_leases << ": not every participant uses that maximum\n";
    }
    return out.str();
}

std::string format_json(const semaphore_snapshot& s) {
    std::size_t held = count_held(s);
    std::ostringstream out;
    out << "{\"path\":" << json_string(s.path) << ",\"exists\":true,\"semaphore\":true,\"leases\":" << held
        << ",\"max\":" << (s.max_leases ? std::to_string(*s.max_leases) : "null") << ",\"waiting\":" << s.waiting
        << ",\"nodes\":[";
    for (std::size_t i = 0; i < s.leases.size(); ++i) {
        const auto& e = s.leases[i];
        out << (i ? "," : "") << "{\"node\":" << json_string(e.name) << ",\"sequence\":" << e.sequence
            << ",\"holds\":" << (e.holds ? "true" : "false")
            << ",\"session\":\"" << format_session_id(e.node.stat.ephemeral_owner) << "\""
            << ",\"czxid\":" << e.node.stat.czxid << ",\"ctime_ms\":" << e.node.stat.ctime
            << ",\"age_ms\":" << age_ms(s.taken_at_ms, e.node.stat);
        print_owner_json(out, e.node);
        out << "}";
    }
    out << "]}";
    return out.str();
}

}  // namespace zklock
