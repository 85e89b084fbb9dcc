// When the session probes a server that stopped answering (src/stall_probe.hpp).
#include "stall_probe.hpp"

#include <catch2/catch.hpp>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace stall_probe_test {

using namespace std::chrono_literals;
using zkr::detail::stall_probe;
using zkr::detail::stall_probe_inputs;
using clock_type = std::chrono::steady_clock;

namespace {
// A caller's request sent at t0 (and nothing since), the latest answer at t0 too, `waited` later,
// on handle 1, round trips of 1 ms.
stall_probe_inputs waiting(clock_type::time_point t0, clock_type::duration waited) {
    stall_probe_inputs in;
    in.connected = true;
    in.handle = 1;
    in.now = t0 + waited;
    in.oldest_unanswered = t0;
    in.last_sent = t0;
    in.last_reply = t0;
    in.round_trip_floor = 1ms;
    return in;
}
// A probe just went out at in.now; `later` passes with no answer.
void probe_sent_then(stall_probe_inputs& in, clock_type::duration later) {
    in.last_sent = in.now;
    in.now += later;
}
}  // namespace

TEST_CASE("stall probe: a request left unanswered for the wait gets one probe, not before", "[stall_probe]") {
    stall_probe probe(100ms);
    auto t0 = clock_type::time_point(10s);
    CHECK_FALSE(probe.due(waiting(t0, 99ms)));
    CHECK(probe.due(waiting(t0, 100ms)));
    CHECK(probe.probes_without_answer() == 1);
}

TEST_CASE("stall probe: nothing waiting, not connected or turned off: no probe", "[stall_probe]") {
    auto t0 = clock_type::time_point(10s);
    stall_probe probe(100ms);
    auto idle = waiting(t0, 10s);
    idle.oldest_unanswered.reset();  // heartbeats and probes in flight are not counted in it
    CHECK_FALSE(probe.due(idle));
    auto down = waiting(t0, 10s);
    down.connected = false;
    CHECK_FALSE(probe.due(down));
    stall_probe off(0ms);
    CHECK_FALSE(off.due(waiting(t0, 1h)));
}

TEST_CASE("stall probe: a send or an answer within the wait holds it back", "[stall_probe]") {
    auto t0 = clock_type::time_point(10s);
    stall_probe probe(100ms);
    auto sent_since = waiting(t0, 500ms);
    sent_since.last_sent = t0 + 450ms;  // the session is busy sending: the server will be woken anyway
    CHECK_FALSE(probe.due(sent_since));
    auto answered_since = waiting(t0, 500ms);
    answered_since.last_reply = t0 + 450ms;  // answers still stream in: a long pipeline, not a stall
    CHECK_FALSE(probe.due(answered_since));
    CHECK(probe.probes_without_answer() == 0);
}

TEST_CASE("stall probe: a distant or slow server waits 8 of its round trips, not stall_probe_after", "[stall_probe]") {
    auto t0 = clock_type::time_point(10s);
    stall_probe probe(100ms);
    auto far = waiting(t0, 1100ms);
    far.round_trip_floor = 150ms;  // a server across a continent: 1.2 s
    CHECK_FALSE(probe.due(far));
    far.now = t0 + 1200ms;
    CHECK(probe.due(far));
}

TEST_CASE("stall probe: the round-trip floor takes a faster round trip at once and a slower one an eighth at a time",
          "[stall_probe]") {
    using floor_of = clock_type::duration;
    CHECK(stall_probe::next_round_trip_floor(floor_of::zero(), 5ms) == 5ms);  // the first one
    CHECK(stall_probe::next_round_trip_floor(5ms, 1ms) == 1ms);
    CHECK(stall_probe::next_round_trip_floor(1ms, 801ms) == 101ms);  // one stalled request: a little
    CHECK(stall_probe::next_round_trip_floor(1ms, -1ms) == 1ms);     // a clock oddity: ignored
    floor_of f = 1ms;
    for (int i = 0; i < 40; ++i) f = stall_probe::next_round_trip_floor(f, 150ms);
    CHECK(f > 149ms);  // a server that got slower is learnt
    CHECK(f <= 150ms);
}

TEST_CASE("stall probe: each probe that changes nothing doubles the wait, up to 64 times", "[stall_probe]") {
    auto t0 = clock_type::time_point(10s);
    stall_probe probe(100ms);
    auto in = waiting(t0, 100ms);
    REQUIRE(probe.due(in));
    probe_sent_then(in, 199ms);
    CHECK_FALSE(probe.due(in));
    in.now += 1ms;  // 200 ms after the first probe
    REQUIRE(probe.due(in));
    CHECK(probe.probes_without_answer() == 2);
    CHECK(probe.current_wait(1ms) == 400ms);
    for (int i = 0; i < 10; ++i) {
        probe_sent_then(in, probe.current_wait(1ms));
        REQUIRE(probe.due(in));
    }
    CHECK(probe.current_wait(1ms) == 6400ms);  // capped
}

TEST_CASE("stall probe: answers to the probes alone do not start it over, the stalled request's answer does",
          "[stall_probe]") {
    // A slow server (round trips of 2 s, not learnt yet): the probes' own answers come in, but the
    // request they were about is still there, so the doubling goes on and no stream of probes follows.
    auto t0 = clock_type::time_point(10s);
    stall_probe probe(100ms);
    auto in = waiting(t0, 100ms);
    REQUIRE(probe.due(in));
    probe_sent_then(in, 200ms);
    REQUIRE(probe.due(in));
    probe_sent_then(in, 400ms);
    in.last_reply = in.now - 400ms + 1ms;  // an answer (to a probe) right after the last probe
    in.now += 1ms;
    CHECK(probe.due(in));
    CHECK(probe.probes_without_answer() == 3);
    // The stalled request is answered: the next request's stall waits 100 ms again.
    auto next = waiting(in.now + 1s, 100ms);
    CHECK(probe.due(next));
    CHECK(probe.probes_without_answer() == 1);
}

TEST_CASE("stall probe: a new handle starts the doubling over", "[stall_probe]") {
    auto t0 = clock_type::time_point(10s);
    stall_probe probe(100ms);
    auto in = waiting(t0, 100ms);
    for (int i = 0; i < 6; ++i) {
        REQUIRE(probe.due(in));
        probe_sent_then(in, probe.current_wait(1ms));
    }
    CHECK(probe.probes_without_answer() == 6);
    // The session was lost; the first request of the next one waits 100 ms, not 6.4 s.
    auto fresh = waiting(t0, 100ms);
    fresh.handle = 2;
    CHECK(probe.due(fresh));
    CHECK(probe.probes_without_answer() == 1);
}

}  // namespace stall_probe_test
