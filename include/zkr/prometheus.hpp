/// \file
/// zkr::prometheus_collector — zkr::metrics in a prometheus-cpp program: a Collectable to
/// register beside the program's own registry (Debian's prometheus-cpp-dev).
///
/// Header-only, so zkr itself does not depend on prometheus-cpp: include it only in a program
/// that links prometheus-cpp-core (and prometheus-cpp-pull to serve /metrics):
/// \code
///   auto metrics = std::make_shared<zkr::metrics>();
///   options.observer = metrics;                        // each zkr::client's options
///   prometheus::Exposer exposer{"0.0.0.0:9464"};
///   auto registry = std::make_shared<prometheus::Registry>();   // the program's own metrics
///   auto zkr_metrics = std::make_shared<zkr::prometheus_collector>(metrics);
///   exposer.RegisterCollectable(registry);
///   exposer.RegisterCollectable(zkr_metrics);          // held weakly: keep zkr_metrics alive
/// \endcode
/// examples/metrics_service.cpp is a whole service.
#pragma once

#include "zkr/metrics.hpp"

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zkr {

/// Reports a zkr::metrics as prometheus-cpp metric families (the same names, labels and values as
/// metrics::prometheus_text()), read anew at every scrape.
class prometheus_collector final : public ::prometheus::Collectable {
public:
    /// `metrics` must not be null.
    explicit prometheus_collector(std::shared_ptr<const zkr::metrics> metrics) : metrics_(std::move(metrics)) {}

    /// The families, as a scrape reads them (called by prometheus-cpp's exposer).
    std::vector<::prometheus::MetricFamily> Collect() const override {
        auto snap = metrics_->snapshot();
        std::vector<::prometheus::MetricFamily> out;
        for (const auto& f : zkr::metrics::families()) {
            ::prometheus::MetricFamily family;
            family.name = std::string(f.name);
            family.help = std::string(f.help);
            if (f.type == "histogram") {
                family.type = ::prometheus::MetricType::Histogram;
                add_histograms(family, snap);
            } else {
                family.type = f.type == "counter" ? ::prometheus::MetricType::Counter : ::prometheus::MetricType::Gauge;
                for (const auto& s : snap.samples) {
                    if (s.name != f.name) continue;
                    ::prometheus::ClientMetric m;
                    m.label = labels_of(s, false);
                    if (family.type == ::prometheus::MetricType::Counter) m.counter.value = s.value;
                    else m.gauge.value = s.value;
                    family.metric.push_back(std::move(m));
                }
            }
            out.push_back(std::move(family));
        }
        return out;
    }

private:
    static std::vector<::prometheus::ClientMetric::Label> labels_of(const metric_sample& s, bool drop_le) {
        std::vector<::prometheus::ClientMetric::Label> out;
        for (const auto& [name, value] : s.labels) {
            if (drop_le && name == "le") continue;
            out.push_back({name, value});
        }
        return out;
    }

    // A histogram's samples (<name>_bucket per `le`, <name>_sum, <name>_count) gathered per label set.
    static void add_histograms(::prometheus::MetricFamily& family, const metrics_snapshot& snap) {
        std::vector<std::pair<std::vector<::prometheus::ClientMetric::Label>, ::prometheus::ClientMetric>> series;
        auto of = [&](std::vector<::prometheus::ClientMetric::Label> labels) -> ::prometheus::ClientMetric& {
            for (auto& [l, m] : series)
                if (l == labels) return m;
            ::prometheus::ClientMetric m;
            m.label = labels;
            series.emplace_back(std::move(labels), std::move(m));
            return series.back().second;
        };
        for (const auto& s : snap.samples) {
            if (s.name == family.name + "_bucket") {
                std::string le;
                for (const auto& [name, value] : s.labels)
                    if (name == "le") le = value;
                // The +Inf bucket is prometheus-cpp's own (the sample count).
                if (le == "+Inf") continue;
                of(labels_of(s, true)).histogram.bucket.push_back(
                    {static_cast<std::uint64_t>(s.value), std::strtod(le.c_str(), nullptr)});
            } else if (s.name == family.name + "_sum") {
                of(labels_of(s, false)).histogram.sample_sum = s.value;
            } else if (s.name == family.name + "_count") {
                of(labels_of(s, false)).histogram.sample_count = static_cast<std::uint64_t>(s.value);
            }
        }
        for (auto& [l, m] : series) family.metric.push_back(std::move(m));
    }

    std::shared_ptr<const zkr::metrics> metrics_;
};

}  // namespace zkr
