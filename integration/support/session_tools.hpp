// Test tools that act on a zkr::client's session from outside it.
#pragma once

#include "zkr/client.hpp"

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace zkr::test {

/// Expires the client's current session the way the server would: a second handle joins the
/// session with its id and password and closes it. Returns the expired session's id.
std::int64_t expire_session(const zkr::client& c, const std::string& connect);

/// Keeps a session alive from a second handle (joined with its id and password) until destroyed,
/// so the server does not expire it while its own client cannot reach the server.
class session_keeper {
public:
    session_keeper(const std::string& connect, const std::pair<std::int64_t, std::string>& credentials);
    ~session_keeper();
    session_keeper(const session_keeper&) = delete;
    session_keeper& operator=(const session_keeper&) = delete;

private:
    void* handle_ = nullptr;
};

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns the last value.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// Records a client's state changes in order.
class state_log {
public:
    explicit state_log(zkr::client& c);
    std::vector<zkr::connection_state> snapshot();
    bool saw(zkr::connection_state s);

private:
    std::mutex mutex_;
    std::vector<zkr::connection_state> states_;
    zkr::subscription subscription_;
};

/// How many children `path` has (0 if it does not exist): the length of a lock's queue.
std::size_t queue_length(zkr::client& c, const std::string& path);

/// A path no other test uses: "/zkr-test/<name>-<random>".
std::string unique_path(const std::string& name);

/// Options for a test client: short session timeout, quick retries.
zkr::client_options test_options(const std::string& connect, std::chrono::milliseconds session_timeout = std::chrono::milliseconds(4000));

}  // namespace zkr::test
