// zkr::double_barrier: Curator's DistributedDoubleBarrier layout (ephemeral "<uuid>" members
// under a container, a persistent "ready" node). Entering: make our node, then list with a watch
// until "ready" is there or enough members are, and make "ready" then. Leaving: ZooKeeper's
// recipe (the lowest waits for the highest; everyone else deletes its node and waits for the
// lowest), then "ready" is deleted. Every decision comes from a listing read from the server.
#include "zkr/double_barrier.hpp"

#include "toolkit/blocking.hpp"
#include "toolkit/cleanup.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/path.hpp"

#include <algorithm>
#include <stdexcept>

namespace zkr {

namespace b = detail::blocking;

namespace {
constexpr const char* ready_name = "ready";

std::vector<std::string> members_of(std::vector<std::string> children) {
    children.erase(std::remove(children.begin(), children.end(), ready_name), children.end());
    std::sort(children.begin(), children.end());  // Curator and kazoo order them so too
    return children;
}
}  // namespace

double_barrier::double_barrier(client& c, std::string path, int member_count)
    : path_(std::move(path)), member_count_(member_count) {
    detail::check_recipe_path(c, path_, "zkr::double_barrier", "barrier path");
    if (member_count < 1)
        throw std::invalid_argument("zkr::double_barrier: member_count must be at least 1 (it is " +
                                    std::to_string(member_count) + ")");
    auto p = detail::port_of(c);
    if (p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::double_barrier on a closed client");
    port_ = p->weak_port();
    ready_ = join_path(path_, ready_name);
    name_ = b::member_uuid();
    node_ = join_path(path_, name_);
}

double_barrier::~double_barrier() {
    std::lock_guard lock(mutex_);
    if (!entered_) return;
    if (auto p = port_.lock(); p && !p->closed()) {
        try {
            detail::cleanup_service::of(*p)->guaranteed_delete(node_);
        } catch (const zkr::system_error&) {
            // closed meanwhile: the session, and our ephemeral node with it, is gone
        }
    }
}

std::shared_ptr<detail::session_port> double_barrier::port() const {
    auto p = port_.lock();
    if (!p || p->closed())
        throw zkr::system_error(make_error_code(errc::client_closed), "zkr::double_barrier " + quoted_path(path_));
    return p;
}

// Our node goes before the caller hears that we gave up, so nobody counts a member that left.
// The delete is resent while our session lives (the cleanup service); we wait for it unless the
// connection stays down a whole session timeout (then the node goes with its session).
void double_barrier::delete_own(detail::session_port& p) {
    entered_ = false;
    auto slot = std::make_shared<detail::sync_slot<>>();
    try {
        detail::cleanup_service::of(p)->guaranteed_delete(
            node_, detail::completion<>(detail::completion<>::inline_fn([slot](error_code ec) { slot->set(ec); })));
    } catch (const zkr::system_error&) {
        return;  // the client closed: its session, and our node, are gone
    }
    error_code ec;
    slot->wait_for(p.session_timeout(), ec);
}

bool double_barrier::enter_for(std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    if (entered_) throw std::logic_error("zkr::double_barrier::enter_for: " + quoted_path(node_) + " has entered already");
    auto deadline = b::deadline_after(timeout);
    auto held = port();
    auto& p = *held;
    error_code ec;
    b::create_containers(p, path_, ec);
    if (ec) throw zkr::system_error(ec, "zkr::double_barrier::enter_for: creating " + quoted_path(path_));
    auto fail = [&](error_code e, const std::string& what) {
        delete_own(p);
        throw zkr::system_error(e, "zkr::double_barrier::enter_for: " + what);
    };
    auto make_own = [&] {
        entered_ = true;  // from here on, a give-up deletes it
        b::create(p, node_, "", create_mode::ephemeral, ec);
        if (ec == errc::no_node) {  // the container was reaped meanwhile (its last member left)
            b::create_containers(p, path_, ec);
            if (!ec) b::create(p, node_, "", create_mode::ephemeral, ec);
        }
        // node_exists: our create was resent after a lost reply (the uuid is ours alone).
        if (ec && ec != errc::node_exists) fail(ec, "creating " + quoted_path(node_));
    };
    make_own();
    for (bool first = true;; first = false) {
        auto listed = b::children_watched(p, path_, first ? b::first_read_by(deadline, timeout, p) : deadline, ec);
        if (!listed) {
            delete_own(p);
            return false;
        }
        if (ec == errc::no_node) {
            // The barrier's container was reaped: our node went with an expired session and was
            // its last child. Enter again: the container and our node made anew.
            make_own();
            continue;
        }
        if (ec) fail(ec, "listing " + quoted_path(path_));
        const auto& children = listed->children;
        bool ready = std::find(children.begin(), children.end(), ready_name) != children.end();
        bool ours = std::find(children.begin(), children.end(), name_) != children.end();
        if (!ours) {
            // Our session expired while we waited, and our node with it: enter again on the new
            // one (nobody passes on our old node, and we do not pass without one).
            b::drop_watch(p, listed->watch);
            make_own();
            continue;
        }
        if (ready) {
            b::drop_watch(p, listed->watch);
            return true;
        }
        if (static_cast<int>(members_of(children).size()) >= member_count_) {
            b::drop_watch(p, listed->watch);
            b::create(p, ready_, "", create_mode::persistent, ec);
            if (ec && ec != errc::node_exists) fail(ec, "creating " + quoted_path(ready_));
            return true;
        }
        if (b::wait(p, listed->watch, deadline) == b::watch_end::timed_out) {
            delete_own(p);
            return false;
        }
    }
}

bool double_barrier::leave_for(std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    if (!entered_) throw std::logic_error("zkr::double_barrier::leave_for: " + quoted_path(node_) + " has not entered");
    auto deadline = b::deadline_after(timeout);
    auto held = port();
    auto& p = *held;
    auto fail = [&](error_code e, const std::string& what) {
        delete_own(p);
        throw zkr::system_error(e, "zkr::double_barrier::leave_for: " + what);
    };
    for (;;) {
        error_code ec;
        auto children = b::get_children(p, path_, false, ec);
        if (ec == errc::no_node) break;  // the container went with its last member
        if (ec) fail(ec, "listing " + quoted_path(path_));
        auto members = members_of(std::move(children.children));
        if (members.empty()) break;
        auto ours = std::find(members.begin(), members.end(), name_);
        if (ours != members.end() && members.size() == 1) {
            b::remove(p, node_, any_version, ec);
            if (ec && ec != errc::no_node) fail(ec, "deleting " + quoted_path(node_));
            continue;
        }
        std::string watched;
        if (ours == members.begin()) {
            watched = members.back();  // the lowest waits for the highest to go
        } else {
            if (ours != members.end()) {
                b::remove(p, node_, any_version, ec);
                if (ec && ec != errc::no_node) fail(ec, "deleting " + quoted_path(node_));
            }
            watched = members.front();
        }
        auto seen = b::exists_watched(p, join_path(path_, watched), deadline, ec);
        if (!seen) {
            delete_own(p);
            return false;
        }
        if (ec) fail(ec, "reading " + quoted_path(join_path(path_, watched)));
        if (!seen->exists) {
            b::drop_watch(p, seen->watch);
            continue;
        }
        if (b::wait(p, seen->watch, deadline) == b::watch_end::timed_out) {
            delete_own(p);
            return false;
        }
    }
    entered_ = false;
    // Everyone has left: "ready" goes (resent while the session lives), so that the next round
    // on this path waits for its own members.
    try {
        detail::cleanup_service::of(p)->guaranteed_delete(ready_);
    } catch (const zkr::system_error&) {
        // the client closed: nothing more can be sent
    }
    return true;
}

}  // namespace zkr
