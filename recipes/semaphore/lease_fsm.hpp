// Taking leases of a semaphore, as a sans-io state machine, for a participant that holds the
// semaphore's mutex (Curator's InterProcessSemaphoreV2: `path/locks` is a mutex, `path/leases`
// holds one ephemeral sequential node per lease, and every participant counts the leases'
// children against the maximum they agree on).
//
// All the leases it wants are made at once, in one transaction guarded by the mutex node
// (multi[check(our mutex node), create × n]): a session lost since the mutex was taken makes
// nothing, so no one can overshoot; and it takes all n or none, so two callers wanting n each
// cannot deadlock holding part (Curator takes them one at a time). Then it counts; over the
// maximum, it waits for a lease to be returned (a child watch on `leases`), holding the mutex as
// Curator does. The transaction is a protected create (one uuid for its n nodes): a reply lost
// is settled by a listing, and nodes of another session are never adopted.
#pragma once

#include "toolkit/protected_create.hpp"
#include "toolkit/steps.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zkr::detail {

struct lease_options {
    std::string leases;         ///< the semaphore's `path/leases`
    std::string guard;          ///< our node of the semaphore's mutex: leases are made only while it exists
    std::int64_t session = 0;   ///< the session that node was made on (where our leases are expected)
    std::string data;           ///< each lease node's data
    int count = 1;              ///< leases wanted, all or none
    std::function<int()> max;   ///< the maximum now (fixed, or a shared count's value)
    bool wait = true;           ///< false: one round (try)
    int max_attempts = 16;      ///< fresh transactions before giving up
};

namespace step {
struct leases_done {
    bool acquired = false;
    error_code error;                     ///< why not; none for a try that found the semaphore full
    std::vector<std::string> nodes;       ///< our lease nodes, when acquired
    std::int64_t session = 0;             ///< the session they were made on
    std::vector<unsettled_create> sweep;  ///< transactions no listing settled: look once more
};
}  // namespace step

class lease_fsm {
public:
    using done_type = step::leases_done;
    using action = basic_action<step::leases_done>;

    lease_fsm(lease_options options, std::function<std::string()> make_uuid);

    action start();
    action on(const any_reply& r, std::int64_t session);
    /// Give up (timeout, cancellation): our leases go at once where we know them.
    action abandon(error_code reason);

    bool finished() const noexcept { return phase_ == phase::finished; }
    bool cleanup_pending() const noexcept {
        return abandoned_ && ((phase_ == phase::creating && !nodes_known_) || phase_ == phase::recovering);
    }
    std::vector<std::string> owned_nodes() const { return nodes_; }
    int attempts() const noexcept { return create_.attempts(); }

private:
    enum class phase { idle, creating, making_parents, recovering, checking_owner, counting, waiting, removing_watch, finished };

    action new_attempt(std::vector<std::string> deletes = {});
    action restart(std::vector<std::string> deletes, error_code why);
    action on_multi(const reply::multi_and_listed& r, std::int64_t session);
    action on_multi_answered(const reply::multi_answered& r, std::int64_t session);
    action on_listed(const reply::listed& r, std::int64_t session);
    action on_owner(const reply::owner& r, std::int64_t session);
    action on_fired(const reply::watch_fired& r);
    action recover(const std::vector<std::string>& children);
    action evaluate(const std::vector<std::string>& children, std::int64_t session, std::vector<std::string> deletes);
    action finish(bool acquired, error_code error, std::vector<std::string> deletes = {});
    action ask(decltype(action::next) next, std::vector<std::string> deletes = {});
    void delete_ours(std::vector<std::string>& deletes);

    lease_options options_;
    protected_create create_;
    phase phase_ = phase::idle;
    std::vector<std::string> nodes_;     // our lease nodes (full paths)
    std::int64_t session_ = 0;
    bool nodes_deleted_ = false;
    bool nodes_known_ = false;           // this attempt's transaction was answered with our leases
    std::vector<std::string> candidates_;          // found by a listing after a lost reply
    std::vector<std::string> recovered_children_;  // that listing, while their owner is checked
    bool watch_armed_ = false;           // a child watch on `leases` is set
    std::optional<done_type> pending_;   // done, once the watch is removed
    std::optional<error_code> abandoned_;
};

}  // namespace zkr::detail
