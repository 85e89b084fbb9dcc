// zkr::barrier: Curator's DistributedBarrier layout (one persistent node, up while it exists).
// A wait is the toolkit's node wait (toolkit/node_wait.hpp): exists() with a watch, read again on
// every wake-up, so only the node's absence on the server lets a waiter through.
#include "zkr/barrier.hpp"

#include "toolkit/blocking.hpp"
#include "toolkit/node_wait.hpp"
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

bool barrier::wait(std::chrono::steady_clock::time_point deadline) {
    auto held = port();
    error_code ec;
    // Down once the server says the node is gone: its deletion event, with no second read (the
    // release costs the delete's round trip alone), or a read.
    bool down = detail::wait_node(*held, path_, false, deadline, recipe_kind::barrier, path_, ec);
    if (ec) throw zkr::system_error(ec, "zkr::barrier::wait " + quoted_path(path_));
    return down;
}

}  // namespace zkr
