#include "queue_status.hpp"

#include "node_reading.hpp"
#include "session.hpp"

#include <zkr/path.hpp>

#include <algorithm>

namespace zklock {
namespace {

std::int64_t wall_clock_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The lock nodes among `children`, in queue order (by sequence, then name: as zkr and Curator).
std::vector<lock_node_name> lock_nodes_in_order(const std::vector<std::string>& children) {
    std::vector<lock_node_name> nodes;
    for (const auto& child : children) {
        if (auto parsed = parse_lock_node_name(child)) nodes.push_back(std::move(*parsed));
    }
    std::sort(nodes.begin(), nodes.end(), [](const lock_node_name& a, const lock_node_name& b) {
        return a.sequence != b.sequence ? a.sequence < b.sequence : a.name < b.name;
    });
    return nodes;
}

// Reads every node at once (one round trip for the lot); nodes gone meanwhile are left out.
std::vector<queue_entry> read_entries(zkr::client& client, event_loop& loop, const std::string& path,
                                      std::vector<lock_node_name> nodes, steady_time deadline) {
    std::vector<std::string> node_paths;
    for (const auto& node : nodes) node_paths.push_back(zkr::join_path(path, node.name));
    auto readings = read_nodes(client, loop, node_paths, deadline);
    std::vector<queue_entry> entries;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (!readings[i]) continue;
        queue_entry entry;
        entry.name = std::move(nodes[i]);
        entry.data = std::move(readings[i]->data);
        entry.owner = std::move(readings[i]->owner);
        entry.stat = readings[i]->stat;
        entry.data_error = readings[i]->data_error;
        entries.push_back(std::move(entry));
    }
    return entries;
}

}  // namespace

queue_snapshot read_queue(zkr::client& client, event_loop& loop, const std::string& path, steady_time deadline,
                          zkr::watch* children_changed) {
    queue_snapshot snapshot;
    snapshot.path = path;
    for (;;) {
        auto listed = std::make_shared<outcome<zkr::children_result>>();
        if (children_changed) client.async_get_children(path, zkr::set_watch, loop.completion(listed));
        else client.async_get_children(path, loop.completion(listed));
        auto& listing = await(loop, listed, deadline, "listing " + path);
        if (listing.error == zkr::errc::no_node) {
            if (children_changed) {
                // Nothing to list yet: watch for the path's creation instead.
                auto exists = std::make_shared<outcome<zkr::exists_result>>();
                client.async_exists(path, zkr::set_watch, loop.completion(exists));
                auto& found = await(loop, exists, deadline, "watching for " + path);
                if (found.error) fail_with(found.error, "watching for " + path);
                *children_changed = found.value.watch;
                if (found.value.exists) continue;  // created meanwhile: list it
            }
            snapshot.taken_at_ms = wall_clock_ms();
            return snapshot;
        }
        if (listing.error) fail_with(listing.error, "listing " + path);
        if (children_changed) *children_changed = listing.value.watch;
        snapshot.path_exists = true;

        auto nodes = lock_nodes_in_order(listing.value.children);
        snapshot.other_children = listing.value.children.size() - nodes.size();
        auto entries = read_entries(client, loop, path, std::move(nodes), deadline);
        snapshot.taken_at_ms = wall_clock_ms();

        std::vector<queue_position> positions;
        for (const auto& e : entries) positions.push_back({e.name.recipe, e.name.role, e.owner});
        auto holds = holders(positions);
        for (std::size_t i = 0; i < entries.size(); ++i) entries[i].holds = holds[i];
        std::stable_partition(entries.begin(), entries.end(), [](const queue_entry& e) { return e.holds; });
        snapshot.entries = std::move(entries);
        return snapshot;
    }
}

}  // namespace zklock
