#include "listing.hpp"

#include <array>
#include <mutex>
#include <optional>

namespace zkr::detail {

struct listing::shared {
    std::vector<std::string> children;
    // By family: the mutex's, the read/write lock's (both kinds queue together), the latch's.
    mutable std::array<std::once_flag, 3> sorted_once;
    mutable std::array<std::vector<contender>, 3> sorted;
};

namespace {

std::size_t family_index(queue_kind kind) noexcept {
    switch (kind) {
        case queue_kind::exclusive: return 0;
        case queue_kind::read:
        case queue_kind::write: return 1;
        case queue_kind::latch: return 2;
    }
    return 0;
}

}  // namespace

// No children, and nothing allocated: every waiting machine keeps an empty one.
listing::listing() noexcept = default;

listing::listing(std::vector<std::string> children) {
    auto s = std::make_shared<shared>();
    s->children = std::move(children);
    shared_ = std::move(s);
}

listing::listing(std::initializer_list<std::string> children) : listing(std::vector<std::string>(children)) {}

const std::vector<std::string>& listing::children() const noexcept {
    static const std::vector<std::string> none;
    return shared_ ? shared_->children : none;
}

const std::vector<contender>& listing::queue(queue_kind family) const {
    static const std::vector<contender> none;
    if (!shared_) return none;
    std::size_t i = family_index(family);
    std::call_once(shared_->sorted_once[i], [&] { shared_->sorted[i] = sorted_contenders(shared_->children, family); });
    return shared_->sorted[i];
}

}  // namespace zkr::detail
