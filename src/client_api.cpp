// zkr::client and zkr::watch: the public, blocking and non-template side.
#include "client_impl.hpp"
#include "zkr/detail/session_access.hpp"

#include "request_limits.hpp"
#include "zkr/path.hpp"

#include <boost/asio/system_executor.hpp>

#include <stdexcept>

namespace zkr {
namespace {

using detail::completion;
using detail::sync_slot;

// Runs one request and waits for its reply on the calling thread (no executor involved, so
// this works from the client's own executor too).
template <class... Values, class Start>
std::tuple<Values...> run_blocking(Start&& start, zkr::error_code& ec) {
    sync_slot<Values...> slot;
    start(completion<Values...>(&slot));
    return slot.wait(ec);
}

// `request_size`: what the request would take (request_sizer), to say so if it was refused for it.
[[noreturn]] void throw_error(zkr::error_code ec, const char* operation, const std::string& path,
                              const client_options& options, std::size_t request_size) {
    std::string what = std::string("zkr::client::") + operation + " " + quoted_path(path);
    if (ec == errc::invalid_path) {
        what += ": " + path_problem(path);
    } else if (ec == errc::bad_arguments) {
        if (std::string why = detail::request_sizer(options).problem(request_size); !why.empty()) what += ": " + why;
        else if (path == "/" && std::string_view(operation) == "remove") what += ": the root node cannot be removed";
    }
    throw zkr::system_error(ec, what);
}

}  // namespace

client::client(client_options options) : impl_(std::make_shared<detail::client_impl>(std::move(options))) {
    impl_->start();
}

client::~client() { impl_->shutdown(); }

client::executor_type client::get_executor() const { return impl_->executor(); }
const client_options& client::options() const { return impl_->options(); }
void client::close() { impl_->close(); }
connection_state client::state() const { return impl_->state(); }
bool client::is_connected() const { return impl_->is_connected(); }
std::int64_t client::session_id() const { return impl_->session_id(); }
std::chrono::milliseconds client::session_timeout() const { return impl_->session_timeout(); }
std::uint64_t client::session_count() const { return impl_->session_count(); }
bool client::flush_observer(std::chrono::milliseconds timeout) const {
    const auto& events = impl_->observer_events();
    return !events || events->flush(timeout);
}
void client::wait_connected(std::chrono::steady_clock::time_point deadline) { impl_->wait_connected(deadline, std::nullopt); }
void client::wait_connected(std::chrono::milliseconds timeout) { impl_->wait_connected(detail::deadline_after(timeout), timeout); }

subscription client::on_state_change(std::function<void(connection_state)> listener) {
    return impl_->on_state_change(std::move(listener));
}

create_result client::create(std::string path, std::string data, create_mode mode, zkr::error_code& ec) {
    auto [r] = run_blocking<create_result>(
        [&](auto done) { impl_->create(std::move(path), std::move(data), mode, std::move(done)); }, ec);
    return std::move(r);
}
create_result client::create(std::string path, std::string data, create_mode mode) {
    zkr::error_code ec;
    std::size_t request = detail::request_sizer(options()).create(path.size(), data.size());
    auto r = create(path, std::move(data), mode, ec);
    if (ec) throw_error(ec, "create", path, options(), request);
    return r;
}

create_result client::create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl,
                                 zkr::error_code& ec) {
    auto [r] = run_blocking<create_result>(
        [&](auto done) { impl_->create_ttl(std::move(path), std::move(data), mode, ttl, std::move(done)); }, ec);
    return std::move(r);
}
create_result client::create_ttl(std::string path, std::string data, create_mode mode, std::chrono::milliseconds ttl) {
    if (std::string why = detail::ttl_problem(mode, ttl); !why.empty())
        throw std::invalid_argument("zkr::client::create_ttl " + quoted_path(path) + ": " + why);
    zkr::error_code ec;
    std::size_t request = detail::request_sizer(options()).create(path.size(), data.size()) + 8;
    auto r = create_ttl(path, std::move(data), mode, ttl, ec);
    if (ec == errc::unimplemented)
        throw zkr::system_error(ec, "zkr::client::create_ttl " + quoted_path(path) +
                                        ": the server does not make TTL nodes (it needs zookeeper.extendedTypesEnabled=true: "
                                        "the system property, or extendedTypesEnabled=true in zoo.cfg)");
    if (ec) throw_error(ec, "create_ttl", path, options(), request);
    return r;
}

void client::remove(std::string path, std::int32_t version, zkr::error_code& ec) {
    run_blocking<>([&](auto done) { impl_->remove(std::move(path), version, std::move(done)); }, ec);
}
void client::remove(std::string path, std::int32_t version) {
    zkr::error_code ec;
    remove(path, version, ec);
    if (ec) throw_error(ec, "remove", path, options(), detail::request_sizer(options()).remove(path.size()));
}

