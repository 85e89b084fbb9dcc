// zkr::group_member: a persistent_node (ephemeral, "<group>/<id>") and a tree_cache of depth 1
// on the group, as Curator's GroupMember builds it from PersistentNode and CuratorCache.
#include "zkr/group_member.hpp"

#include "toolkit/recipe_path.hpp"
#include "zkr/path.hpp"

#include <stdexcept>

namespace zkr {

namespace {
std::string member_path(const std::string& group, const std::string& id) {
    validate_path(group);  // std::invalid_argument naming the rule, before join_path
    return join_path(group, detail::checked_node_name(id, "zkr::group_member", "member id"));
}
}  // namespace

group_member::group_member(client& c, std::string group_path, std::string id, std::string payload)
    : path_(group_path),
      id_(id),
      node_(c, member_path(group_path, id), create_mode::ephemeral, std::move(payload)),
      cache_(c, group_path, cache_options{.max_depth = 1}) {}

group_member::~group_member() { close(); }

void group_member::start() {
    node_.start();
    cache_.start();
}

bool group_member::wait_joined(std::chrono::milliseconds timeout) {
    auto start = std::chrono::steady_clock::now();
    if (!node_.wait_for_initial_create(timeout)) return false;
    // What is left of `timeout` (milliseconds::max() stays so: no deadline is computed to overflow).
    auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    return cache_.wait_initialized(spent >= timeout ? std::chrono::milliseconds(0) : timeout - spent);
}

std::map<std::string, std::string> group_member::members() const {
    std::map<std::string, std::string> out;
    for (const auto& name : cache_.children(path_)) {
        if (auto n = cache_.get(join_path(path_, name))) out.emplace(name, std::move(n->data));
    }
    out[id_] = node_.data();
    return out;
}

void group_member::set_payload(std::string payload) { node_.set_data(std::move(payload)); }

subscription group_member::on_change(std::function<void(const cache_event&)> fn) { return cache_.on_event(std::move(fn)); }

void group_member::close() {
    node_.close();
    cache_.close();
}

}  // namespace zkr
