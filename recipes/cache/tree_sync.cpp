#include "tree_sync.hpp"

#include "zkr/path.hpp"

#include <algorithm>

namespace zkr::detail {

tree_sync::tree_sync(std::string root, int max_depth, std::size_t window)
    : root_(std::move(root)), max_depth_(max_depth), window_(std::max<std::size_t>(window, 1)) {}

std::string tree_sync::child_path(const std::string& parent, const std::string& name) const {
    return join_path(parent, name);
}

void tree_sync::new_session() {
    ++epoch_;
    initialized_ = false;
    queue_.clear();
    failed_.clear();
    in_flight_current_ = 0;
    unreadable_ = 0;
    exists_pending_ = false;
    for (auto& [path, e] : nodes_) e.data_pending = e.children_pending = false;
    if (auto it = nodes_.find(root_); it != nodes_.end()) refresh(root_, it->second);
    else queue_exists();
}

void tree_sync::session_lost() { initialized_ = false; }

void tree_sync::retry_failed() {
    for (auto& r : failed_) queue_.push_back(std::move(r));
    failed_.clear();
}

tree_sync::entry* tree_sync::live(const cache_read& r) {
    if (r.epoch != epoch_) return nullptr;
    auto it = nodes_.find(r.path);
    if (it == nodes_.end() || it->second.id != r.node) return nullptr;
    return &it->second;
}

void tree_sync::answered(const cache_read& r) {
    if (in_flight_ > 0) --in_flight_;
    if (r.epoch == epoch_ && in_flight_current_ > 0) --in_flight_current_;
}

void tree_sync::refresh(const std::string& path, entry& e) {
    e.walked = epoch_;
    queue_data(path, e);
    if (lists(e)) queue_children(path, e);
}

void tree_sync::queue_data(const std::string& path, entry& e) {
    if (e.data_pending) return;
    e.data_pending = true;
    queue_.push_back({cache_read::kind::data, path, e.id, epoch_});
}

void tree_sync::queue_children(const std::string& path, entry& e) {
    if (e.children_pending || !lists(e)) return;
    e.children_pending = true;
    queue_.push_back({cache_read::kind::children, path, e.id, epoch_});
}

void tree_sync::queue_exists() {
    if (exists_pending_) return;
    exists_pending_ = true;
    queue_.push_back({cache_read::kind::exists, root_, 0, epoch_});
}

void tree_sync::add_root() {
    entry e;
    e.id = ++next_id_;
    e.depth = 0;
    auto [it, fresh] = nodes_.emplace(root_, std::move(e));
    refresh(root_, it->second);
}

void tree_sync::remove_subtree(const std::string& path) {
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return;
    // Children first: a parent cannot go before its children on the server either.
    auto kids = it->second.children;  // each removal takes its name out of this list
    for (const auto& name : kids) remove_subtree(child_path(path, name));
    it = nodes_.find(path);
    if (it->second.loaded) {
        --loaded_;
        events_.push_back({cache_event_type::deleted, path, {}, it->second.stat});
    }
    nodes_.erase(it);
    if (path != root_) {
        if (auto parent = nodes_.find(parent_path(path)); parent != nodes_.end()) {
            auto& kids = parent->second.children;
            auto name = std::string(node_name(path));
            if (auto k = std::lower_bound(kids.begin(), kids.end(), name); k != kids.end() && *k == name) kids.erase(k);
        }
    }
}

// Connection trouble on this session: the read is sent again once the connection is back.
// Anything else (no_auth, an error of the server's) is not: the node stays as it was.
static bool transient(error_code ec) { return is_retryable(ec) || ec == errc::timed_out; }

bool tree_sync::failed(const cache_read& r, error_code ec) {
    if (!transient(ec)) {
        // Not to be retried on this session (no_auth; too_many_watches: more watches than one
        // client can set again after a reconnection): the tree cannot be held whole, so the walk
        // does not end as if it could. A new session walks again.
        if (unreadable_++ == 0) first_unreadable_ = r.path + ": " + ec.message();
        return false;
    }
    failed_.push_back(r);
    return true;
}

void tree_sync::data_read(const cache_read& r, error_code ec, std::string data, const zkr::stat& stat) {
    answered(r);
    entry* e = live(r);
    if (!e) return;
    e->data_pending = false;
    if (!ec) {
        if (!e->loaded) {
            e->loaded = true;
            ++loaded_;
            e->data = std::move(data);
            e->stat = stat;
            events_.push_back({cache_event_type::created, r.path, e->data, e->stat});
        } else if (stat.mzxid > e->stat.mzxid) {
            e->data = std::move(data);
            e->stat = stat;
            events_.push_back({cache_event_type::changed, r.path, e->data, e->stat});
        } else if (stat.mzxid == e->stat.mzxid && stat.pzxid > e->stat.pzxid) {
            e->stat = stat;  // only the children's counts moved on: no event
        }
    } else if (ec == errc::no_node) {
        remove_subtree(r.path);
        if (r.path == root_) queue_exists();
    } else if (!is_session_lost(ec)) {
        e->data_pending = failed(r, ec);
    }
    check_initialized();
}

void tree_sync::children_read(const cache_read& r, error_code ec, std::vector<std::string> names, const zkr::stat& stat) {
    answered(r);
    entry* e = live(r);
    if (!e) return;
    e->children_pending = false;
    if (!ec) {
        std::sort(names.begin(), names.end());
        std::vector<std::string> gone;
        std::set_difference(e->children.begin(), e->children.end(), names.begin(), names.end(), std::back_inserter(gone));
        int depth = e->depth;
        if (e->loaded && stat.czxid == e->stat.czxid && stat.pzxid > e->stat.pzxid) {
            e->stat.pzxid = stat.pzxid;
            e->stat.cversion = stat.cversion;
            e->stat.num_children = stat.num_children;
        }
        e->children = names;
        std::string parent = r.path;
        for (const auto& name : gone) remove_subtree(child_path(parent, name));
        for (const auto& name : names) {
            std::string path = child_path(parent, name);
            auto it = nodes_.find(path);
            if (it == nodes_.end()) {
                entry c;
                c.id = ++next_id_;
                c.depth = depth + 1;
                it = nodes_.emplace(path, std::move(c)).first;
            } else if (it->second.walked == epoch_) {
                continue;  // read on this walk already: its watches say when to read again
            }
            refresh(path, it->second);
        }
    } else if (ec != errc::no_node && !is_session_lost(ec)) {
        // no_node: the node is going; its data read or watch says so and drops it.
        e->children_pending = failed(r, ec);
    }
    check_initialized();
}

void tree_sync::exists_read(const cache_read& r, error_code ec, bool exists) {
    answered(r);
    if (r.epoch != epoch_) return;
    exists_pending_ = false;
    if (!ec) {
        if (exists && !nodes_.count(root_)) add_root();
    } else if (!is_session_lost(ec)) {
        exists_pending_ = failed(r, ec);
    }
    check_initialized();
}

void tree_sync::watch_fired(const cache_read& origin, event_type type) {
    if (origin.epoch != epoch_) return;
    if (origin.what == cache_read::kind::exists) {
        // The path's own node, watched while missing: made (or, if the read found it, changed or
        // deleted since).
        auto it = nodes_.find(root_);
        if (it == nodes_.end()) {
            if (type == event_type::created || type == event_type::not_watching) {
                if (type == event_type::created) add_root();
                else queue_exists();
            }
        } else if (type == event_type::deleted) {
            queue_data(root_, it->second);  // its no_node drops it (a deletion seen by a data watch too)
        } else {
            queue_data(root_, it->second);
        }
        check_initialized();
        return;
    }
    entry* e = live(origin);
    if (!e) return;
    if (type == event_type::deleted) {
        remove_subtree(origin.path);
        if (origin.path == root_) queue_exists();
    } else if (origin.what == cache_read::kind::children) {
        queue_children(origin.path, *e);
    } else {
        queue_data(origin.path, *e);
    }
    check_initialized();
}

std::vector<cache_read> tree_sync::next_reads() {
    std::vector<cache_read> out;
    while (in_flight_ < window_ && !queue_.empty()) {
        out.push_back(std::move(queue_.front()));
        queue_.pop_front();
        ++in_flight_;
        ++in_flight_current_;
    }
    return out;
}

std::vector<cache_event> tree_sync::take_events() { return std::exchange(events_, {}); }

void tree_sync::check_initialized() {
    if (initialized_ || epoch_ == 0) return;
    if (!queue_.empty() || in_flight_current_ > 0 || !failed_.empty() || unreadable_ > 0) return;
    initialized_ = true;
    events_.push_back({cache_event_type::initialized, {}, {}, {}});
}

std::optional<cached_node> tree_sync::get(const std::string& path) const {
    auto it = nodes_.find(path);
    if (it == nodes_.end() || !it->second.loaded) return std::nullopt;
    return cached_node{it->second.data, it->second.stat};
}

std::vector<std::string> tree_sync::children(const std::string& path) const {
    std::vector<std::string> out;
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return out;
    for (const auto& name : it->second.children) {
        auto c = nodes_.find(child_path(path, name));
        if (c != nodes_.end() && c->second.loaded) out.push_back(name);
    }
    return out;
}

std::vector<std::string> tree_sync::paths() const {
    std::vector<std::string> out;
    for (const auto& [path, e] : nodes_)
        if (e.loaded) out.push_back(path);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace zkr::detail
