#include "semaphore_status.hpp"

#include "session.hpp"

#include <zkr/path.hpp>

#include <algorithm>
#include <charconv>
#include <memory>

namespace zklock {
namespace {

// The sequence of a lease node: the number after its last "lease-" (as zkr and Curator order them).
std::optional<std::int64_t> lease_sequence(const std::string& name) {
    auto at = name.rfind("lease-");
    if (at == std::string::npos) return std::nullopt;
    std::int64_t sequence = 0;
    const char* first = name.data() + at + 6;
    const char* last = name.data() + name.size();
    auto [end, ec] = std::from_chars(first, last, sequence);
    if (first == last || ec != std::errc() || end != last) return std::nullopt;
    return sequence;
}

// The children of `path`; none when it is missing (a container the server reaped).
std::vector<std::string> children_of(zkr::client& client, event_loop& loop, const std::string& path, steady_time deadline) {
    auto listed = std::make_shared<outcome<zkr::children_result>>();
    client.async_get_children(path, loop.completion(listed));
    auto& listing = await(loop, listed, deadline, "listing " + path);
    if (listing.error == zkr::errc::no_node) return {};
    if (listing.error) fail_with(listing.error, "listing " + path);
    return listing.value.children;
}

std::int64_t wall_clock_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

bool is_semaphore_path(zkr::client& client, event_loop& loop, const std::string& path, steady_time deadline) {
    std::string leases = zkr::join_path(path, "leases");
    auto found = std::make_shared<outcome<zkr::exists_result>>();
    client.async_exists(leases, loop.completion(found));
    auto& result = await(loop, found, deadline, "looking for " + leases);
    if (result.error) fail_with(result.error, "looking for " + leases);
    return result.value.exists;
}

semaphore_snapshot read_semaphore(zkr::client& client, event_loop& loop, const std::string& path,
                                  std::optional<int> max_leases, steady_time deadline) {
    semaphore_snapshot snapshot;
    snapshot.path = path;
    snapshot.max_leases = max_leases;
    std::string leases = zkr::join_path(path, "leases");
    for (const auto& child : children_of(client, loop, leases, deadline)) {
        auto sequence = lease_sequence(child);
        if (!sequence) {
            ++snapshot.other_children;
            continue;
        }
        snapshot.leases.push_back({child, *sequence, false, {}});  // holds: decided below
    }
    std::sort(snapshot.leases.begin(), snapshot.leases.end(), [](const lease_entry& a, const lease_entry& b) {
        return a.sequence != b.sequence ? a.sequence < b.sequence : a.name < b.name;
    });
    // Whoever queues on the mutex is acquiring: the first one, once the semaphore is full,
    // waits there for a lease to come back (as Curator's does).
    std::string mutex = zkr::join_path(path, "locks");
    std::optional<lock_node_name> mutex_head;
    for (const auto& child : children_of(client, loop, mutex, deadline)) {
        auto node = parse_lock_node_name(child);
        if (!node) continue;
        ++snapshot.waiting;
        if (!mutex_head || node->sequence < mutex_head->sequence) mutex_head = std::move(node);
    }

    std::vector<std::string> node_paths;
    for (const auto& lease : snapshot.leases) node_paths.push_back(zkr::join_path(leases, lease.name));
    if (mutex_head) node_paths.push_back(zkr::join_path(mutex, mutex_head->name));
    auto readings = read_nodes(client, loop, node_paths, deadline);
    std::optional<node_reading> head;
    if (mutex_head) {
        head = std::move(readings.back());
        readings.pop_back();
    }
    std::vector<lease_entry> present;
    for (std::size_t i = 0; i < snapshot.leases.size(); ++i) {
        if (!readings[i]) continue;  // returned meanwhile
        auto& lease = snapshot.leases[i];
        lease.node = std::move(*readings[i]);
        // Made by the mutex holder's session since it took the mutex: not granted yet (once
        // granted, the mutex goes).
        lease.holds = !(head && lease.node.stat.ephemeral_owner == head->stat.ephemeral_owner &&
                        lease.node.stat.czxid > head->stat.czxid);
        present.push_back(std::move(lease));
    }
    snapshot.leases = std::move(present);
    snapshot.taken_at_ms = wall_clock_ms();
    return snapshot;
}

}  // namespace zklock
