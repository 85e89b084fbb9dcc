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

std::optional<clock::time_point> first_read_by(const std::optional<clock::time_point>& deadline,
                                               std::chrono::milliseconds timeout, const session_port& port) {
    if (timeout > std::chrono::milliseconds::zero()) return deadline;
    return clock::now() + port.session_timeout();
}

std::chrono::milliseconds left(const std::optional<clock::time_point>& deadline) {
    if (!deadline) return std::chrono::milliseconds::max();
    auto now = clock::now();
    if (now >= *deadline) return std::chrono::milliseconds::zero();
    return std::chrono::ceil<std::chrono::milliseconds>(*deadline - now);
}

namespace {
template <class... Values, class Start>
std::tuple<Values...> call(Start&& start, error_code& ec) {
    sync_slot<Values...> slot;
    start(completion<Values...>(&slot));
    return slot.wait(ec);
}

// A read with a watch whose caller may stop waiting: the answer is taken over by whoever comes
// second, the caller (who reads it) or the completion (which removes the watch nobody will use).
template <class Result>
struct watched_call {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false, abandoned = false;
    error_code ec;
    Result result;
};

template <class Result, class Send>
std::optional<Result> timed_read(session_port& port, const std::optional<clock::time_point>& deadline, error_code& ec,
                                 Send&& send) {
    auto call = std::make_shared<watched_call<Result>>();
    std::weak_ptr<session_port> weak = port.weak_port();
    send(completion<Result>(typename completion<Result>::inline_fn([call, weak](error_code e, Result r) {
        std::unique_lock lock(call->mutex);
        if (call->abandoned) {
            lock.unlock();
            if (auto p = weak.lock(); p && r.watch.valid()) drop_watch(*p, r.watch);
            return;
        }
        call->ec = e;
        call->result = std::move(r);
        call->done = true;
        call->done_cv.notify_all();
    })));
    std::unique_lock lock(call->mutex);
    auto ready = [&] { return call->done; };
    if (deadline) call->done_cv.wait_until(lock, *deadline, ready);
    else call->done_cv.wait(lock, ready);
    if (!call->done) {
        call->abandoned = true;
        return std::nullopt;
    }
    ec = call->ec;
    return std::move(call->result);
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

std::optional<exists_result> exists_watched(session_port& port, const std::string& path,
                                            const std::optional<clock::time_point>& deadline, error_code& ec) {
    return timed_read<exists_result>(port, deadline, ec, [&](auto done) { port.exists(path, true, std::move(done)); });
}

std::optional<children_result> children_watched(session_port& port, const std::string& path,
                                                 const std::optional<clock::time_point>& deadline, error_code& ec) {
    return timed_read<children_result>(port, deadline, ec, [&](auto done) { port.get_children(path, true, std::move(done)); });
}

void drop_watch(session_port& port, const zkr::watch& w) {
    if (auto ws = watch_access::state(w)) port.remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
}

watch_end wait(session_port& port, zkr::watch& w, const std::optional<clock::time_point>& deadline, event_type* event) {
    try {
        if (auto fired = w.wait_for(left(deadline))) {
            if (event) *event = fired->type;
            return watch_end::fired;
        }
    } catch (const zkr::system_error& e) {
        if (e.code() == errc::client_closed) throw;
        return watch_end::session;  // expired with its session (or removed): look again
    }
    drop_watch(port, w);
    return watch_end::timed_out;
}

std::string member_uuid() { return random_uuid(); }

bool in_doubt(error_code ec) {
    return ec == errc::connection_loss || ec == errc::operation_timeout || ec == errc::session_expired ||
           ec == errc::session_moved || ec == errc::closing;
}

}  // namespace zkr::detail::blocking
