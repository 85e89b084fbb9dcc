/// \file
/// zkr::double_barrier — members enter together and leave together, wire-compatible with
/// Curator 5.4's DistributedDoubleBarrier (kazoo's DoubleBarrier has the same layout; untested).
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace zkr {

namespace detail {
class session_port;
}

/// A double barrier at `path` for `member_count` members (Curator's layout: each member an
/// ephemeral node "<uuid>" under `path`, which is made as a container; a persistent "ready"
/// node once enough have entered). enter_for() returns true once `member_count` members are in
/// (a threshold, as Curator's: more may enter); leave_for() returns true once every member has
/// left. Curator members on the same path count as members (tested).
///
/// Deadlines bound the waits; the writes of a call (its node, "ready", a delete) follow the
/// client's retry policy, and a member giving up waits for its node's delete at most a session
/// timeout: with the server unreachable, a call may so return that much after its deadline.
///
/// Better than Curator's, on the same layout:
/// - an entrant that times out or fails deletes its node before the call returns (Curator
///   leaves it, so a late entrant passes alone: CURATOR-318, -80); so does a leaver;
/// - session and connection events never let anyone through (GH-1290): only what the server
///   lists does; a member whose session expires while it waits enters again on its new one;
/// - the watches of a timed-out wait are removed.
///
/// One object is one member: enter, then leave. Thread-safe (calls are serialised); blocks the
/// calling thread, never the client's.
class ZKR_EXPORT double_barrier {
public:
    /// Throws std::invalid_argument for a bad path or a `member_count` below 1, naming it;
    /// zkr::system_error(client_closed) for a closed client. Sends nothing.
    double_barrier(client& c, std::string path, int member_count);
    /// Deletes this member's node if it is still there (without waiting for the answer).
    ~double_barrier();
    double_barrier(const double_barrier&) = delete;
    double_barrier& operator=(const double_barrier&) = delete;

    /// Enters and waits until `member_count` members are in (true), or `timeout` passed (false:
    /// this member's node is deleted first). milliseconds::max() waits for ever; 0 makes the
    /// node and lists once. Throws
    /// zkr::system_error (the node deleted first), std::logic_error when already entered.
    bool enter_for(std::chrono::milliseconds timeout);
    /// enter_for() without a deadline.
    void enter() { enter_for(std::chrono::milliseconds::max()); }
    /// Leaves and waits until every member has left (true), or `timeout` passed (false; this
    /// member's node is deleted first all the same). Throws zkr::system_error,
    /// std::logic_error when not entered.
    bool leave_for(std::chrono::milliseconds timeout);
    /// leave_for() without a deadline.
    void leave() { leave_for(std::chrono::milliseconds::max()); }

    /// The barrier's path.
    const std::string& path() const noexcept { return path_; }
    /// This member's node ("<path>/<uuid>").
    const std::string& node_path() const noexcept { return node_; }
    /// How many members it waits for.
    int member_count() const noexcept { return member_count_; }

private:
    std::shared_ptr<detail::session_port> port() const;
    void delete_own(detail::session_port& p);
    std::weak_ptr<detail::session_port> port_;
    std::string path_, ready_, node_, name_;
    int member_count_;
    std::mutex mutex_;
    bool entered_ = false;
};

}  // namespace zkr
