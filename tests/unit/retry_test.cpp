#include "zkr/retry.hpp"

#include "zkr/error.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace retry_test {

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;
using zkr::errc;
using zkr::make_error_code;
namespace retry = zkr::retry;

namespace {

retry::attempt attempt_at(int retry_count, milliseconds elapsed = 0ms,
                          zkr::error_code error = make_error_code(errc::connection_loss)) {
    return {retry_count, elapsed, error};
}

// The two ends of the jitter range.
std::uint64_t lowest(std::uint64_t) { return 0; }
std::uint64_t highest(std::uint64_t bound) { return bound - 1; }

// Records every bound asked for and answers with a fixed function of it; the log is shared
// by all copies, since std::function copies its target.
struct recording_random {
    std::shared_ptr<std::vector<std::uint64_t>> bounds = std::make_shared<std::vector<std::uint64_t>>();
    std::uint64_t (*answer)(std::uint64_t) = highest;

    std::uint64_t operator()(std::uint64_t bound) const {
        bounds->push_back(bound);
        return answer(bound);
    }
};

// Stands in for a real policy so that session_failed's forwarding can be observed.
class counting_policy final : public retry::policy {
public:
    explicit counting_policy(std::optional<milliseconds> answer) : answer_(answer) {}

    std::optional<milliseconds> next_sleep(const retry::attempt&) const override {
        ++calls;
        return answer_;
    }

    mutable std::atomic<int> calls{0};

private:
    std::optional<milliseconds> answer_;
};

}  // namespace

TEST_CASE("exponential_backoff sleeps base * max(1, random(2^(k+1)))", "[retry]") {
    SECTION("the top of the jitter range doubles the sleep and adds one base each retry") {
        const retry::exponential_backoff policy(100ms, 5, milliseconds::max(), highest);
        CHECK(policy.next_sleep(attempt_at(0)) == 100ms);   // random(2) = 1
        CHECK(policy.next_sleep(attempt_at(1)) == 300ms);   // random(4) = 3
        CHECK(policy.next_sleep(attempt_at(2)) == 700ms);   // random(8) = 7
        CHECK(policy.next_sleep(attempt_at(3)) == 1500ms);  // random(16) = 15
        CHECK(policy.next_sleep(attempt_at(4)) == 3100ms);  // random(32) = 31
    }

    SECTION("random returning 0 still sleeps one base") {
        const retry::exponential_backoff policy(100ms, 5, milliseconds::max(), lowest);
        for (int k = 0; k < 5; ++k) CHECK(policy.next_sleep(attempt_at(k)) == 100ms);
    }

    SECTION("random returning 1 gives the same single base as 0") {
        const retry::exponential_backoff policy(100ms, 5, milliseconds::max(),
                                                [](std::uint64_t) -> std::uint64_t { return 1; });
        CHECK(policy.next_sleep(attempt_at(3)) == 100ms);
    }

    SECTION("a scripted middle value is used as is") {
        const retry::exponential_backoff policy(10ms, 5, milliseconds::max(),
                                                [](std::uint64_t) -> std::uint64_t { return 5; });
        CHECK(policy.next_sleep(attempt_at(2)) == 50ms);
    }

    SECTION("the random source is asked for [0, 2^(k+1)) and not asked when giving up") {
        recording_random random;
        const retry::exponential_backoff policy(100ms, 5, milliseconds::max(), random);
        for (int k = 0; k <= 6; ++k) (void)policy.next_sleep(attempt_at(k));
        CHECK(*random.bounds == std::vector<std::uint64_t>{2, 4, 8, 16, 32});
    }

    SECTION("a source answering out of range is held to bound - 1") {
        const retry::exponential_backoff policy(
            100ms, 5, milliseconds::max(),
            [](std::uint64_t) { return std::numeric_limits<std::uint64_t>::max(); });
        CHECK(policy.next_sleep(attempt_at(1)) == 300ms);
    }

    SECTION("the elapsed time and the error do not matter") {
        const retry::exponential_backoff policy(100ms, 5, milliseconds::max(), highest);
        CHECK(policy.next_sleep(attempt_at(2, 1h, make_error_code(errc::session_expired))) == 700ms);
    }
}

