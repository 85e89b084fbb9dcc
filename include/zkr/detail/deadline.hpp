// Internal: deadlines for every timed call of zkr's. A public call takes any std::chrono::duration
// or a time_point of any clock and converts it here, once, at the call, to a steady-clock time
// point; steady_clock::time_point::max() is "for ever". Nothing overflows: a duration too long
// for the steady clock, or a time point too far off, saturates to max(); one not positive, or
// long past, is now (a poll: the call still looks once).
#pragma once

#include <chrono>
#include <type_traits>

namespace zkr::detail {

/// The steady-clock time `timeout` after `now`, rounded up. Saturates instead of overflowing:
/// a timeout too long for the steady clock (duration::max(), hours::max(), ...) is
/// time_point::max(), a wait for ever; one not positive (or not a number) is `now`, already past.
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(std::chrono::steady_clock::time_point now,
                                                     const std::chrono::duration<Rep, Period>& timeout) {
    using steady = std::chrono::steady_clock;
    if (!(timeout > timeout.zero())) return now;
    // Compared as long double seconds, where neither side can overflow; a second to spare covers
    // the rounding there.
    using wide = std::chrono::duration<long double>;
    wide room = wide(steady::duration::max()) - wide(now.time_since_epoch());
    if (wide(timeout) >= room - wide(1)) return steady::time_point::max();
    return now + std::chrono::ceil<steady::duration>(timeout);
}

/// deadline_after(steady_clock::now(), timeout).
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(const std::chrono::duration<Rep, Period>& timeout) {
    return deadline_after(std::chrono::steady_clock::now(), timeout);
}

/// `t` (any clock) on the steady clock, converted once, at the call. Saturates as deadline_after
/// does: a clock's time_point::max(), or anything too far off, is steady time_point::max(); a time
/// long past (time_point::min(), or not a number) is now, already past.
template <class Clock, class Duration>
std::chrono::steady_clock::time_point to_steady(const std::chrono::time_point<Clock, Duration>& t) {
    using steady = std::chrono::steady_clock;
    using wide = std::chrono::duration<long double>;
    if (t == std::chrono::time_point<Clock, Duration>::max()) return steady::time_point::max();
    wide since = wide(t.time_since_epoch());
    if constexpr (std::is_same_v<Clock, steady>) {
        wide bound = wide(steady::duration::max()) - wide(1);
        if (since >= bound) return steady::time_point::max();
        if (!(since > -bound)) return steady::now();
        return steady::time_point(std::chrono::ceil<steady::duration>(t.time_since_epoch()));
    } else {
        // Exact, in the two clocks' common duration, while both times are well inside its range
        // (any real deadline); in long double seconds beyond it.
        using common = std::common_type_t<Duration, typename Clock::duration>;
        auto now = steady::now();
        auto clock_now = Clock::now().time_since_epoch();
        wide bound = wide(common::max()) / 2;
        if (since < bound && since > -bound && wide(clock_now) < bound && wide(clock_now) > -bound)
            return deadline_after(now, common(t.time_since_epoch()) - common(clock_now));
        return deadline_after(now, since - wide(clock_now));
    }
}

/// Whether `deadline` is "for ever".
inline bool is_forever(std::chrono::steady_clock::time_point deadline) noexcept {
    return deadline == std::chrono::steady_clock::time_point::max();
}

}  // namespace zkr::detail
