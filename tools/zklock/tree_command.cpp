// zklock tree: a subtree as a zkr::tree_cache reads it, one line per node; with --watch, then
// every change the cache sees. The cache's listeners run on zklock's event loop, so every line
// is printed from the main thread, in the order the cache saw the changes.
#include "commands.hpp"
#include "event_loop.hpp"
#include "session.hpp"
#include "signals.hpp"
#include "status_format.hpp"

#include <zkr/tree_cache.hpp>

#include <deque>
#include <iostream>

namespace zklock {
namespace {

constexpr std::size_t data_shown = 64;  // bytes of a node's data on a text line

std::string shown_data(const std::string& data) {
    if (data.size() <= data_shown) return "\"" + terminal_safe(data) + "\"";
    return "\"" + terminal_safe(data.substr(0, data_shown)) + "\"...";
}

std::string hex(std::int64_t v) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
    return text;
}

std::string node_line(const std::string& path, const zkr::cached_node& n, bool json) {
    if (json) {
        return "{\"path\": " + json_string(path) + ", \"data\": " + json_string(n.data) +
               ", \"bytes\": " + std::to_string(n.data.size()) + ", \"mzxid\": " + std::to_string(n.stat.mzxid) +
               ", \"ephemeral_owner\": " + (n.stat.ephemeral_owner ? "\"" + format_session_id(n.stat.ephemeral_owner) + "\"" : "null") +
               "}";
    }
    std::string line = terminal_safe(path) + " " + shown_data(n.data) + " " + std::to_string(n.data.size()) +
                       " bytes, mzxid " + hex(n.stat.mzxid);
    if (n.stat.ephemeral_owner) line += ", session " + format_session_id(n.stat.ephemeral_owner);
    return line;
}

std::string event_line(const zkr::cache_event& e, bool json) {
    const char* type = zkr::to_string(e.type);
    if (json) {
        std::string line = std::string("{\"event\": \"") + type + "\"";
        if (e.type != zkr::cache_event_type::initialized) line += ", \"path\": " + json_string(e.path);
        if (e.type == zkr::cache_event_type::created || e.type == zkr::cache_event_type::changed)
            line += ", \"data\": " + json_string(e.data) + ", \"mzxid\": " + std::to_string(e.stat.mzxid);
        return line + "}";
    }
    std::string line = type;
    if (e.type != zkr::cache_event_type::initialized) line += " " + terminal_safe(e.path);
    if (e.type == zkr::cache_event_type::created || e.type == zkr::cache_event_type::changed) line += " " + shown_data(e.data);
    return line;
}

// Depth first, children in name order.
void print_subtree(const zkr::tree_cache& cache, const std::string& path, bool json) {
    auto node = cache.get(path);
    if (!node) return;
    std::cout << node_line(path, *node, json) << "\n";
    for (const auto& name : cache.children(path)) print_subtree(cache, path == "/" ? "/" + name : path + "/" + name, json);
}

}  // namespace

int tree_command(const tree_options& o) {
    configure_logging(o.connection);
    event_loop loop;
    auto client = connect(loop, o.connection, o.timeout, o.timeout);
    zkr::tree_cache_options options;
    options.max_depth = o.depth;
    options.executor = loop.context().get_executor();  // listeners on this thread
    zkr::tree_cache cache(*client, o.path, options);
    std::deque<zkr::cache_event> events;
    auto subscription = cache.on_change([&events](const zkr::cache_event& e) { events.push_back(e); });
    cache.start();

    const std::string doing = "reading the subtree at " + o.path;
    auto initialized = [&] {
        for (const auto& e : events)
            if (e.type == zkr::cache_event_type::initialized) return true;
        return false;
    };
    switch (loop.run_until(initialized, std::chrono::steady_clock::now() + o.timeout)) {
        case event_loop::wake::done: break;
        case event_loop::wake::signal: fail_interrupted(loop, doing);
        case event_loop::wake::deadline: throw failure(exit_code::unavailable, doing + ": not read whole in time");
    }
    // What came before the first `initialized` is the subtree itself: printed from the cache.
    while (events.front().type != zkr::cache_event_type::initialized) events.pop_front();
    events.pop_front();
    print_subtree(cache, o.path, o.json);
    std::cout << std::flush;
    if (!o.watch) return to_int(exit_code::success);

    int changes = 0;
    for (;;) {
        while (!events.empty()) {
            std::cout << event_line(events.front(), o.json) << "\n" << std::flush;
            events.pop_front();
            if (o.count && ++changes == *o.count) return to_int(exit_code::success);
        }
        // However long: this is what --watch is for.
        if (loop.run_until([&] { return !events.empty(); }) == event_loop::wake::signal) {
            int number = loop.take_signal()->number;
            if (is_interruption(number)) return to_int(exit_code::success);
            throw failure(signal_exit_status(number), "watching " + o.path + ": interrupted by " + signal_name(number));
        }
    }
}

}  // namespace zklock
