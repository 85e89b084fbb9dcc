/// \file
/// zkr::testkit's session tools: expire a zkr::client's session the way the server does, close a
/// session from outside, keep one alive while its client is cut off.
#pragma once
#include "zkr/testkit/export.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace zkr {
class client;
}

namespace zkr::testkit {

/// A session's id and password: what a second handle needs to join it.
struct session_credentials {
    std::int64_t id = 0;     ///< the session's id
    std::string password{};  ///< its password (16 bytes)
};

/// The client's current session. Throws std::logic_error when it has none (not connected yet, or
/// between sessions).
ZKR_TESTKIT_EXPORT session_credentials credentials_of(const zkr::client& c);

/// Expires `c`'s current session on the server, as a session timeout would: a second handle joins
/// it (with its id and password) through `connect` and closes it. Returns the expired session's
/// id once `c` has seen the loss (its holds are lost by then; its listeners hear of it on the
/// client's executor). Tried again if the client wins its session back in between. On an
/// ensemble it joins as close_session() does. Throws
/// std::logic_error when the client has no session, std::runtime_error when the session survives
/// or the client has not seen it within `timeout`.
ZKR_TESTKIT_EXPORT std::int64_t expire_session(const zkr::client& c, const std::string& connect,
                                               std::chrono::milliseconds timeout = std::chrono::seconds(30));
/// expire_session() through the client's own connect string (with a proxy in it: through the
/// proxy, which must let it through).
ZKR_TESTKIT_EXPORT std::int64_t expire_session(const zkr::client& c,
                                               std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// Closes the session `s` on the server through `connect` (its ephemeral nodes go now), whatever
/// its client is doing; returns once the server has closed it, without waiting for the client.
/// On an ensemble the handle joins through a server that holds no connection of the session
/// (asked with `cons`), so that the client's own connection is not dropped under the join: a
/// follower that sees the client's reconnection and the join at once can leave the client
/// connected to the closed session, never told.
/// Throws std::runtime_error when no server answers within `timeout`.
ZKR_TESTKIT_EXPORT void close_session(const std::string& connect, const session_credentials& s,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// Keeps the session `s` alive from a second handle until destroyed, so that the server does not
/// expire it while its own client cannot reach the server; destruction closes it on the server.
/// Join it once the client is cut off: a client that can still reach the server takes its
/// session back (the server closes the other connection each time a handle joins a session).
class ZKR_TESTKIT_EXPORT session_keeper {
public:
    /// Joins the session through `connect`. Throws std::runtime_error when no server answers
    /// within `timeout` or the session is gone already.
    session_keeper(const std::string& connect, const session_credentials& s,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));
    ~session_keeper();
    session_keeper(const session_keeper&) = delete;
    session_keeper& operator=(const session_keeper&) = delete;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace zkr::testkit
