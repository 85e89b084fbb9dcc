// Test tools that act on a zkr::client's session from outside it.
#pragma once

#include "zkr/client.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/types.h>

namespace zkr::test {

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns the last value.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// Polls `condition` every 5 ms for all of `window`; false as soon as it fails once. For checks
/// that something does NOT happen (no second holder, no extra wake-up): the whole window is
/// watched, not one moment after a sleep. Where a round trip can order the check after what it
/// is about (a client's requests are answered in order), tests use that instead.
bool holds_throughout(const std::function<bool()>& condition, std::chrono::milliseconds window);

/// For anything a test expects to happen promptly: long enough for a loaded 2-core machine, short
/// enough that a hang fails the test instead of CI's timeout.
inline constexpr std::chrono::seconds prompt_deadline{30};

/// Milliseconds of the steady clock since `t`.
inline long long ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

/// Whether `f` is ready within `d` (false: it is not yet; the test decides what that means).
template <class Future>
bool ready_within(Future& f, std::chrono::milliseconds d) {
    return f.wait_for(d) == std::future_status::ready;
}

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

/// How many children `path` has (0 if it does not exist): the length of a lock's queue. Any other
/// failure of the listing throws: a check that "nothing is left" must not pass on an error.
std::size_t queue_length(zkr::client& c, const std::string& path);
/// A double barrier's members under `path`: its children but "ready", sorted (none if it does
/// not exist). Any other failure of the listing throws.
std::vector<std::string> barrier_members(zkr::client& c, const std::string& path);
/// Whether every one of `paths` has no child (or does not exist); throws as queue_length.
bool queues_empty(zkr::client& c, const std::vector<std::string>& paths);
/// The child watches a waiting lock queue under `path` keeps on the server, counted as the server
/// counts them (one per node and session): each node's owner watches its own node, and each
/// waiter the node just ahead of it. Throws if a listing or a read fails.
std::size_t queue_child_watches(zkr::client& c, const std::string& path);

/// Thrown when a wait runs past its deadline: the test fails instead of hanging.
struct deadline_passed : std::runtime_error {
    using std::runtime_error::runtime_error;
};
[[noreturn]] void fail_deadline(const std::string& what, std::chrono::milliseconds timeout);

/// `f`'s value (or exception) once it is ready; throws deadline_passed if it is not ready within
/// `timeout` (said on stderr at once too, in case a destructor then blocks on what never came).
template <class T>
T get_within(std::future<T>& f, std::chrono::milliseconds timeout = std::chrono::seconds(30),
             const std::string& what = "a result") {
    if (f.wait_for(timeout) != std::future_status::ready) fail_deadline(what, timeout);
    return f.get();
}
template <class T>
T get_within(std::future<T>&& f, std::chrono::milliseconds timeout = std::chrono::seconds(30),
             const std::string& what = "a result") {
    return get_within(f, timeout, what);
}

/// The error `f` ends with (none when it ends with a value); throws deadline_passed as get_within.
template <class Future>
zkr::error_code error_of(Future& f, std::chrono::milliseconds timeout) {
    if (f.wait_for(timeout) != std::future_status::ready) fail_deadline("an outcome", timeout);
    try {
        f.get();
        return {};
    } catch (const zkr::system_error& e) {
        return e.code();
    }
}

/// This process's threads now: kernel thread id -> name (/proc/self/task/ID/comm). zkr names its
/// own ("zkr-session", "zkr-c-calls", "zkr-handlers"); the ZooKeeper C client leaves its two per
/// handle unnamed.
std::map<pid_t, std::string> process_threads();
/// The calling thread's kernel id and name.
pid_t this_thread_id();
std::string this_thread_name();

/// A path no other test uses: "/zkr-test/<name>-<random>".
std::string unique_path(const std::string& name);

/// The first host:port of a connect string (what a fault proxy forwards to).
std::string first_server(const std::string& connect);

/// Options for a test client: short session timeout, quick retries.
zkr::client_options test_options(const std::string& connect, std::chrono::milliseconds session_timeout = std::chrono::milliseconds(4000));

}  // namespace zkr::test
