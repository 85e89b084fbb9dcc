// Internal: when the session sends a probe to a server that has stopped answering.
//
// ZooKeeper 3.6.0 to 3.8.0 (fixed in 3.6.4, 3.7.2 and 3.8.1: ZOOKEEPER-4537) can lose the wake-up
// of its CommitProcessor: a commit that arrives while the processor thread decides to sleep is not
// looked at until the next request reaches that server. A server with one busy client then answers
// nothing: the request it holds waits, and libzookeeper_mt sends no ping while a request is
// unanswered, so the connection times out (2/3 of the session timeout) and every operation on it
// waits that long. Any request wakes the processor, so the session sends one cheap read
// ("exists /") when a caller's request has waited long enough with nothing sent or answered
// meanwhile.
//
// Long enough: stall_probe_after, or 8 round trips as the session sees them lately if that is
// longer (a distant or slow server is not probed on every request); doubled for each probe that
// changed nothing, up to 64 times, until every request older than the last probe is answered. So a
// server that is gone gets a handful, a slow one at most a few per slow request, a healthy one
// none. The session's own requests (heartbeats, probes) are never what a probe waits on. Pure
// logic, unit tested; the session thread runs it on its heartbeat tick (session_lifecycle.cpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

namespace zkr::detail {

struct stall_probe_inputs {
    using time_point = std::chrono::steady_clock::time_point;
    bool connected = false;
    std::uint64_t handle = 0;  // a new handle (connection attempt series) starts the doubling over
    time_point now{};
    /// When the oldest caller's request the C client still holds (of the current handle) was sent.
    std::optional<time_point> oldest_unanswered{};
    time_point last_sent{};   // the latest request sent on any handle (a probe included)
    time_point last_reply{};  // the latest answer of the server
    std::chrono::steady_clock::duration round_trip_floor{};  // next_round_trip_floor's estimate
};

class stall_probe {
public:
    using duration = std::chrono::steady_clock::duration;
    static constexpr int round_trips_waited = 8;
    static constexpr int max_doublings = 6;  // 64 x the wait

    /// `after`: the least a request waits, with nothing else sent or answered, before a probe;
    /// zero turns probing off.
    explicit stall_probe(std::chrono::milliseconds after) : after_(after) {}

    /// The low end of recent round trips, given the last estimate and a new round trip: a faster
    /// one is taken at once, a slower one moves it an eighth of the way (one stalled request
    /// does not make the next stall wait long; a server that got slower is learnt in a few).
    static duration next_round_trip_floor(duration floor, duration round_trip) {
        if (round_trip.count() < 0) return floor;
        if (floor.count() <= 0 || round_trip < floor) return round_trip;
        return floor + (round_trip - floor) / 8;
    }

    /// Whether to send a probe now; if so, it is taken as sent.
    bool due(const stall_probe_inputs& in) {
        if (after_.count() <= 0) return false;
        if (in.handle != handle_) {
            handle_ = in.handle;
            probes_ = 0;
        }
        // Every request older than the last probe answered: whatever it was, it is over.
        if (probes_ > 0 && (!in.oldest_unanswered || *in.oldest_unanswered > last_probe_)) probes_ = 0;
        if (!in.connected || !in.oldest_unanswered) return false;
        duration wait = current_wait(in.round_trip_floor);
        if (in.now - *in.oldest_unanswered < wait) return false;
        if (in.now - in.last_sent < wait || in.now - in.last_reply < wait) return false;
        last_probe_ = in.now;
        ++probes_;
        return true;
    }

    /// The quiet time the next probe waits for.
    duration current_wait(duration round_trip_floor) const {
        duration base = std::max<duration>(after_, round_trip_floor * round_trips_waited);
        return base * (1 << std::min(probes_, max_doublings));
    }
    int probes_without_answer() const { return probes_; }

private:
    std::chrono::milliseconds after_;
    int probes_ = 0;
    std::uint64_t handle_ = 0;
    std::chrono::steady_clock::time_point last_probe_{};
};

}  // namespace zkr::detail
