#include "run_hold.hpp"

#include <memory>

namespace zklock {

std::string run_hold::node_path() const {
    if (is_lease_) return lease_.node_path();
    return thread_side_ ? thread_side_->node_path() : hold_.node_path();
}

std::int64_t run_hold::fencing_token() const {
    if (is_lease_) return lease_.fencing_token();
    return thread_side_ ? thread_side_->fencing_token() : hold_.fencing_token();
}

zkr::lock_state run_hold::state() const {
    if (is_lease_) return lease_.state();
    return thread_side_ ? thread_side_->state() : hold_.state();
}

void run_hold::release(zkr::client& client, event_loop& loop, steady_time deadline) {
    if (is_lease_ || thread_side_) {
        std::string node = node_path();
        if (is_lease_) lease_.release();
        else thread_side_->unlock();
        thread_side_ = nullptr;
        // The delete just sent is ordered before anything this client sends next: once this
        // read is answered, the node is gone.
        auto read = std::make_shared<outcome<zkr::exists_result>>();
        client.async_exists(node, loop.completion(read));
        loop.run_until([&] { return read->done; }, deadline);
        return;
    }
    auto released = std::make_shared<outcome<no_value>>();
    hold_.async_unlock(loop.completion(released));
    loop.run_until([&] { return released->done; }, deadline);
}

}  // namespace zklock
