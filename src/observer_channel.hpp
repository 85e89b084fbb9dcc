// Internal: how events reach a client's zkr::observer. Whoever learns of an event (a user
// thread, the C client's completion thread, the session thread) copies it into a bounded ring
// under a leaf mutex and goes on; the client's "zkr-observer" thread takes events out in order
// and calls the observer's hooks, catching what they throw. So no hook ever runs on the C
// client's threads or the session thread, and a slow hook costs the session nothing: once the
// ring is full, events are dropped and counted.
//
// Under load the thread wakes once per linger_period rather than once per event.
//
// No allocation per event once the ring has gone round: each slot keeps its path's buffer, and
// the thread swaps slots with its own batch rather than copying them.
#pragma once

#include "zkr/observer.hpp"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zkr::detail {

class observer_channel : public std::enable_shared_from_this<observer_channel> {
public:
    static constexpr std::size_t default_capacity = 8192;
    /// Room for a path in each slot, made up front: a longer path grows its slot once.
    static constexpr std::size_t path_reserve = 128;
    /// After handing events over, the thread gathers what follows for this long before it takes
    /// them (under load: one wake-up per period, not one per event). Events reach the observer
    /// this much later at most; flush() waits for them.
    static constexpr std::chrono::milliseconds linger_period{10};
    /// How long stop() waits for the observer to take what is queued.
    static constexpr std::chrono::milliseconds stop_bound{1000};

    /// A channel and its thread. The thread holds the channel, and is detached: a hook that never
    /// returns keeps only its own thread (and the channel) alive, never a client.
    static std::shared_ptr<observer_channel> start(std::shared_ptr<zkr::observer> o, std::size_t capacity = default_capacity);
    observer_channel(std::shared_ptr<zkr::observer> o, std::size_t capacity);  // use start()
    ~observer_channel();
    observer_channel(const observer_channel&) = delete;
    observer_channel& operator=(const observer_channel&) = delete;

    /// A fresh id for a request or a recipe event (unique within the channel).
    std::uint64_t next_id() noexcept { return next_id_.fetch_add(1, std::memory_order_relaxed); }

    void connection_state_changed(connection_state s, std::int64_t session);
    void session_expired(std::int64_t session, expiry_cause cause);
    void request_started(const request_info& r);
    void retry(const request_info& r, error_code cause, int attempt, std::chrono::nanoseconds backoff);
    void request_finished(const request_info& r, error_code result, std::chrono::nanoseconds duration);
    void acquire_started(const recipe_info& r);
    void acquire_finished(const recipe_info& r, acquire_outcome o, std::chrono::nanoseconds wait);
    void released(const recipe_info& r, std::chrono::nanoseconds held);
    void lost(const recipe_info& r, loss_reason why, std::chrono::nanoseconds held);
    void leadership(const recipe_info& r, bool leader);
    void queue_depth(const recipe_info& r, std::size_t depth);
    void operation(const recipe_info& r, recipe_operation op, operation_outcome outcome, std::chrono::nanoseconds duration);

    /// Waits until every event queued before the call has been handed to the observer, or the
    /// timeout passed. False on timeout.
    bool flush(std::chrono::milliseconds timeout);
    /// Lets the thread hand over what is queued and end, waiting up to stop_bound for it (a hook
    /// that blocks longer gets the rest when it returns). Later calls return at once; later events
    /// are dropped.
    void stop();
    /// Events dropped so far (the ring was full, or the channel stopped).
    std::uint64_t dropped() const;

private:
    enum class kind : std::uint8_t {
        state, expired, request_started, retry, request_finished, acquire_started, acquire_finished, released, lost,
        leadership, queue_depth, operation,
    };
    struct event {
        kind k = kind::state;
        std::uint64_t id = 0;
        std::uint8_t sub = 0;         // operation, recipe kind
        std::uint8_t detail = 0;      // connection state, outcome, loss reason, leader, expiry cause
        std::int64_t number = 0;      // session, attempt, depth
        error_code ec{};
        std::chrono::nanoseconds duration{0};
        std::string path;
    };

    template <class Fill>
    void push(kind k, std::string_view path, Fill&& fill);
    void run();
    void deliver(const event& e);

    std::shared_ptr<zkr::observer> observer_;
    std::atomic<std::uint64_t> next_id_{1};

    mutable std::mutex mutex_;  // a leaf: nothing is taken or called under it
    std::condition_variable wake_, drained_;
    std::vector<event> ring_;
    std::size_t head_ = 0, size_ = 0;
    std::uint64_t pushed_ = 0, handed_ = 0;  // events queued / handed over so far (in order: FIFO)
    std::uint64_t dropped_ = 0, dropped_unreported_ = 0;
    bool sleeping_ = false, stopping_ = false, finished_ = false;
    bool throw_reported_ = false, drop_reported_ = false;  // observer thread only
};

}  // namespace zkr::detail
