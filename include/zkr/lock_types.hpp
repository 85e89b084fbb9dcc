/// \file
/// What zkr's locks report about themselves and their queues.
#pragma once
#include "zkr/export.hpp"

#include "zkr/error.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace zkr {

/// A hold's standing, as far as this client can tell.
enum class lock_state {
    not_held,   ///< the calling thread (or the lock_hold) holds nothing here
    held,       ///< held: connected on the hold's session, and the server answered within the lease
    uncertain,  ///< held, but the connection is down or the server has not answered lately: the
                ///< session may be expiring right now
    lost,       ///< the session that held it is gone: another client may hold the lock now
};
/// The state's name ("not_held", "held", "uncertain", "lost").
ZKR_EXPORT const char* to_string(lock_state s) noexcept;

/// Who made a lock node, from its data. zkr writes "zkr:1;host=<h>;pid=<p>;thread=<t>"
/// (thread = the Linux thread id), plus ";async=1" for a hold owned by an async operation's
/// lock_hold (then `thread` is the thread that started it); other clients (Curator writes its IP
/// address) leave fields empty and `raw` holds their data.
struct lock_owner {
    std::string host;         ///< host name of the owning process (zkr nodes only)
    std::int64_t pid = 0;     ///< its process id; 0 when the data is not zkr's
    std::int64_t thread = 0;  ///< the owning (or, for an async hold, starting) thread's Linux thread id
    bool async = false;       ///< the node belongs to an async acquisition's lock_hold
    std::string raw;          ///< the node's data as read
    /// True when the data is in zkr's format (host, pid and thread are known).
    bool is_zkr() const noexcept { return pid != 0; }
};

/// One contender in a lock's queue.
struct participant {
    std::string node;          ///< node name, e.g. "_c_…-lock-0000000007"
    std::int64_t sequence = 0; ///< its place in the queue
    bool reader = false;       ///< a read-lock node (read/write lock only)
    bool holds = false;        ///< it holds the lock now
    lock_owner owner;          ///< who made the node, from its data
    zkr::error_code owner_error;  ///< why `owner` is unknown (e.g. no_auth: its data may not be read)
};

/// Counters of a client's lock engine (all locks of one zkr::client), for tests and tuning.
struct lock_statistics {
    std::uint64_t acquisitions = 0;     ///< holds taken through ZooKeeper (not re-entries)
    std::uint64_t reentries = 0;        ///< holds taken again by their thread, no round trip
    std::uint64_t wakeups = 0;          ///< departures of a watched node that woke a waiter
    /// Holds taken when the watched node went, with no listing: it was first in our last
    /// listing, or it had been marked holding (a one-round-trip hand-off).
    std::uint64_t handoffs_without_listing = 0;
    std::uint64_t holding_marks = 0;    ///< our nodes marked holding, for a successor already queued
    std::uint64_t nodes_created = 0;    ///< lock nodes created
    std::uint64_t nodes_adopted = 0;    ///< lock nodes found again after a lost create reply
    std::uint64_t stale_nodes_deleted = 0;  ///< our nodes of failed creates or older sessions removed
    std::uint64_t delete_retries = 0;   ///< guaranteed deletes that had to be resent
    std::uint64_t holds_lost = 0;       ///< holds whose session was lost
    std::uint64_t unowned_unlocks = 0;  ///< unlock() calls by a thread that held nothing (a bug of the caller's)
};

}  // namespace zkr
