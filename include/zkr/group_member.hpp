/// \file
/// zkr::group_member — membership of a group: this process's ephemeral node under the group's
/// path, kept there through session loss, and every member's id and payload. Curator's GroupMember
/// layout ("<group>/<id>", ephemeral, the payload as data): zkr and Curator members see each other.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/tree_cache.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace zkr {

/// Joins the group at `group_path` as `id` with `payload`: an ephemeral zkr::persistent_node at
/// "<group_path>/<id>" (made again after a session loss or a deletion), and a zkr::tree_cache of
/// the group's direct children for members(). Thread-safe.
class ZKR_EXPORT group_member {
public:
    /// Checks the input (std::invalid_argument naming it: a bad group path; an id that is empty,
    /// "." or "..", or holds '/' or a character ZooKeeper refuses in a node name; a payload too
    /// large); joins nothing until start(). zkr::system_error(errc::client_closed) for a closed
    /// client.
    group_member(client& c, std::string group_path, std::string id, std::string payload = {});
    /// close().
    ~group_member();
    group_member(const group_member&) = delete;
    group_member& operator=(const group_member&) = delete;

    /// Joins: makes this member's node and starts reading the group.
    void start();
    /// Blocks until this member's node was made and the group read once (true), or `timeout`
    /// passes (false). milliseconds::max() waits for ever.
    bool wait_joined(std::chrono::milliseconds timeout);
    /// Every member as last read, id -> payload; this member always among them, with its own
    /// payload.
    std::map<std::string, std::string> members() const;
    /// Sets this member's payload (written to its node now if it exists; see
    /// persistent_node::set_data).
    void set_payload(std::string payload);
    /// Calls `fn(event)` for every change of the group's cache (members joining, leaving,
    /// changing payload; `initialized`), on the client's executor. Events of the group's own
    /// node have path() as their path.
    [[nodiscard]] subscription on_change(std::function<void(const cache_event&)> fn);
    /// Leaves: the node is deleted, the cache closed. Idempotent.
    void close();

    /// This member's id.
    const std::string& id() const noexcept { return id_; }
    /// The group's path.
    const std::string& path() const noexcept { return path_; }

private:
    std::string path_, id_;
    persistent_node node_;
    tree_cache cache_;
};

}  // namespace zkr
