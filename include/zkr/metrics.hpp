/// \file
/// zkr::metrics — a built-in zkr::observer that counts what clients do: counters, gauges and
/// fixed-bucket histograms, read by programs (snapshot()) or scraped by Prometheus
/// (prometheus_text()). docs/observability.md lists every metric and what it means.
#pragma once
#include "zkr/export.hpp"

#include "zkr/observer.hpp"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkr {

/// What zkr::metrics records.
struct metrics_options {
    /// Adds a `path` label (the lock, semaphore or latch path) to the recipe metrics. Off by
    /// default: each path is a series of its own, so turn it on only for a bounded set of named
    /// locks, never for paths made per request.
    bool path_label = false;
};

/// One value of a metric, as Prometheus names it: a histogram gives `<name>_bucket` (label
/// `le`), `<name>_sum` and `<name>_count`.
struct metric_sample {
    std::string name;                                         ///< e.g. "zkr_lock_acquire_seconds_count"
    std::vector<std::pair<std::string, std::string>> labels;  ///< in the order printed
    double value = 0;                                         ///< the sample's value
};

/// The metrics at one moment.
struct ZKR_EXPORT metrics_snapshot {
    std::vector<metric_sample> samples;  ///< by metric name, then labels

    /// The sum of the samples named `name` whose labels include every one of `labels` (0 if
    /// none): value("zkr_lock_acquire_seconds_count", {{"outcome", "acquired"}}).
    double value(std::string_view name,
                 std::initializer_list<std::pair<std::string_view, std::string_view>> labels = {}) const;
};

/// One metric family: its name, Prometheus type ("counter", "gauge" or "histogram") and help.
struct metric_family {
    std::string_view name;  ///< e.g. "zkr_lock_acquire_seconds"
    std::string_view type;  ///< "counter", "gauge" or "histogram"
    std::string_view help;  ///< one line: what it counts
};

/// Counts what the clients it observes do. Thread-safe: one instance may observe many clients
/// (options.observer of each). Recording allocates nothing except the first time a label set
/// is seen (a new path, with metrics_options::path_label).
class ZKR_EXPORT metrics final : public observer {
public:
    /// Metrics without the path label.
    metrics();
    /// Metrics recorded as `options` say.
    explicit metrics(metrics_options options);
    ~metrics() override;
    metrics(const metrics&) = delete;
    metrics& operator=(const metrics&) = delete;

    /// Every metric, now.
    metrics_snapshot snapshot() const;
    /// Every metric in Prometheus' text exposition format 0.0.4 (`# HELP`, `# TYPE`, samples;
    /// label values escaped), for a /metrics endpoint.
    std::string prometheus_text() const;

    /// The upper bounds, in seconds, of the histograms' buckets (+Inf is added).
    static const std::vector<double>& bucket_bounds();
    /// Every family snapshot() and prometheus_text() report, in their order.
    static const std::vector<metric_family>& families();

    /// \cond observer hooks: documented on zkr::observer
    void on_connection_state(connection_state state, std::int64_t session) override;
    void on_session_expiry(std::int64_t session, expiry_cause cause) override;
    /// Counted as an expiry with cause "server" (what this hook meant before on_session_expiry();
    /// for an observer that forwards it here).
    void on_session_expired(std::int64_t session) override;
    void on_request_started(const request_info& request) override;
    void on_retry(const request_info& request, error_code cause, int attempt, std::chrono::nanoseconds backoff) override;
    void on_request_finished(const request_info& request, error_code result, std::chrono::nanoseconds duration) override;
    void on_acquire_started(const recipe_info& recipe) override;
    void on_acquire_finished(const recipe_info& recipe, acquire_outcome outcome, std::chrono::nanoseconds wait) override;
    void on_released(const recipe_info& recipe, std::chrono::nanoseconds held) override;
    void on_lost(const recipe_info& recipe, loss_reason reason, std::chrono::nanoseconds held) override;
    void on_leadership(const recipe_info& recipe, bool leader) override;
    void on_queue_depth(const recipe_info& recipe, std::size_t depth) override;
    void on_operation(const recipe_info& recipe, recipe_operation operation, operation_outcome outcome,
                      std::chrono::nanoseconds duration) override;
    void on_events_dropped(std::uint64_t count) override;
    /// \endcond

private:
    struct state;
    std::unique_ptr<state> state_;
};

}  // namespace zkr