namespace {
template <class Result, class Start>
Result blocking_read(Start start, const char* operation, const std::string& path, const client_options& options) {
    zkr::error_code ec;
    auto [r] = run_blocking<Result>(start, ec);
    if (ec) throw_error(ec, operation, path, options, detail::request_sizer(options).read(path.size()));
    return std::move(r);
}
}  // namespace

exists_result client::exists(std::string path) {
    return blocking_read<exists_result>([&](auto done) { impl_->exists(path, false, std::move(done)); }, "exists", path, options());
}
exists_result client::exists(std::string path, set_watch_t) {
    return blocking_read<exists_result>([&](auto done) { impl_->exists(path, true, std::move(done)); }, "exists", path, options());
}
exists_result client::exists(std::string path, zkr::error_code& ec) {
    auto [r] = run_blocking<exists_result>([&](auto done) { impl_->exists(std::move(path), false, std::move(done)); }, ec);
    return std::move(r);
}
exists_result client::exists(std::string path, set_watch_t, zkr::error_code& ec) {
    auto [r] = run_blocking<exists_result>([&](auto done) { impl_->exists(std::move(path), true, std::move(done)); }, ec);
    return std::move(r);
}

data_result client::get_data(std::string path) {
    return blocking_read<data_result>([&](auto done) { impl_->get_data(path, false, std::move(done)); }, "get_data", path, options());
}
data_result client::get_data(std::string path, set_watch_t) {
    return blocking_read<data_result>([&](auto done) { impl_->get_data(path, true, std::move(done)); }, "get_data", path, options());
}
data_result client::get_data(std::string path, zkr::error_code& ec) {
    auto [r] = run_blocking<data_result>([&](auto done) { impl_->get_data(std::move(path), false, std::move(done)); }, ec);
    return std::move(r);
}
data_result client::get_data(std::string path, set_watch_t, zkr::error_code& ec) {
    auto [r] = run_blocking<data_result>([&](auto done) { impl_->get_data(std::move(path), true, std::move(done)); }, ec);
    return std::move(r);
}

zkr::stat client::set_data(std::string path, std::string data, std::int32_t version, zkr::error_code& ec) {
    auto [r] = run_blocking<zkr::stat>(
        [&](auto done) { impl_->set_data(std::move(path), std::move(data), version, std::move(done)); }, ec);
    return r;
}
zkr::stat client::set_data(std::string path, std::string data, std::int32_t version) {
    zkr::error_code ec;
    std::size_t request = detail::request_sizer(options()).set_data(path.size(), data.size());
    auto r = set_data(path, std::move(data), version, ec);
    if (ec) throw_error(ec, "set_data", path, options(), request);
    return r;
}

children_result client::get_children(std::string path) {
    return blocking_read<children_result>([&](auto done) { impl_->get_children(path, false, std::move(done)); },
                                          "get_children", path, options());
}
children_result client::get_children(std::string path, set_watch_t) {
    return blocking_read<children_result>([&](auto done) { impl_->get_children(path, true, std::move(done)); },
                                          "get_children", path, options());
}
children_result client::get_children(std::string path, zkr::error_code& ec) {
    auto [r] = run_blocking<children_result>(
        [&](auto done) { impl_->get_children(std::move(path), false, std::move(done)); }, ec);
    return std::move(r);
}
children_result client::get_children(std::string path, set_watch_t, zkr::error_code& ec) {
    auto [r] = run_blocking<children_result>(
        [&](auto done) { impl_->get_children(std::move(path), true, std::move(done)); }, ec);
    return std::move(r);
}

std::vector<multi_op_result> client::multi(std::vector<multi_op> ops, zkr::error_code& ec) {
    auto [r] = run_blocking<std::vector<multi_op_result>>(
        [&](auto done) { impl_->multi(std::move(ops), std::move(done)); }, ec);
    return std::move(r);
}
std::vector<multi_op_result> client::multi(std::vector<multi_op> ops) {
    zkr::error_code ec;
    std::size_t count = ops.size(), request = detail::request_sizer(options()).multi(ops);
    // The first op refused for its path, if any, and the guards: the message names them.
    std::string refused;
    std::vector<std::pair<std::size_t, op::guard>> guards;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        std::visit(
            [&](const auto& x) {
                using T = std::decay_t<decltype(x)>;
                bool sequential = false;
                if constexpr (std::is_same_v<T, op::create>) sequential = is_sequential(x.mode);
                if constexpr (std::is_same_v<T, op::guard>) guards.emplace_back(i, x);
                if (std::string problem = path_problem(x.path, sequential); !problem.empty() && refused.empty())
                    refused = "op " + std::to_string(i) + ", " + quoted_path(x.path) + ": " + problem;
            },
            ops[i]);
    }
    auto r = multi(std::move(ops), ec);
    if (!ec) return r;
    for (auto& [i, g] : guards) {
        if (i < r.size() && r[i].error == errc::lock_lost) {
            throw zkr::system_error(ec, "zkr::client::multi: nothing was written: the " +
                                            (g.what.empty() ? std::string("hold") : g.what) + " is lost (its node " +
                                            quoted_path(g.path) + " is gone)");
        }
    }
    std::string what = "zkr::client::multi of " + std::to_string(count) + " ops";
    if (ec == errc::invalid_path && !refused.empty()) what += ": " + refused;
    else if (std::string why = detail::request_sizer(options()).problem(request); ec == errc::bad_arguments && !why.empty())
        what += ": " + why;
    throw zkr::system_error(ec, what);
}