TEST_CASE("exponential_backoff gives up after max_retries", "[retry]") {
    SECTION("gives up at retry_count == max_retries") {
        const retry::exponential_backoff policy(100ms, 3, milliseconds::max(), lowest);
        CHECK(policy.next_sleep(attempt_at(2)).has_value());
        CHECK_FALSE(policy.next_sleep(attempt_at(3)).has_value());
        CHECK_FALSE(policy.next_sleep(attempt_at(100)).has_value());
    }

    SECTION("max_retries 0 never retries") {
        const retry::exponential_backoff policy(100ms, 0, milliseconds::max(), lowest);
        CHECK_FALSE(policy.next_sleep(attempt_at(0)).has_value());
    }

    SECTION("a negative retry_count is treated as the first retry") {
        recording_random random;
        const retry::exponential_backoff policy(100ms, 3, milliseconds::max(), random);
        CHECK(policy.next_sleep(attempt_at(-7)) == 100ms);
        CHECK(*random.bounds == std::vector<std::uint64_t>{2});
    }
}

TEST_CASE("exponential_backoff caps each sleep at max_sleep", "[retry]") {
    const retry::exponential_backoff policy(100ms, 6, 1000ms, highest);
    CHECK(policy.next_sleep(attempt_at(0)) == 100ms);
    CHECK(policy.next_sleep(attempt_at(1)) == 300ms);
    CHECK(policy.next_sleep(attempt_at(2)) == 700ms);
    CHECK(policy.next_sleep(attempt_at(3)) == 1000ms);  // 1500 capped
    CHECK(policy.next_sleep(attempt_at(5)) == 1000ms);  // 6300 capped
    CHECK_FALSE(policy.next_sleep(attempt_at(6)).has_value());
}

TEST_CASE("exponential_backoff clamps max_retries to 29 without overflowing", "[retry]") {
    SECTION("retries 0..28 are allowed, 29 gives up") {
        const retry::exponential_backoff policy(1ms, 1000, milliseconds::max(), lowest);
        CHECK(policy.next_sleep(attempt_at(28)).has_value());
        CHECK_FALSE(policy.next_sleep(attempt_at(29)).has_value());
        CHECK_FALSE(policy.next_sleep(attempt_at(1000)).has_value());
    }

    SECTION("the last retry asks for [0, 2^29) and sleeps base * (2^29 - 1)") {
        recording_random random;
        const retry::exponential_backoff policy(1ms, std::numeric_limits<int>::max(),
                                                milliseconds::max(), random);
        CHECK(policy.next_sleep(attempt_at(retry::max_exponential_retries - 1)) ==
              milliseconds{(std::int64_t{1} << 29) - 1});
        CHECK(*random.bounds == std::vector<std::uint64_t>{std::uint64_t{1} << 29});
    }

    SECTION("a product that would overflow saturates, at longest_sleep past max_sleep") {
        const milliseconds huge_base = milliseconds::max() / 2;  // even 3 * base overflows
        const retry::exponential_backoff policy(huge_base, 29, milliseconds::max(), highest);
        CHECK(policy.next_sleep(attempt_at(0)) == retry::longest_sleep);   // factor 1
        CHECK(policy.next_sleep(attempt_at(1)) == retry::longest_sleep);   // factor 3
        CHECK(policy.next_sleep(attempt_at(28)) == retry::longest_sleep);  // factor 2^29 - 1
        const retry::exponential_backoff capped(1h, 29, 1000h, highest);
        CHECK(capped.next_sleep(attempt_at(28)) == 1000h);  // max_sleep first, if lower
    }

    SECTION("a product of exactly max_sleep is not mistaken for an overflow") {
        const retry::exponential_backoff policy(100ms, 5, 300ms, highest);
        CHECK(policy.next_sleep(attempt_at(1)) == 300ms);
    }
}

