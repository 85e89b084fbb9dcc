#include "zkr/retry.hpp"

#include "zkr/error.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace zkr::retry {
namespace {

using std::chrono::milliseconds;

std::string describe(milliseconds value) { return std::to_string(value.count()) + "ms"; }
std::string describe(int value) { return std::to_string(value); }

// Every sleep a policy gives: never a busy loop, never past what a steady-clock timer can add.
milliseconds bounded(milliseconds sleep) { return std::clamp(sleep, shortest_sleep, longest_sleep); }

// A sleep cut to the time left of a budget may be shorter than shortest_sleep: it is the last.
milliseconds within_budget(milliseconds sleep, milliseconds budget, milliseconds elapsed) {
    return std::min(bounded(sleep), budget - elapsed);
}

template <typename Value>
[[noreturn]] void throw_invalid(const char* policy_name, const char* parameter,
                                const char* requirement, Value value) {
    throw std::invalid_argument(std::string("zkr::retry::") + policy_name + ": " + parameter +
                                " must be " + requirement + ", got " + describe(value));
}

template <typename Value>
void require_non_negative(const char* policy_name, const char* parameter, Value value) {
    if (value < Value{0}) throw_invalid(policy_name, parameter, ">= 0", value);
}

void require_random_source(const char* policy_name, const random_source& random) {
    if (!random) {
        throw std::invalid_argument(std::string("zkr::retry::") + policy_name +
                                    ": random must not be empty, got an empty random_source");
    }
}

void validate_exponential(const char* policy_name, milliseconds base_sleep, int max_retries,
                          milliseconds max_sleep, const random_source& random) {
    require_non_negative(policy_name, "base_sleep", base_sleep);
    require_non_negative(policy_name, "max_retries", max_retries);
    // Also catches base_sleep and max_sleep passed the wrong way round.
    if (max_sleep < base_sleep) {
        throw std::invalid_argument(std::string("zkr::retry::") + policy_name +
                                    ": max_sleep must be >= base_sleep (" + describe(base_sleep) +
                                    "), got " + describe(max_sleep));
    }
    require_random_source(policy_name, random);
}

// Shared by both exponential policies; max_retries is already clamped.
std::optional<milliseconds> exponential_sleep(const attempt& a, milliseconds base_sleep,
                                              int max_retries, milliseconds max_sleep,
                                              const random_source& random) {
    // A negative count is a caller bug; treating it as the first retry keeps the shift defined.
    const int retry_count = std::max(a.retry_count, 0);
    if (retry_count >= max_retries) return std::nullopt;

    const std::uint64_t bound = std::uint64_t{1} << (retry_count + 1);
    // Clamp a misbehaving source into range rather than let it stretch the sleep.
    const std::uint64_t drawn = std::min(random(bound), bound - 1);
    const auto factor = static_cast<milliseconds::rep>(std::max<std::uint64_t>(drawn, 1));

    // base * factor > max_sleep exactly when factor > max_sleep / base (integer division),
    // so the cap is applied without ever forming an overflowing product.
    if (base_sleep.count() == 0) return bounded(milliseconds{0});
    if (factor > max_sleep.count() / base_sleep.count()) return bounded(max_sleep);
    return bounded(base_sleep * factor);
}

}  // namespace

random_source default_random_source() {
    return [](std::uint64_t bound) -> std::uint64_t {
        if (bound == 0) return 0;
        // One engine per thread: no lock on the retry path, and no data race when a policy
        // is shared by many operations.
        thread_local std::mt19937_64 engine = [] {
            std::random_device device;
            std::seed_seq seed{device(), device(), device(), device()};
            return std::mt19937_64(seed);
        }();
        return std::uniform_int_distribution<std::uint64_t>(0, bound - 1)(engine);
    };
}

exponential_backoff::exponential_backoff(milliseconds base_sleep, int max_retries,
                                         milliseconds max_sleep, random_source random)
    : base_sleep_(base_sleep),
      max_retries_(std::min(max_retries, max_exponential_retries)),
      max_sleep_(max_sleep),
      random_(std::move(random)) {
    validate_exponential("exponential_backoff", base_sleep, max_retries, max_sleep, random_);
}

