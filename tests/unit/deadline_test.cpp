// The lock's deadline helpers: a timeout or a time point too far off to represent on the steady
// clock saturates (waits for ever) instead of overflowing into the past (issue 19, item 5).
#include "zkr/detail/lock_ops.hpp"
#include "zkr/lock_view.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <limits>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace deadline_test {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using system_clock = std::chrono::system_clock;

namespace {

// lock_view's own helper is protected: reach it the way zkr::mutex does.
struct view_probe : zkr::lock_view {
    using lock_view::deadline_after;
};

template <class Rep, class Period>
steady::time_point after(const std::chrono::duration<Rep, Period>& d) {
    return view_probe::deadline_after(d);
}

}  // namespace

TEST_CASE("a timeout too long for the steady clock waits for ever", "[deadline]") {
    CHECK(after(steady::duration::max()) == steady::time_point::max());
    CHECK(after(std::chrono::hours::max()) == steady::time_point::max());
    CHECK(after(std::chrono::milliseconds::max()) == steady::time_point::max());
    CHECK(after(std::chrono::duration<double>(1e300)) == steady::time_point::max());
    CHECK(after(std::chrono::duration<double>(std::numeric_limits<double>::infinity())) == steady::time_point::max());
    // Just past what the clock can still add to now.
    CHECK(after(steady::time_point::max() - steady::now()) == steady::time_point::max());
}

TEST_CASE("an ordinary timeout is now plus the timeout, rounded up", "[deadline]") {
    auto before = steady::now();
    auto deadline = after(5s);
    auto later = steady::now();
    CHECK(deadline >= before + 5s);
    CHECK(deadline <= later + 5s);
    // Rounded up, never down: a sub-tick timeout is not zero.
    before = steady::now();
    CHECK(after(std::chrono::duration<double, std::nano>(0.25)) > before);
}

TEST_CASE("a negative, zero or not-a-number timeout is already past, without overflowing", "[deadline]") {
    auto now = steady::now();
    for (auto d : {after(0s), after(-5s), after(std::chrono::hours::min()), after(steady::duration::min()),
                   after(std::chrono::duration<double>(-1e300)),
                   after(std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN()))}) {
        CHECK(d <= steady::now());
        CHECK(d >= now - 1s);  // not wrapped around to the far past, let alone the far future
    }
}

TEST_CASE("a time point too far off for the steady clock waits for ever", "[deadline]") {
    using zkr::detail::to_steady;
    CHECK(to_steady(steady::time_point::max()) == steady::time_point::max());
    CHECK(to_steady(std::chrono::time_point<steady, std::chrono::hours>::max()) == steady::time_point::max());
    CHECK(to_steady(system_clock::time_point::max()) == steady::time_point::max());
    CHECK(to_steady(std::chrono::time_point<system_clock, std::chrono::hours>::max()) == steady::time_point::max());
    CHECK(to_steady(std::chrono::time_point<system_clock, std::chrono::duration<double>>(
              std::chrono::duration<double>(1e300))) == steady::time_point::max());
}

TEST_CASE("a time point in the far past is already past, without overflowing", "[deadline]") {
    using zkr::detail::to_steady;
    auto now = steady::now();
    for (auto d : {to_steady(system_clock::time_point::min()),
                   to_steady(std::chrono::time_point<system_clock, std::chrono::hours>::min()),
                   to_steady(std::chrono::time_point<steady, std::chrono::hours>::min()),
                   to_steady(system_clock::time_point{})}) {
        CHECK(d <= steady::now());
        CHECK(d < now + 1s);
    }
}

TEST_CASE("an ordinary time point of another clock is converted once, at the call", "[deadline]") {
    using zkr::detail::to_steady;
    auto before = steady::now();
    auto deadline = to_steady(system_clock::now() + 3s);
    auto later = steady::now();
    // The two clocks are read a moment apart, and the thread may lose its turn between the reads
    // (tens of milliseconds on a loaded machine): 50 ms either way, against the seconds a
    // conversion made twice or at the wait's end would be off by.
    CHECK(deadline >= before + 3s - 50ms);
    CHECK(deadline <= later + 3s + 50ms);
    auto in_steady = steady::now() + 2s;
    CHECK(to_steady(in_steady) == in_steady);
    auto coarse = std::chrono::time_point_cast<std::chrono::seconds>(steady::now()) + 10s;
    CHECK(to_steady(coarse) == coarse);
}

}  // namespace deadline_test