TEST_CASE("exponential_backoff rejects bad arguments, naming them", "[retry]") {
    CHECK_THROWS_AS(retry::exponential_backoff(-1ms, 3), std::invalid_argument);
    CHECK_THROWS_WITH(retry::exponential_backoff(-1ms, 3),
                      Contains("base_sleep") && Contains("-1ms"));
    CHECK_THROWS_AS(retry::exponential_backoff(100ms, -2), std::invalid_argument);
    CHECK_THROWS_WITH(retry::exponential_backoff(100ms, -2),
                      Contains("max_retries") && Contains("-2"));
    CHECK_THROWS_AS(retry::exponential_backoff(100ms, 3, 50ms), std::invalid_argument);
    CHECK_THROWS_WITH(retry::exponential_backoff(100ms, 3, 50ms),
                      Contains("max_sleep") && Contains("50ms"));
    CHECK_THROWS_AS(retry::exponential_backoff(100ms, 3, 1s, retry::random_source{}),
                    std::invalid_argument);
    CHECK_THROWS_WITH(retry::exponential_backoff(100ms, 3, 1s, retry::random_source{}),
                      Contains("random"));
    CHECK_NOTHROW(retry::exponential_backoff(0ms, 0, 0ms));
}

TEST_CASE("bounded_exponential_backoff is exponential_backoff with a required cap", "[retry]") {
    SECTION("sleeps and cap") {
        const retry::bounded_exponential_backoff policy(100ms, 1000ms, 5, highest);
        CHECK(policy.next_sleep(attempt_at(0)) == 100ms);
        CHECK(policy.next_sleep(attempt_at(1)) == 300ms);
        CHECK(policy.next_sleep(attempt_at(2)) == 700ms);
        CHECK(policy.next_sleep(attempt_at(3)) == 1000ms);
        CHECK(policy.next_sleep(attempt_at(4)) == 1000ms);
        CHECK_FALSE(policy.next_sleep(attempt_at(5)).has_value());
    }

    SECTION("random returning 0 sleeps one base") {
        const retry::bounded_exponential_backoff policy(100ms, 1000ms, 5, lowest);
        CHECK(policy.next_sleep(attempt_at(4)) == 100ms);
    }

    SECTION("max_retries is clamped to 29 too") {
        const retry::bounded_exponential_backoff policy(1ms, 10s, 500, highest);
        CHECK(policy.next_sleep(attempt_at(28)) == 10s);
        CHECK_FALSE(policy.next_sleep(attempt_at(29)).has_value());
    }

    SECTION("bad arguments are named") {
        CHECK_THROWS_AS(retry::bounded_exponential_backoff(-5ms, 1s, 3), std::invalid_argument);
        CHECK_THROWS_WITH(retry::bounded_exponential_backoff(-5ms, 1s, 3),
                          Contains("bounded_exponential_backoff") && Contains("base_sleep") &&
                              Contains("-5ms"));
        // base and cap swapped by mistake
        CHECK_THROWS_WITH(retry::bounded_exponential_backoff(1000ms, 100ms, 3),
                          Contains("max_sleep") && Contains("100ms"));
        CHECK_THROWS_WITH(retry::bounded_exponential_backoff(100ms, 1s, -1),
                          Contains("max_retries") && Contains("-1"));
        CHECK_THROWS_WITH(retry::bounded_exponential_backoff(100ms, 1s, 3, nullptr),
                          Contains("random"));
    }
}

