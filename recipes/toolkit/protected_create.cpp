#include "protected_create.hpp"

#include "sequence_queue.hpp"
#include "zkr/path.hpp"

#include <algorithm>

namespace zkr::detail {

protected_create::protected_create(std::string parent, std::string name, int max_attempts,
                                   std::function<std::string()> make_uuid)
    : parent_(std::move(parent)), name_(std::move(name)), max_attempts_(max_attempts), make_uuid_(std::move(make_uuid)) {}

std::string protected_create::full(std::string_view child) const { return join_path(parent_, child); }

bool protected_create::next_attempt() {
    if (attempts_ >= max_attempts_) return false;
    ++attempts_;
    // A fresh name per attempt: whatever an earlier attempt left behind can be told apart.
    if (!prefix_.empty()) stale_prefixes_.push_back(prefix_);
    prefix_ = protection_prefix(make_uuid_());
    forget_node();
    return true;
}

std::string protected_create::creation_path() const { return full(prefix_ + name_); }

void protected_create::created(const create_result& r) {
    path_ = r.path;
    czxid_ = r.stat.czxid;
    session_ = r.stat.ephemeral_owner;
    adopted_ = false;
    ++nodes_created_;
}

void protected_create::in_doubt(std::int64_t session) { unsettled_.push_back({prefix_, session}); }

std::optional<std::string> protected_create::settle(const std::vector<std::string>& children) {
    settled();
    std::optional<std::string> candidate;
    for (const auto& child : children) {
        if (has_prefix(child, prefix_)) candidate = child;
    }
    return candidate;
}

std::vector<std::string> protected_create::settle_all(const std::vector<std::string>& children) {
    settled();
    std::vector<std::string> found;
    for (const auto& child : children) {
        if (has_prefix(child, prefix_)) found.push_back(child);
    }
    return found;
}

void protected_create::settled() {
    std::erase_if(unsettled_, [&](const unsettled_create& u) { return u.prefix == prefix_; });
}

bool protected_create::adopt_if_ours(const std::string& candidate, const exists_result& r, std::int64_t session) {
    if (!r.exists || session == 0 || r.stat.ephemeral_owner != session) return false;
    path_ = full(candidate);
    czxid_ = r.stat.czxid;
    session_ = session;
    adopted_ = true;
    return true;
}

std::vector<std::string> protected_create::stale_children(const std::vector<std::string>& children) {
    std::vector<std::string> stale;
    if (stale_prefixes_.empty()) return stale;  // the first attempt: no need to read a long listing
    for (const auto& child : children) {
        if (std::any_of(stale_prefixes_.begin(), stale_prefixes_.end(), [&](const std::string& p) { return has_prefix(child, p); })) {
            stale.push_back(full(child));
            ++stale_deleted_;
        }
    }
    return stale;
}

std::vector<unsettled_create> protected_create::take_unsettled() { return std::exchange(unsettled_, {}); }

void protected_create::forget_node() {
    path_.clear();
    czxid_ = session_ = 0;
    adopted_ = false;
}

}  // namespace zkr::detail
