// The Curator 5.4 driver (integration/interop), built by CMake: the command line of its one-shot
// modes, and curator_session, a typed client of its `session` mode (the protocol is documented
// in integration/interop/RecipeSession.java).
#pragma once

#include "support/child_process.hpp"

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace zkr::test {

/// "java ... CuratorLockDriver <args>"; ZKR_CURATOR_DRIVER_DIR is set by the build.
inline std::string curator_command(const std::string& args) {
    std::ifstream in(ZKR_CURATOR_DRIVER_DIR "/run-prefix");
    std::string prefix;
    if (!std::getline(in, prefix) || prefix.empty())
        throw std::runtime_error("the Curator driver is not built: " ZKR_CURATOR_DRIVER_DIR "/run-prefix");
    return prefix + " " + args;
}

/// The session protocol's encoding of free strings (ids, node data): bytes outside
/// [A-Za-z0-9-._~/@+,:=] as %XX, the empty string as "".
std::string curator_encode(std::string_view s);
/// The inverse; throws std::invalid_argument on a malformed escape.
std::string curator_decode(std::string_view token);

/// One line of the driver's output.
struct curator_line {
    std::string kind;   // ready | ok | err | ev | bye
    std::uint64_t seq = 0;
    /// When the driver wrote it: its CLOCK_MONOTONIC, the same clock as steady_clock here, so
    /// lines of different drivers and the test's own clock compare.
    std::chrono::steady_clock::time_point time;
    std::string subject;            // ok/err: the command's tag; ev: the object's name; ready: session id
    std::vector<std::string> args;  // ok: the results; err: {KIND, MESSAGE}; ev: {WHAT, ARG...}
    std::string text;               // the whole line

    /// ev: the event's type (args[0]); "" otherwise.
    const std::string& what() const;
    /// ev: its i-th argument after the type (args[i + 1]); throws std::out_of_range if absent.
    const std::string& arg(std::size_t i) const;
};

/// A command answered with `err`.
class curator_error : public std::runtime_error {
public:
    curator_error(std::string kind, const std::string& message)
        : std::runtime_error(message), kind_(std::move(kind)) {}
    /// usage | exists | unknown | state | nonode | interrupted | timeout | exception
    const std::string& kind() const { return kind_; }

private:
    std::string kind_;
};

struct curator_participant {
    std::string id;
    bool leader = false;
    bool operator==(const curator_participant& o) const { return id == o.id && leader == o.leader; }
};

struct curator_latch_info {
    std::string state;                // LATENT | STARTED | CLOSED
    std::string our_path;             // "" when none
    std::string last_path_is_leader;  // "" when none
    bool has_leadership = false;
    std::string id;
};

/// A Curator driver process in `session` mode: one CuratorFramework (one ZooKeeper session),
/// recipe objects named by the test. Every wait has a deadline; a missed deadline, a driver that
/// exits early or a malformed line throws std::runtime_error (the message carries the driver's
/// recent output), and a command answered with `err` throws curator_error.
class curator_session {
public:
    using ms = std::chrono::milliseconds;

    struct options {
        ms session_timeout{10000};  // CURATOR_SESSION_MS
        ms ready_timeout{60000};    // JVM start-up and the first connection
        ms reply_timeout{30000};    // a reply's deadline, on top of a blocking command's own timeout
    };

    explicit curator_session(const std::string& connect);
    curator_session(const std::string& connect, options o);
    /// Sends `exit` and waits for `bye` (10 s), then lets the process go (killed after 5 s more).
    ~curator_session();
    curator_session(const curator_session&) = delete;
    curator_session& operator=(const curator_session&) = delete;

    /// The Curator client's session id, hex, as the driver reported it on `ready`.
    const std::string& session_id() const { return session_id_; }
    pid_t pid() const { return process_.pid(); }
    /// Sends a signal to the driver (SIGKILL: a crash; its session lives until it times out).
    void kill(int signal);

    // ---- the raw protocol
    /// Sends "TAG COMMAND" and returns the tag (the driver answers it exactly once).
    std::string send(const std::string& command);
    /// The ok or err line of `tag`; throws std::runtime_error if none within `timeout`.
    curator_line reply(const std::string& tag, ms timeout);
    /// The ok line of `tag`: throws curator_error if it is an err line.
    curator_line ok(const std::string& tag, ms timeout);
    /// send + ok; `timeout` defaults to options::reply_timeout.
    curator_line call(const std::string& command, std::optional<ms> timeout = std::nullopt);

    /// The first event of object `name` of type `what` (empty: any type) not yet taken by a wait
    /// (and matching `pred`, if given), taking it; throws std::runtime_error after `timeout`.
    curator_line wait_event(const std::string& name, const std::string& what, ms timeout,
                            const std::function<bool(const curator_line&)>& pred = {});
    /// Like wait_event, but nullopt (not an error) if none arrives within `within`: for checking
    /// that something does not happen.
    std::optional<curator_line> poll_event(const std::string& name, const std::string& what, ms within,
                                           const std::function<bool(const curator_line&)>& pred = {});
    /// Every event line read so far (taken or not) of `name` (empty: all) and type `what` (empty:
    /// any), in order. Reads nothing new.
    std::vector<curator_line> events(const std::string& name = "", const std::string& what = "") const;
    /// Every line read so far.
    const std::vector<curator_line>& lines() const { return log_; }
    /// The last lines read, for failure messages.
    std::string recent(std::size_t n = 20) const;

    // ---- general
    void ping();
    /// Children of `path`, sorted by name; throws curator_error (kind nonode) if it is missing.
    std::vector<std::string> children(const std::string& path);
    /// Data and ephemeral owner (hex, "0" if persistent) of `path`; nullopt if it is missing.
    std::optional<std::pair<std::string, std::string>> get(const std::string& path);
    /// Interrupts the command running on `name`'s thread; false if none was.
    bool cancel(const std::string& name);
    /// Closes any object (a latch: mode "silent" or "notify"; default silent).
    void close(const std::string& name, const std::string& mode = "");

    // ---- LeaderLatch
    void latch_start(const std::string& name, const std::string& path, const std::string& id);
    bool latch_await(const std::string& name, ms timeout);
    bool latch_has(const std::string& name);
    curator_latch_info latch_info(const std::string& name);
    curator_participant latch_leader(const std::string& name);
    std::vector<curator_participant> latch_participants(const std::string& name);

    // ---- DistributedBarrier, DistributedDoubleBarrier, DistributedAtomicLong (RetryNTimes(1000, 1))
    void barrier_new(const std::string& name, const std::string& path);
    void barrier_set(const std::string& name);
    void barrier_remove(const std::string& name);
    /// Sends waitOnBarrier(ms); the tag, for reply(): "true" or "false".
    std::string barrier_wait_send(const std::string& name, ms timeout);
    void dbarrier_new(const std::string& name, const std::string& path, int members);
    /// Sends enter(ms) / leave(ms); the tag, for reply(): "true" or "false".
    std::string dbarrier_enter_send(const std::string& name, ms timeout);
    std::string dbarrier_leave_send(const std::string& name, ms timeout);
    void along_new(const std::string& name, const std::string& path);
    /// get() / add(delta): {succeeded, pre, post}.
    std::tuple<bool, std::int64_t, std::int64_t> along_get(const std::string& name);
    std::tuple<bool, std::int64_t, std::int64_t> along_add(const std::string& name, std::int64_t delta);
    /// Sends `times` increments; the tag, for reply(): how many succeeded.
    std::string along_increments_send(const std::string& name, int times);

    // ---- LeaderSelector
    // GroupMember
    /// new GroupMember(client, path, id, payload).start().
    void group_start(const std::string& name, const std::string& path, const std::string& id, const std::string& payload);
    /// getCurrentMembers(): id -> payload.
    std::map<std::string, std::string> group_members(const std::string& name);

    // PersistentTtlNode (closed by close(name))
    void ttl_node_start(const std::string& name, const std::string& path, std::chrono::milliseconds ttl, const std::string& data);
    bool ttl_node_wait(const std::string& name, ms timeout);

    void selector_start(const std::string& name, const std::string& path, const std::string& id, bool auto_requeue);
    /// Makes the current takeLeadership return; its term.
    long selector_release(const std::string& name);
    bool selector_requeue(const std::string& name);
    void selector_interrupt(const std::string& name);
    bool selector_has(const std::string& name);
    curator_participant selector_leader(const std::string& name);
    std::vector<curator_participant> selector_participants(const std::string& name);

    // ---- InterProcessSemaphoreV2 and SharedCount
    void semaphore_create(const std::string& name, const std::string& path, int max_leases,
                          std::optional<std::string> node_data = std::nullopt);
    void semaphore_create_counted(const std::string& name, const std::string& path, const std::string& count_name,
                                  std::optional<std::string> node_data = std::nullopt);
    /// The lease node names, or nullopt if acquire timed out.
    std::optional<std::vector<std::string>> semaphore_acquire(const std::string& name, int qty, ms timeout);
    /// Starts an acquire and returns its tag, for semaphore_acquired(tag, timeout) later.
    std::string semaphore_acquire_begin(const std::string& name, int qty, ms timeout);
    std::optional<std::vector<std::string>> semaphore_acquired(const std::string& tag, ms timeout);
    std::vector<std::string> semaphore_leases(const std::string& name);
    /// which: "one" (the oldest), "all" or a lease node name; returns how many were returned.
    int semaphore_release(const std::string& name, const std::string& which);
    std::vector<std::string> semaphore_participants(const std::string& name);
    /// `cycles` times: acquire one lease, hold it `hold`, return it; returns its tag (answered with
    /// the number of cycles, or err timeout if a lease did not come within `timeout`).
    std::string semaphore_churn_begin(const std::string& name, int cycles, ms hold, ms timeout);

    void count_start(const std::string& name, const std::string& path, int seed);
    /// {value, version}
    std::pair<int, int> count_get(const std::string& name);
    void count_set(const std::string& name, int value);
    bool count_try_set(const std::string& name, int value);

    // ---- InterProcessMutex and InterProcessMultiLock
    void mutex_create(const std::string& name, const std::string& path);
    void multi_create(const std::string& name, const std::vector<std::string>& paths);
    /// Our lock node ("" if it could not be told), or nullopt if the acquire timed out.
    std::optional<std::string> mutex_acquire(const std::string& name, ms timeout);
    std::string mutex_acquire_begin(const std::string& name, ms timeout);
    /// Our lock nodes, one per path in order ("" where it could not be told), or nullopt if the
    /// acquire timed out (the multi-lock has then released what it took).
    std::optional<std::vector<std::string>> multi_acquire(const std::string& name, ms timeout);
    std::string multi_acquire_begin(const std::string& name, ms timeout);
    void mutex_release(const std::string& name);
    void multi_release(const std::string& name);

private:
    /// Reads one line if one comes before `deadline`; false on timeout. Throws if the driver's
    /// output ended or a line is malformed.
    bool pump(std::chrono::steady_clock::time_point deadline);
    [[noreturn]] void fail(const std::string& what) const;
    std::optional<curator_line> find_event(const std::string& name, const std::string& what,
                                           const std::function<bool(const curator_line&)>& pred);
    std::vector<curator_participant> parse_participants(const curator_line& l) const;
    bool parse_bool(const std::string& s) const;

    options options_;
    child_process process_;
    std::string session_id_;
    std::uint64_t next_tag_ = 1;
    bool ended_ = false;  // `bye` or end of output seen
    std::vector<curator_line> log_;
    std::vector<bool> taken_;  // per log_ line: an event taken by a wait, or a reply returned
    std::map<std::string, std::size_t> multi_sizes_;  // multi-lock name -> its number of paths
};

}  // namespace zkr::test