TEST_CASE("retry_n_times sleeps the same time n times", "[retry]") {
    SECTION("n retries, then gives up") {
        const retry::retry_n_times policy(3, 250ms);
        CHECK(policy.next_sleep(attempt_at(0)) == 250ms);
        CHECK(policy.next_sleep(attempt_at(1)) == 250ms);
        CHECK(policy.next_sleep(attempt_at(2, 10min)) == 250ms);
        CHECK_FALSE(policy.next_sleep(attempt_at(3)).has_value());
        CHECK_FALSE(policy.next_sleep(attempt_at(4)).has_value());
    }

    SECTION("n 0 never retries; sleep 0 is raised to shortest_sleep (no busy loop)") {
        CHECK_FALSE(retry::retry_n_times(0, 10ms).next_sleep(attempt_at(0)).has_value());
        CHECK(retry::retry_n_times(2, 0ms).next_sleep(attempt_at(1)) == retry::shortest_sleep);
    }

    SECTION("bad arguments are named") {
        CHECK_THROWS_AS(retry::retry_n_times(-1, 10ms), std::invalid_argument);
        CHECK_THROWS_WITH(retry::retry_n_times(-1, 10ms), Contains("n must") && Contains("-1"));
        CHECK_THROWS_AS(retry::retry_n_times(3, -10ms), std::invalid_argument);
        CHECK_THROWS_WITH(retry::retry_n_times(3, -10ms), Contains("sleep") && Contains("-10ms"));
    }
}

TEST_CASE("retry_one_time retries exactly once", "[retry]") {
    const retry::retry_one_time policy(40ms);
    CHECK(policy.next_sleep(attempt_at(0)) == 40ms);
    CHECK_FALSE(policy.next_sleep(attempt_at(1)).has_value());
    CHECK_FALSE(policy.next_sleep(attempt_at(2)).has_value());

    CHECK_THROWS_AS(retry::retry_one_time(-3ms), std::invalid_argument);
    CHECK_THROWS_WITH(retry::retry_one_time(-3ms), Contains("sleep") && Contains("-3ms"));
}

TEST_CASE("retry_until_elapsed retries until the deadline and never sleeps past it", "[retry]") {
    const retry::retry_until_elapsed policy(1000ms, 300ms);

    SECTION("a full sleep while it fits before the deadline") {
        CHECK(policy.next_sleep(attempt_at(0, 0ms)) == 300ms);
        CHECK(policy.next_sleep(attempt_at(1, 700ms)) == 300ms);  // ends exactly at the deadline
    }

    SECTION("the last sleep is trimmed to the time left") {
        CHECK(policy.next_sleep(attempt_at(2, 800ms)) == 200ms);
        CHECK(policy.next_sleep(attempt_at(3, 999ms)) == 1ms);
    }

    SECTION("gives up once elapsed reaches max_elapsed") {
        CHECK_FALSE(policy.next_sleep(attempt_at(3, 1000ms)).has_value());
        CHECK_FALSE(policy.next_sleep(attempt_at(3, 5000ms)).has_value());
    }

    SECTION("the retry count does not matter") {
        CHECK(policy.next_sleep(attempt_at(1'000'000, 10ms)) == 300ms);
    }

    SECTION("a negative elapsed (clock stepped back) counts as zero") {
        CHECK(policy.next_sleep(attempt_at(0, -50ms)) == 300ms);
        CHECK(policy.next_sleep(attempt_at(0, milliseconds::min())) == 300ms);
    }

    SECTION("max_elapsed 0 never retries") {
        CHECK_FALSE(retry::retry_until_elapsed(0ms, 10ms).next_sleep(attempt_at(0)).has_value());
    }

    SECTION("bad arguments are named") {
        CHECK_THROWS_AS(retry::retry_until_elapsed(-1ms, 10ms), std::invalid_argument);
        CHECK_THROWS_WITH(retry::retry_until_elapsed(-1ms, 10ms),
                          Contains("max_elapsed") && Contains("-1ms"));
        CHECK_THROWS_WITH(retry::retry_until_elapsed(1s, -10ms),
                          Contains("sleep") && Contains("-10ms"));
    }
}

