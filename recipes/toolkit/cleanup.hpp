// Cleanup that must happen even when the network does not cooperate, for every recipe of one
// client: deleting nodes a recipe is done with (released holds, given-up attempts, stale
// leftovers), and sweeping for creates whose outcome no listing settled. Each is resent with
// backoff for as long as the session that made the node lives (CURATOR-678: a delete that
// failed must not leave the node); once that session is gone, so is the node (a session zkr
// gave up is closed on the server by the session layer as soon as one answers).
//
// It also orders cleanup before what comes next: a recipe that gives up while a node of its own
// cannot be named yet (a create's reply is due) holds the path's gate until it can; starts on
// that path wait for it, so nothing the client sends for that path after the caller was told
// "given up" finds the old node still queued.
#pragma once

#include "protected_create.hpp"
#include "session_port.hpp"

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace zkr::detail {

class cleanup_service : public std::enable_shared_from_this<cleanup_service> {
public:
    explicit cleanup_service(session_port& port);
    void attach();  // per_client(): subscribes to session events
    static std::shared_ptr<cleanup_service> of(session_port& port) { return per_client<cleanup_service>(port); }

    /// Deletes `path` (sent now, so ordered before anything this client sends next), resending it
    /// while the session current now lives, and never on a later one (where the path may hold
    /// another session's node). `done` (optional): no error once the node is gone; lock_lost when
    /// its session went first (and the node with it), or there is no session now; client_closed;
    /// not_empty (not resent) when the node has children.
    void guaranteed_delete(std::string path, std::optional<completion<>> done = std::nullopt);
    /// The same for an ephemeral node of `session`, named by the caller (a recipe that knows its
    /// node's session: the client may be on a later one already).
    void guaranteed_delete_on(std::int64_t session, std::string path, std::optional<completion<>> done = std::nullopt);
    /// The same for a node of no session (a persistent one outlives every session): resent on
    /// any session until it is gone, the client closes, or an error no resend can mend.
    void delete_persistent(std::string path, std::optional<completion<>> done = std::nullopt);
    /// Lists `parent` and deletes every child carrying one of the creates' prefixes, listing
    /// again while the prefix's session lives (for a persistent node's prefix, on any session).
    void sweep(const std::string& parent, std::vector<unsettled_create> creates);

    /// The gate of `path`: held while a given-up attempt there may still own a node it cannot
    /// name. enter() returns a key; the gate opens when every key is returned (leave()).
    std::uint64_t enter_gate(const std::string& path);
    void leave_gate(const std::string& path, std::uint64_t key);
    /// Runs `fn` once the gate of `path` is open: now (on this thread), or on the thread that
    /// opens it. `fn` must not block.
    void when_open(const std::string& path, std::function<void()> fn);

    std::uint64_t delete_retries() const noexcept { return delete_retries_.load(); }
    std::uint64_t swept() const noexcept { return swept_.load(); }

private:
    void on_session(const session_event& ev);
    /// `session` 0: a node of no session (delete_persistent).
    void delete_attempt(std::string path, std::int64_t session, int attempt, std::shared_ptr<completion<>> done);
    void sweep_attempt(std::string parent, std::vector<unsettled_create> creates, int attempt);
    void retry_later(int attempt, std::function<void()> again);

    std::weak_ptr<session_port> port_;
    std::shared_ptr<runtime> threads_;  // keeps the io_context of our timers alive
    subscription session_subscription_;

    std::mutex mutex_;  // a leaf: nothing is taken or called under it
    std::vector<std::weak_ptr<boost::asio::steady_timer>> retry_timers_;
    bool closed_ = false;
    struct gate {
        std::vector<std::uint64_t> keys;
        std::vector<std::function<void()>> waiting;
    };
    std::map<std::string, gate> gates_;
    std::uint64_t next_key_ = 0;

    std::atomic<std::uint64_t> delete_retries_{0}, swept_{0};
};

}  // namespace zkr::detail
