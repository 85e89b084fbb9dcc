// zkr::barrier: Curator's DistributedBarrier layout (one persistent node, up while it exists).
// A wait reads exists() with a watch and waits on the watch; every wake-up reads again, so only
// the node's absence on the server lets a waiter through.
#include "zkr/barrier.hpp"

#include "toolkit/blocking.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/path.hpp"

namespace zkr {
std::shared_ptr<detail::session_port> barrier::port() const {
    auto p = port_.lock();
    if (!p || p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::barrier " + quoted_path(path_));
    return p;
}

barrier::barrier(client& c, std::string path) : path_(std::move(path)) {
    detail::check_recipe_path(c, path_, "zkr::barrier", "barrier path");
    auto p = detail::port_of(c);
    if (p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::barrier on a closed client");
    port_ = p->weak_port();
    executor_ = p->executor();
}

barrier::~barrier() = default;

void barrier::set() {
    auto held = port();
    for (int tries = 0;; ++tries) {
        error_code ec;
        auto parent = parent_path(path_);
        if (parent != "/") detail::blocking::create_containers(*held, parent, ec);
        if (ec) throw zkr::system_error(ec, "zkr::barrier::set: creating the parents of " + quoted_path(path_));
        detail::blocking::create(*held, path_, "", create_mode::persistent, ec);
        if (ec == errc::no_node && tries < 2) continue;  // a container parent reaped meanwhile
        if (ec && ec != errc::node_exists) throw zkr::system_error(ec, "zkr::barrier::set " + quoted_path(path_));
        return;
    }
}

void barrier::remove() {
    error_code ec;
    detail::blocking::remove(*port(), path_, any_version, ec);
    if (ec && ec != errc::no_node) throw zkr::system_error(ec, "zkr::barrier::remove " + quoted_path(path_));
}

bool barrier::is_set() const {
    error_code ec;
    auto r = detail::blocking::exists(*port(), path_, false, ec);
    if (ec) throw zkr::system_error(ec, "zkr::barrier::is_set " + quoted_path(path_));
    return r.exists;
}

bool barrier::wait_for(std::chrono::milliseconds timeout) {
    namespace b = detail::blocking;
    auto deadline = b::deadline_after(timeout);
    auto held = port();
    auto& p = *held;
    for (bool first = true;; first = false) {
        error_code ec;
        auto r = b::exists_watched(p, path_, first ? b::first_read_by(deadline, timeout, p) : deadline, ec);
        if (!r) return false;  // the deadline passed first (a late watch is removed)
        if (ec) throw zkr::system_error(ec, "zkr::barrier::wait_for " + quoted_path(path_));
        if (!r->exists) {
            b::drop_watch(p, r->watch);  // an exists() watch on a missing node waits for its creation
            return true;
        }
        event_type event{};
        auto end = b::wait(p, r->watch, deadline, &event);
        if (end == b::watch_end::timed_out) return false;
        // The server said the node was deleted: down, now (no second read: the release costs the
        // delete's round trip alone). Anything else (a data change, the session's end) reads again.
        if (end == b::watch_end::fired && event == event_type::deleted) return true;
    }
}

}  // namespace zkr