TEST_CASE("retry_forever never gives up", "[retry]") {
    const retry::retry_forever policy(500ms);
    CHECK(policy.next_sleep(attempt_at(0)) == 500ms);
    CHECK(policy.next_sleep(attempt_at(std::numeric_limits<int>::max(), 1000h)) == 500ms);
    CHECK(policy.next_sleep(attempt_at(3, 0ms, make_error_code(errc::session_expired))) == 500ms);

    CHECK_THROWS_AS(retry::retry_forever(0ms), std::invalid_argument);
    CHECK_THROWS_WITH(retry::retry_forever(0ms), Contains("interval") && Contains("0ms"));
    CHECK_THROWS_WITH(retry::retry_forever(-20ms), Contains("interval") && Contains("-20ms"));
}

TEST_CASE("session_failed refuses lost sessions and defers everything else", "[retry]") {
    const auto delegate = std::make_shared<counting_policy>(77ms);
    const retry::session_failed policy(delegate);

    SECTION("session expired and client closed are never retried, nor passed on") {
        CHECK_FALSE(
            policy.next_sleep(attempt_at(0, 0ms, make_error_code(errc::session_expired))).has_value());
        CHECK_FALSE(
            policy.next_sleep(attempt_at(0, 0ms, make_error_code(errc::client_closed))).has_value());
        CHECK(delegate->calls == 0);
    }

    SECTION("connection loss goes to the delegate") {
        CHECK(policy.next_sleep(attempt_at(0, 0ms, make_error_code(errc::connection_loss))) == 77ms);
        CHECK(delegate->calls == 1);
    }

    SECTION("errors from other categories go to the delegate") {
        CHECK(policy.next_sleep(attempt_at(0, 0ms, zkr::error_code(boost::system::errc::make_error_code(boost::system::errc::timed_out)))) ==
              77ms);
        CHECK(delegate->calls == 1);
    }

    SECTION("the delegate giving up is passed through") {
        const retry::session_failed wrapped_give_up(std::make_shared<counting_policy>(std::nullopt));
        CHECK_FALSE(wrapped_give_up.next_sleep(attempt_at(0)).has_value());
    }

    SECTION("it composes with a real policy") {
        const retry::session_failed wrapped(std::make_shared<retry::retry_n_times>(2, 10ms));
        CHECK(wrapped.next_sleep(attempt_at(1)) == 10ms);
        CHECK_FALSE(wrapped.next_sleep(attempt_at(2)).has_value());
        CHECK_FALSE(
            wrapped.next_sleep(attempt_at(0, 0ms, make_error_code(errc::session_expired))).has_value());
    }

    SECTION("a null delegate is rejected by name") {
        CHECK_THROWS_AS(retry::session_failed(nullptr), std::invalid_argument);
        CHECK_THROWS_WITH(retry::session_failed(nullptr), Contains("delegate"));
    }
}

