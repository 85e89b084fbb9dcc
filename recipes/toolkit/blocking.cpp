#include "blocking.hpp"

#include "sequence_queue.hpp"

#include <condition_variable>
#include <mutex>

namespace zkr::detail::blocking {

std::optional<clock::time_point> deadline_after(std::chrono::milliseconds timeout) {
    if (timeout == std::chrono::milliseconds::max()) return std::nullopt;
    if (timeout < std::chrono::milliseconds::zero()) timeout = std::chrono::milliseconds::zero();
    // Far enough for any caller, short of the clock's overflow.
    constexpr auto longest = std::chrono::hours(24 * 365 * 100);
    return clock::now() + std::min<std::chrono::milliseconds>(timeout, longest);
}

namespace {
template <class... Values, class Start>
std::tuple<Values...> call(Start&& start, error_code& ec) {
    sync_slot<Values...> slot;
    start(completion<Values...>(&slot));
    return slot.wait(ec);
}

}  // namespace

data_result get_data(session_port& port, const std::string& path, error_code& ec) {
    auto [r] = call<data_result>([&](auto done) { port.get_data(path, false, std::move(done)); }, ec);
    return r;
}

exists_result exists(session_port& port, const std::string& path, bool watch, error_code& ec) {
    auto [r] = call<exists_result>([&](auto done) { port.exists(path, watch, std::move(done)); }, ec);
    return r;
}

children_result get_children(session_port& port, const std::string& path, bool watch, error_code& ec) {
    auto [r] = call<children_result>([&](auto done) { port.get_children(path, watch, std::move(done)); }, ec);
    return r;
}

create_result create(session_port& port, const std::string& path, std::string data, create_mode mode, error_code& ec) {
    auto [r] = call<create_result>([&](auto done) { port.create(path, std::move(data), mode, std::move(done)); }, ec);
    return r;
}

void remove(session_port& port, const std::string& path, std::int32_t version, error_code& ec) {
    call<>([&](auto done) { port.remove(path, version, std::move(done)); }, ec);
}

std::vector<multi_op_result> multi(session_port& port, std::vector<multi_op> ops, error_code& ec) {
    auto [r] = call<std::vector<multi_op_result>>([&](auto done) { port.multi(std::move(ops), std::move(done)); }, ec);
    return r;
}

void create_containers(session_port& port, const std::string& path, error_code& ec) {
    call<>([&](auto done) { port.create_parents(path, create_mode::container, std::move(done)); }, ec);
}

std::string member_uuid() { return random_uuid(); }

}  // namespace zkr::detail::blocking
