#include "live_objects.hpp"

namespace zkr::detail {

live_objects& live() noexcept {
    static live_objects counts;
    return counts;
}

live_counts live_now() noexcept {
    auto& l = live();
    live_counts c;
    c.requests = l.requests.load();
    c.watches = l.watches.load();
    c.completions = l.completions.load();
    c.holds = l.holds.load();
    c.operations = l.operations.load();
    c.clients = l.clients.load();
    c.dropped_completions = l.dropped_completions.load();
    return c;
}

std::string live_counts::describe() const {
    return "requests " + std::to_string(requests) + ", watches " + std::to_string(watches) + ", completions owed " +
           std::to_string(completions) + " (dropped " + std::to_string(dropped_completions) + "), holds " +
           std::to_string(holds) + ", recipe operations " + std::to_string(operations) + ", clients " +
           std::to_string(clients);
}

}  // namespace zkr::detail