TEST_CASE("default_policy is exponential backoff: 100ms base, 5 retries, 2000ms cap, within 10 s", "[retry]") {
    const retry::policy_ptr policy = retry::default_policy();
    REQUIRE(policy != nullptr);
    // The jitter is real here, so only its range is checked: [base, min(base * (2^(k+1) - 1), cap)].
    const milliseconds upper[] = {100ms, 300ms, 700ms, 1500ms, 2000ms};
    for (int k = 0; k < 5; ++k) {
        for (int draw = 0; draw < 20; ++draw) {
            const auto sleep = policy->next_sleep(attempt_at(k));
            REQUIRE(sleep.has_value());
            CHECK(*sleep >= 100ms);
            CHECK(*sleep <= upper[k]);
        }
    }
    CHECK_FALSE(policy->next_sleep(attempt_at(5)).has_value());
    // However few retries so far: none begins 10 s after the first try, and none sleeps past it.
    CHECK_FALSE(policy->next_sleep(attempt_at(1, 10'000ms)).has_value());
    auto last = policy->next_sleep(attempt_at(4, 9'950ms));
    REQUIRE(last.has_value());
    CHECK(*last <= 50ms);
}

TEST_CASE("within bounds a delegate in time and trims the last sleep", "[retry]") {
    auto delegate = std::make_shared<retry::retry_n_times>(100, 300ms);
    retry::within policy(delegate, 1000ms);
    CHECK(policy.next_sleep(attempt_at(0, 0ms)) == 300ms);
    CHECK(policy.next_sleep(attempt_at(50, 800ms)) == 200ms);  // trimmed to the time left
    CHECK_FALSE(policy.next_sleep(attempt_at(1, 1000ms)).has_value());
    CHECK_FALSE(policy.next_sleep(attempt_at(100, 0ms)).has_value());  // the delegate gives up first
    CHECK(policy.next_sleep(attempt_at(0, -5ms)) == 300ms);  // a clock stepped back counts as zero
    CHECK_THROWS_WITH(retry::within(nullptr, 1s), Catch::Contains("null"));
    CHECK_THROWS_WITH(retry::within(delegate, -1ms), Catch::Contains("max_elapsed"));
}

TEST_CASE("default_random_source stays within bound", "[retry]") {
    const retry::random_source random = retry::default_random_source();

    SECTION("single thread") {
        CHECK(random(0) == 0);  // empty range, documented
        for (int i = 0; i < 100; ++i) CHECK(random(1) == 0);
        std::set<std::uint64_t> seen;
        for (int i = 0; i < 1000; ++i) {
            const std::uint64_t value = random(7);
            CHECK(value < 7);
            seen.insert(value);
        }
        CHECK(seen.size() > 1);  // 1000 draws of 7 values all alike would mean a broken engine
        const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
        for (int i = 0; i < 100; ++i) CHECK(random(huge) < huge);
    }

    SECTION("many threads sharing one source, and one policy built on it") {
        // Catch's assertions are not thread-safe, so the threads only count and the checks
        // happen after joining.
        const retry::exponential_backoff shared_policy(1ms, 10, milliseconds::max(), random);
        std::atomic<int> out_of_range{0};
        std::atomic<int> draws{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t) {
            threads.emplace_back([&, t] {
                for (int i = 0; i < 2000; ++i) {
                    const std::uint64_t bound = static_cast<std::uint64_t>(t * 37 + i % 101 + 1);
                    if (random(bound) >= bound) ++out_of_range;
                    const auto sleep = shared_policy.next_sleep(attempt_at(i % 10));
                    const auto upper = std::max(milliseconds{(std::int64_t{1} << (i % 10 + 1)) - 1}, retry::shortest_sleep);
                    if (!sleep || *sleep < 1ms || *sleep > upper) ++out_of_range;
                    ++draws;
                }
            });
        }
        for (auto& thread : threads) thread.join();
        CHECK(draws == 8 * 2000);
        CHECK(out_of_range == 0);
    }
}

namespace {

// What zkr's retry timer does with a sleep: it must fit the steady clock, added to now.
bool fits_a_timer(milliseconds sleep) {
    using steady = std::chrono::steady_clock;
    return std::chrono::duration<long double>(sleep) <
           std::chrono::duration<long double>(steady::time_point::max() - steady::now());
}

}  // namespace

TEST_CASE("no policy retries in a busy loop: every sleep is at least 10 ms", "[retry]") {
    const retry::retry_n_times n_times(std::numeric_limits<int>::max(), 0ms);
    const retry::retry_until_elapsed until(milliseconds::max(), 0ms);
    const retry::exponential_backoff exponential(0ms, 29, 0ms);
    const retry::bounded_exponential_backoff bounded(0ms, 0ms, 29);
    const retry::retry_one_time once(0ms);
    const retry::session_failed wrapped(std::make_shared<retry::retry_n_times>(std::numeric_limits<int>::max(), 0ms));
    const retry::within within(std::make_shared<counting_policy>(0ms), milliseconds::max());
    for (const retry::policy* p : std::initializer_list<const retry::policy*>{&n_times, &until, &exponential, &bounded,
                                                                             &once, &wrapped, &within}) {
        for (int k : {0, 1, 28}) {
            auto sleep = p->next_sleep(attempt_at(k, 5ms));
            if (k > 0 && p == &once) continue;
            REQUIRE(sleep.has_value());
            CHECK(*sleep >= 10ms);
        }
    }
    CHECK(retry::retry_n_times(std::numeric_limits<int>::max(), 0ms).next_sleep(attempt_at(1'000'000)) >= 10ms);
}

TEST_CASE("the time left may still cut the last sleep short: it is the last", "[retry]") {
    const retry::retry_until_elapsed until(1000ms, 0ms);
    CHECK(until.next_sleep(attempt_at(3, 999ms)) == 1ms);
    CHECK_FALSE(until.next_sleep(attempt_at(4, 1000ms)).has_value());
    const retry::within within(std::make_shared<retry::retry_n_times>(100, 0ms), 1000ms);
    CHECK(within.next_sleep(attempt_at(3, 995ms)) == 5ms);
    CHECK(within.next_sleep(attempt_at(3, 100ms)) >= 10ms);
}

TEST_CASE("every sleep fits a steady-clock timer, however large the policy's numbers", "[retry]") {
    const retry::exponential_backoff exponential(milliseconds::max() / 2, 29, milliseconds::max(), highest);
    const retry::exponential_backoff year_base(std::chrono::hours(24 * 365), 29, milliseconds::max(), highest);
    const retry::bounded_exponential_backoff bounded(1ms, milliseconds::max(), 29, highest);
    const retry::retry_n_times n_times(3, milliseconds::max());
    const retry::retry_one_time once(milliseconds::max());
    const retry::retry_until_elapsed until(milliseconds::max(), milliseconds::max());
    const retry::retry_forever forever(milliseconds::max());
    const retry::within within(std::make_shared<counting_policy>(milliseconds::max()), milliseconds::max());
    const retry::session_failed wrapped(std::make_shared<counting_policy>(milliseconds::max()));
    for (const retry::policy* p : std::initializer_list<const retry::policy*>{
             &exponential, &year_base, &bounded, &n_times, &once, &until, &forever, &within, &wrapped}) {
        for (int k : {0, 1, 2, 28}) {
            auto sleep = p->next_sleep(attempt_at(p == &once || p == &n_times ? 0 : k, 0ms));
            REQUIRE(sleep.has_value());
            CHECK(fits_a_timer(*sleep));
        }
    }
    // Cut to a sleep that still lasts for ever, in practice.
    for (auto sleep : {exponential.next_sleep(attempt_at(1)), year_base.next_sleep(attempt_at(28)), n_times.next_sleep(attempt_at(0)),
                       once.next_sleep(attempt_at(0)), until.next_sleep(attempt_at(0)), forever.next_sleep(attempt_at(0)),
                       within.next_sleep(attempt_at(0)), wrapped.next_sleep(attempt_at(0))}) {
        REQUIRE(sleep.has_value());
        CHECK(*sleep >= std::chrono::hours(24 * 365 * 50));
    }
}

TEST_CASE("the bounds every sleep is kept within", "[retry]") {
    CHECK(retry::shortest_sleep == 10ms);
    CHECK(retry::longest_sleep == std::chrono::hours(24 * 365 * 100));
    CHECK(retry::exponential_backoff(0ms, 3, 0ms).next_sleep(attempt_at(0)) == retry::shortest_sleep);
    CHECK(retry::retry_forever(1ms).next_sleep(attempt_at(0)) == retry::shortest_sleep);
    CHECK(retry::retry_forever(milliseconds::max()).next_sleep(attempt_at(0)) == retry::longest_sleep);
}

}  // namespace retry_test