std::optional<milliseconds> exponential_backoff::next_sleep(const attempt& a) const {
    return exponential_sleep(a, base_sleep_, max_retries_, max_sleep_, random_);
}

bounded_exponential_backoff::bounded_exponential_backoff(milliseconds base_sleep,
                                                         milliseconds max_sleep, int max_retries,
                                                         random_source random)
    : base_sleep_(base_sleep),
      max_sleep_(max_sleep),
      max_retries_(std::min(max_retries, max_exponential_retries)),
      random_(std::move(random)) {
    validate_exponential("bounded_exponential_backoff", base_sleep, max_retries, max_sleep,
                         random_);
}

std::optional<milliseconds> bounded_exponential_backoff::next_sleep(const attempt& a) const {
    return exponential_sleep(a, base_sleep_, max_retries_, max_sleep_, random_);
}

retry_n_times::retry_n_times(int n, milliseconds sleep) : n_(n), sleep_(sleep) {
    require_non_negative("retry_n_times", "n", n);
    require_non_negative("retry_n_times", "sleep", sleep);
}

std::optional<milliseconds> retry_n_times::next_sleep(const attempt& a) const {
    if (a.retry_count >= n_) return std::nullopt;
    return bounded(sleep_);
}

retry_one_time::retry_one_time(milliseconds sleep) : sleep_(sleep) {
    require_non_negative("retry_one_time", "sleep", sleep);
}

std::optional<milliseconds> retry_one_time::next_sleep(const attempt& a) const {
    if (a.retry_count >= 1) return std::nullopt;
    return bounded(sleep_);
}

retry_until_elapsed::retry_until_elapsed(milliseconds max_elapsed, milliseconds sleep)
    : max_elapsed_(max_elapsed), sleep_(sleep) {
    require_non_negative("retry_until_elapsed", "max_elapsed", max_elapsed);
    require_non_negative("retry_until_elapsed", "sleep", sleep);
}

std::optional<milliseconds> retry_until_elapsed::next_sleep(const attempt& a) const {
    // A clock that went backwards must not make the subtraction below overflow.
    const milliseconds elapsed = std::max(a.elapsed, milliseconds{0});
    if (elapsed >= max_elapsed_) return std::nullopt;
    return within_budget(sleep_, max_elapsed_, elapsed);
}

retry_forever::retry_forever(milliseconds interval) : interval_(interval) {
    if (interval <= milliseconds{0}) throw_invalid("retry_forever", "interval", "> 0", interval);
}

std::optional<milliseconds> retry_forever::next_sleep(const attempt&) const { return bounded(interval_); }

session_failed::session_failed(policy_ptr delegate) : delegate_(std::move(delegate)) {
    if (!delegate_) {
        throw std::invalid_argument(
            "zkr::retry::session_failed: delegate must not be null, got nullptr");
    }
}

std::optional<milliseconds> session_failed::next_sleep(const attempt& a) const {
    if (is_session_lost(a.error)) return std::nullopt;
    auto sleep = delegate_->next_sleep(a);
    if (!sleep) return std::nullopt;
    return bounded(*sleep);  // a delegate of the caller's own may ask for 0
}

within::within(policy_ptr delegate, std::chrono::milliseconds max_elapsed)
    : delegate_(std::move(delegate)), max_elapsed_(max_elapsed) {
    if (!delegate_) throw std::invalid_argument("zkr::retry::within: the delegate policy is null");
    if (max_elapsed_.count() < 0)
        throw std::invalid_argument("zkr::retry::within: max_elapsed must not be negative, got " +
                                    std::to_string(max_elapsed_.count()) + " ms");
}

std::optional<std::chrono::milliseconds> within::next_sleep(const attempt& a) const {
    auto elapsed = std::max(a.elapsed, std::chrono::milliseconds(0));
    if (elapsed >= max_elapsed_) return std::nullopt;
    auto sleep = delegate_->next_sleep(a);
    if (!sleep) return std::nullopt;
    return within_budget(*sleep, max_elapsed_, elapsed);
}

policy_ptr default_policy() {
    using namespace std::chrono_literals;
    return std::make_shared<within>(std::make_shared<exponential_backoff>(100ms, 5, 2000ms), 10'000ms);
}

}  // namespace zkr::retry