void client::create_parents(const std::string& path, create_mode parents_mode, zkr::error_code& ec) {
    run_blocking<>([&](auto done) { impl_->create_parents(path, parents_mode, std::move(done)); }, ec);
}
void client::create_parents(const std::string& path, create_mode parents_mode) {
    zkr::error_code ec;
    create_parents(path, parents_mode, ec);
    if (ec) throw_error(ec, "create_parents", path, options(), detail::request_sizer(options()).create(path.size(), 0));
}

// ---------------------------------------------------------------- watch

bool watch::done() const {
    if (!state_) return true;
    std::lock_guard lock(state_->mutex);
    return state_->done;
}

const std::string& watch::path() const {
    static const std::string none;
    return state_ ? state_->path : none;
}

namespace {
// Registers a blocked caller, or returns the outcome if it is already known.
std::optional<std::pair<zkr::error_code, watch_event>> attach(detail::watch_state& s, sync_slot<watch_event>& slot) {
    std::lock_guard lock(s.mutex);
    if (s.done) return std::make_pair(s.error, s.event_locked());
    if (s.user_waits_locked()) return std::make_pair(make_error_code(errc::bad_arguments), watch_event{});
    if (!s.user) s.user = std::make_unique<detail::watch_user_wait>();
    s.user->sync_waiter = &slot;
    return std::nullopt;
}
}  // namespace

watch_event watch::wait() {
    if (!state_) throw zkr::system_error(make_error_code(errc::bad_arguments), "zkr::watch::wait on an empty watch");
    sync_slot<watch_event> slot;
    zkr::error_code ec;
    watch_event ev;
    if (auto known = attach(*state_, slot)) {
        std::tie(ec, ev) = *known;
    } else {
        std::tie(ev) = slot.wait(ec);
    }
    if (ec) throw zkr::system_error(ec, "zkr::watch::wait " + quoted_path(state_->path));
    return ev;
}

std::optional<watch_event> watch::wait(std::chrono::steady_clock::time_point deadline) {
    if (!state_) throw zkr::system_error(make_error_code(errc::bad_arguments), "zkr::watch::wait on an empty watch");
    sync_slot<watch_event> slot;
    zkr::error_code ec;
    watch_event ev;
    if (auto known = attach(*state_, slot)) {
        std::tie(ec, ev) = *known;
    } else if (auto got = slot.wait_until(deadline, ec)) {
        std::tie(ev) = *got;
    } else {
        {
            std::lock_guard lock(state_->mutex);
            if (state_->user && state_->user->sync_waiter == &slot) {
                state_->user->sync_waiter = nullptr;
                return std::nullopt;
            }
        }
        // It fired as we gave up: the slot is being filled; take it.
        std::tie(ev) = slot.wait(ec);
    }
    if (ec) throw zkr::system_error(ec, "zkr::watch::wait " + quoted_path(state_->path));
    return ev;
}

zkr::error_code watch::remove() {
    if (!state_) return make_error_code(errc::bad_arguments);
    auto c = state_->owner->client_owner.lock();
    if (!c) return make_error_code(errc::client_closed);
    zkr::error_code ec;
    run_blocking<>([&](auto done) { c->remove_watch(state_, std::move(done)); }, ec);
    return ec;
}

// ---------------------------------------------------------------- small types

acl open_acl_unsafe() { return {acl_entry{perms::all, "world", "anyone"}}; }
acl creator_all_acl() { return {acl_entry{perms::all, "auth", ""}}; }
acl read_acl_unsafe() { return {acl_entry{perms::read, "world", "anyone"}}; }

const char* to_string(connection_state s) noexcept {
    switch (s) {
        case connection_state::connected: return "connected";
        case connection_state::suspended: return "suspended";
        case connection_state::reconnected: return "reconnected";
        case connection_state::lost: return "lost";
        case connection_state::closed: return "closed";
        case connection_state::connecting: return "connecting";
    }
    return "?";
}

const char* to_string(event_type t) noexcept {
    switch (t) {
        case event_type::created: return "created";
        case event_type::deleted: return "deleted";
        case event_type::changed: return "changed";
        case event_type::child: return "child";
        case event_type::not_watching: return "not_watching";
    }
    return "?";
}

}  // namespace zkr

namespace zkr::detail {

std::shared_ptr<session_port> port_of(const zkr::client& c) {
    return client_access::impl(c);
}

std::pair<std::int64_t, std::string> session_credentials(const client& c) { return client_access::impl(c)->session_credentials(); }

}  // namespace zkr::detail
