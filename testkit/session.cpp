// Session tools: a second C-client handle joins a session with its id and password (the FAQ's
// way to expire a session from outside; what Curator's KillSession did before the Java client
// had a testing hook), and closes it or keeps it alive.
#include "zkr/testkit/session.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/session_access.hpp"
#include "zkr/testkit/ensemble.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace zkr::testkit {
namespace {

using clock_type = std::chrono::steady_clock;

std::string hex(std::int64_t id) {
    std::ostringstream out;
    out << "0x" << std::hex << static_cast<std::uint64_t>(id);
    return out.str();
}

// The joining handle's session state, written by its watcher (the C client's completion thread).
struct joined_state {
    std::mutex mutex;
    std::condition_variable changed;
    int state = 0;
};

void on_session_event(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* s = static_cast<joined_state*>(context);
    std::lock_guard lock(s->mutex);
    s->state = state;
    s->changed.notify_all();
}

// A handle on session `s`, connected; throws when no server takes it within `timeout`.
zhandle_t* join(const std::string& connect, const session_credentials& s, joined_state& state,
                std::chrono::milliseconds timeout, const char* who) {
    clientid_t id{};
    id.client_id = s.id;
    std::copy_n(s.password.begin(), std::min(s.password.size(), sizeof id.passwd), id.passwd);
    zhandle_t* zh = zookeeper_init(connect.c_str(), &on_session_event, 10000, &id, &state, 0);
    if (!zh) throw std::runtime_error(std::string(who) + ": cannot open a handle to \"" + connect + "\"");
    std::unique_lock lock(state.mutex);
    bool joined = state.changed.wait_for(lock, timeout, [&] {
        return state.state == ZOO_CONNECTED_STATE || state.state == ZOO_EXPIRED_SESSION_STATE;
    });
    int outcome = state.state;
    lock.unlock();
    if (joined && outcome == ZOO_CONNECTED_STATE && zoo_client_id(zh)->client_id == s.id) return zh;
    zookeeper_close(zh);
    if (!joined) throw std::runtime_error(std::string(who) + ": no server of \"" + connect + "\" answered within " +
                                          std::to_string(timeout.count()) + " ms");
    throw std::runtime_error(std::string(who) + ": session " + hex(s.id) + " is gone already");
}

// Where to join session `id` from, of `connect` ("host:port,host:port[/chroot]"): on an ensemble,
// one server that holds no connection of the session (by its `cons`). A handle that joins a
// session on the server the client is connected to makes that server drop the client's
// connection; the client reconnects at once, and two connects of one session revalidated at the
// same time on a follower can both succeed: the close then ends the session and the newer
// connection's, and the client sits on the other one, of a closed session, its pings answered
// by the follower for as long as it likes (seen: "Revalidating client" twice in one millisecond,
// then a client that never heard of its expiry). Joined elsewhere, the client's connection stays
// put until the close reaches its server, which drops it: the client hears the expiry on its
// reconnection. One server, or none found without the session: `connect` as it is.
// Asking the servers takes at most half of `timeout`, so the close keeps its own deadline.
std::string joining_connect(const std::string& connect, std::int64_t id, std::chrono::milliseconds timeout) {
    const auto slash = connect.find('/');
    const std::string chroot = slash == std::string::npos ? "" : connect.substr(slash);
    std::vector<std::string> servers;
    std::stringstream list(connect.substr(0, slash));
    for (std::string server; std::getline(list, server, ',');)
        if (!server.empty()) servers.push_back(server);
    if (servers.size() < 2) return connect;
    const std::string sid = "sid=" + hex(id);
    const auto asked_until = clock_type::now() + timeout / 2;
    for (const auto& server : servers) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(asked_until - clock_type::now());
        if (left.count() <= 0) break;
        std::string cons;
        try {
            cons = four_letter_word(server, "cons", std::min<std::chrono::milliseconds>(left, std::chrono::seconds(2)));
        } catch (const std::invalid_argument&) {
            return connect;  // not host:port (a name the kit cannot ask): as it is
        }
        if (cons.empty()) continue;  // not answering: not one to join through
        bool holds = false;
        for (auto at = cons.find(sid); at != std::string::npos; at = cons.find(sid, at + 1)) {
            auto after = at + sid.size();
            if (after == cons.size() || cons[after] == ',' || cons[after] == ')') holds = true;
        }
        if (!holds) return server + chroot;
    }
    return connect;
}

}  // namespace

session_credentials credentials_of(const zkr::client& c) {
    auto [id, password] = zkr::detail::session_credentials(c);
    if (id == 0) throw std::logic_error("zkr::testkit: the client has no session now (not connected yet, or between sessions)");
    return session_credentials{id, std::move(password)};
}

void close_session(const std::string& connect, const session_credentials& s, std::chrono::milliseconds timeout) {
    joined_state state;
    const auto until = clock_type::now() + timeout;
    const std::string through = joining_connect(connect, s.id, timeout);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now());
    zhandle_t* zh = join(through, s, state, std::max(left, std::chrono::milliseconds(1)), "zkr::testkit::close_session");
    zookeeper_close(zh);  // the server closes the session: its ephemeral nodes go, its client gets EXPIRED
}

std::int64_t expire_session(const zkr::client& c, const std::string& connect, std::chrono::milliseconds timeout) {
    const auto until = clock_type::now() + timeout;
    auto s = credentials_of(c);
    // The client may win its session back between our join and our close (the server then refuses
    // the close as "session moved"): again, until the client reports the loss.
    while (true) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now());
        if (left.count() <= 0) break;
        try {
            close_session(connect, s, left);
        } catch (const std::runtime_error&) {
            // Gone already (the client's own close raced ours): what follows sees it.
        }
        // The client has seen the loss once its session is no longer the expired one: it reports
        // the loss (holds lost) before it opens a new handle.
        auto seen_until = std::min(until, clock_type::now() + std::chrono::seconds(3));
        while (clock_type::now() < seen_until) {
            if (c.session_id() != s.id) return s.id;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    throw std::runtime_error("zkr::testkit::expire_session: session " + hex(s.id) + " did not expire within " +
                             std::to_string(timeout.count()) + " ms, as far as its client can tell");
}

std::int64_t expire_session(const zkr::client& c, std::chrono::milliseconds timeout) {
    return expire_session(c, c.options().connect, timeout);
}

struct session_keeper::impl {
    joined_state state;
    zhandle_t* zh = nullptr;
};

session_keeper::session_keeper(const std::string& connect, const session_credentials& s, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>()) {
    impl_->zh = join(connect, s, impl_->state, timeout, "zkr::testkit::session_keeper");
}

session_keeper::~session_keeper() {
    // Closing ends the session on the server (and removes its ephemeral nodes).
    if (impl_->zh) zookeeper_close(impl_->zh);
}

}  // namespace zkr::testkit
