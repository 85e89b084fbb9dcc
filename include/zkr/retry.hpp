/// \file
/// zkr::retry — retry policies (Curator's RetryPolicy family): how long to sleep before the
/// next try of a failed operation, and when to give up.
///
/// Which errors are worth retrying at all is the caller's decision (see zkr::is_retryable);
/// a policy only budgets retries by count and time. The one exception is session_failed,
/// which refuses to retry once the session is lost.
#pragma once
#include "zkr/export.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include "zkr/error.hpp"

/// Retry policies (Curator's RetryPolicy family): how long to sleep before the next try of a
/// failed operation, and when to give up. client_options::retry_policy takes one.
namespace zkr::retry {

/// What a policy is told when an operation has just failed.
struct attempt {
    int retry_count;                    ///< 0 for the first retry (i.e. after the first failure)
    std::chrono::milliseconds elapsed;  ///< time since the operation's first try started, on the caller's clock
    zkr::error_code error;              ///< the failure that prompts this retry decision
};

/// Uniform integer in [0, bound). Injected so that jitter is deterministic in tests.
using random_source = std::function<std::uint64_t(std::uint64_t bound)>;

/// A random_source safe to call from many threads at once; each thread draws from its own
/// engine seeded from std::random_device. A bound of 0 (an empty range) yields 0.
ZKR_EXPORT random_source default_random_source();

/// Decides whether, and after how long a sleep, a failed operation is tried again.
class ZKR_EXPORT policy {
public:
    virtual ~policy() = default;

    /// Sleep before the next try, or std::nullopt to give up. Thread-safe: one policy may be
    /// shared by many operations.
    virtual std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const = 0;
};

/// How policies are passed around and shared (client_options::retry_policy).
using policy_ptr = std::shared_ptr<const policy>;

/// The shortest sleep a policy of zkr's gives before a retry: a shorter one, 0 included, is
/// raised to it. A failure that comes back at once (no server up, a handle whose session has
/// expired) would otherwise be retried in a busy loop, e.g. under retry_n_times(INT_MAX, 0ms).
/// Only a sleep cut to the time left of a budget (within, retry_until_elapsed) may be shorter:
/// it is the last one.
inline constexpr std::chrono::milliseconds shortest_sleep{10};

/// The longest sleep a policy of zkr's gives (100 years of 365 days): a longer one (a large
/// max_sleep or interval, milliseconds::max(), an exponential product past it) is cut to it. That
/// still waits for ever in practice, and added to the steady clock's now it cannot overflow
/// (its range is about 292 years of nanoseconds).
inline constexpr std::chrono::milliseconds longest_sleep = std::chrono::hours(24 * 365 * 100);

/// The most retries the exponential policies allow. As in Curator, a larger max_retries is
/// clamped to it: the jitter range 1 << (retry_count + 1) must stay well within 32 bits, and
/// 29 doublings of even a 1 ms base already exceed six days.
inline constexpr int max_exponential_retries = 29;

/// Curator's ExponentialBackoffRetry: before retry k (from 0) sleeps
///     base_sleep * max(1, random(1 << (k + 1)))
/// capped at max_sleep; gives up once k >= max_retries (clamped to max_exponential_retries).
/// The product saturates at max_sleep instead of overflowing; every sleep is kept within
/// [shortest_sleep, longest_sleep] (a base_sleep of 0 sleeps shortest_sleep).
/// Throws std::invalid_argument for a negative base_sleep or max_retries, a max_sleep below
/// base_sleep, or an empty random source.
class ZKR_EXPORT exponential_backoff final : public policy {
public:
    /// See the class; max_sleep defaults to no cap (but longest_sleep), random to
    /// default_random_source().
    exponential_backoff(std::chrono::milliseconds base_sleep, int max_retries,
                        std::chrono::milliseconds max_sleep = std::chrono::milliseconds::max(),
                        random_source random = default_random_source());

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    std::chrono::milliseconds base_sleep_;
    int max_retries_;
    std::chrono::milliseconds max_sleep_;
    random_source random_;
};

/// Curator's BoundedExponentialBackoffRetry: exponential_backoff with a cap that must be given.
class ZKR_EXPORT bounded_exponential_backoff final : public policy {
public:
    /// As exponential_backoff(base_sleep, max_retries, max_sleep, random); the same checks.
    bounded_exponential_backoff(std::chrono::milliseconds base_sleep,
                                std::chrono::milliseconds max_sleep, int max_retries,
                                random_source random = default_random_source());

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    std::chrono::milliseconds base_sleep_;
    std::chrono::milliseconds max_sleep_;
    int max_retries_;
    random_source random_;
};

/// Retries up to n times, sleeping the same time before each (at least shortest_sleep, at most
/// longest_sleep). n == 0 never retries. Throws std::invalid_argument for a negative n or sleep.
class ZKR_EXPORT retry_n_times final : public policy {
public:
    /// At most `n` retries, `sleep` before each.
    retry_n_times(int n, std::chrono::milliseconds sleep);

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    int n_;
    std::chrono::milliseconds sleep_;
};

/// Retries once, after the given sleep (at least shortest_sleep, at most longest_sleep).
/// Throws std::invalid_argument for a negative sleep.
class ZKR_EXPORT retry_one_time final : public policy {
public:
    /// One retry, after `sleep`.
    explicit retry_one_time(std::chrono::milliseconds sleep);

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    std::chrono::milliseconds sleep_;
};

/// Retries, sleeping `sleep` each time (at least shortest_sleep, at most longest_sleep), until
/// a.elapsed reaches max_elapsed. Never sleeps past that deadline: the last sleep is trimmed to
/// the time left.
/// Throws std::invalid_argument for a negative max_elapsed or sleep.
class ZKR_EXPORT retry_until_elapsed final : public policy {
public:
    /// Retries until `max_elapsed` has passed since the first try, `sleep` before each.
    retry_until_elapsed(std::chrono::milliseconds max_elapsed, std::chrono::milliseconds sleep);

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    std::chrono::milliseconds max_elapsed_;
    std::chrono::milliseconds sleep_;
};

/// Never gives up; sleeps `interval` before each retry (at least shortest_sleep, at most
/// longest_sleep). Throws std::invalid_argument unless interval > 0: a zero interval would
/// hammer the ensemble forever.
class ZKR_EXPORT retry_forever final : public policy {
public:
    /// Retries forever, `interval` before each.
    explicit retry_forever(std::chrono::milliseconds interval);

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    std::chrono::milliseconds interval_;
};

/// Wraps another policy, but never retries once the session is lost (zkr::is_session_lost):
/// nothing tried on a dead session can succeed, and its locks and ephemerals are gone anyway.
/// Every other failure is left to the delegate, its sleeps kept within [shortest_sleep,
/// longest_sleep]. Throws std::invalid_argument for a null delegate.
class ZKR_EXPORT session_failed final : public policy {
public:
    /// Leaves every decision to `delegate`, except that a lost session is never retried.
    explicit session_failed(policy_ptr delegate);

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    policy_ptr delegate_;
};

/// Wraps another policy and gives up once a.elapsed reaches `max_elapsed`, trimming the last
/// sleep to the time left (the delegate's sleeps are kept within [shortest_sleep,
/// longest_sleep] first). Bounds a count-based policy in time: when the network is silent, each
/// attempt itself lasts until the C client's connect timeout (2/3 of the session timeout), so
/// retries alone say little about how long a call takes. Throws std::invalid_argument for a
/// null delegate or a negative max_elapsed.
class ZKR_EXPORT within final : public policy {
public:
    /// Leaves every decision to `delegate` until `max_elapsed` has passed since the first try.
    within(policy_ptr delegate, std::chrono::milliseconds max_elapsed);

    std::optional<std::chrono::milliseconds> next_sleep(const attempt& a) const override;

private:
    policy_ptr delegate_;
    std::chrono::milliseconds max_elapsed_;
};

/// The policy zkr uses when none is given: exponential_backoff with a 100 ms base, at most
/// 5 retries and sleeps capped at 2000 ms (at most 4.6 s of sleeping in all), and no retry
/// begun once 10 s have passed since the first try.
ZKR_EXPORT policy_ptr default_policy();

}  // namespace zkr::retry
