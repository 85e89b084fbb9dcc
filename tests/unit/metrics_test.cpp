// zkr::metrics without a server: its hooks called directly, its Prometheus text checked line by
// line against the text exposition format 0.0.4.
#include "zkr/metrics.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace metrics_test {

using namespace std::chrono_literals;

namespace {

struct parsed_sample {
    std::string name;
    std::map<std::string, std::string> labels;  // unescaped
    double value = 0;
};

// One sample line: name, optional {label="value",...} with \\, \" and \n escapes, a value.
// Fails the test on anything else.
parsed_sample parse_sample(const std::string& line) {
    parsed_sample out;
    std::size_t i = 0;
    auto name_char = [](char c, bool first) {
        return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' || (!first && std::isdigit(static_cast<unsigned char>(c)));
    };
    while (i < line.size() && name_char(line[i], i == 0)) out.name += line[i++];
    REQUIRE(!out.name.empty());
    if (i < line.size() && line[i] == '{') {
        ++i;
        while (true) {
            std::string label;
            while (i < line.size() && name_char(line[i], label.empty())) label += line[i++];
            REQUIRE(!label.empty());
            REQUIRE(line.substr(i, 2) == "=\"");
            i += 2;
            std::string value;
            while (true) {
                REQUIRE(i < line.size());
                char c = line[i++];
                if (c == '"') break;
                REQUIRE(c != '\n');
                if (c == '\\') {
                    REQUIRE(i < line.size());
                    char e = line[i++];
                    REQUIRE((e == '\\' || e == '"' || e == 'n'));
                    value += e == 'n' ? '\n' : e;
                } else {
                    value += c;
                }
            }
            REQUIRE(out.labels.emplace(label, value).second);  // no label twice
            REQUIRE(i < line.size());
            if (line[i] == ',') {
                ++i;
                continue;
            }
            REQUIRE(line[i] == '}');
            ++i;
            break;
        }
    }
    REQUIRE(i < line.size());
    REQUIRE(line[i] == ' ');
    std::string number = line.substr(i + 1);
    REQUIRE(!number.empty());
    if (number == "+Inf") out.value = std::numeric_limits<double>::infinity();
    else {
        std::size_t used = 0;
        out.value = std::stod(number, &used);
        REQUIRE(used == number.size());
    }
    return out;
}

struct parsed_text {
    std::map<std::string, std::string> types;  // family -> type
    std::vector<parsed_sample> samples;
};

// The whole text: each family's HELP and TYPE once, before its samples; each sample of a
// declared family; histogram buckets cumulative, ending in +Inf equal to _count.
parsed_text parse(const std::string& text) {
    parsed_text out;
    REQUIRE(!text.empty());
    REQUIRE(text.back() == '\n');
    std::istringstream in(text);
    std::string line, current;
    std::set<std::string> helped;
    while (std::getline(in, line)) {
        INFO(line);
        REQUIRE(!line.empty());
        if (line.rfind("# HELP ", 0) == 0) {
            auto rest = line.substr(7);
            auto name = rest.substr(0, rest.find(' '));
            REQUIRE(helped.insert(name).second);
            current = name;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            std::istringstream t(line.substr(7));
            std::string name, type, extra;
            t >> name >> type;
            REQUIRE(name == current);
            REQUIRE((type == "counter" || type == "gauge" || type == "histogram"));
            REQUIRE_FALSE(t >> extra);
            REQUIRE(out.types.emplace(name, type).second);
            continue;
        }
        REQUIRE(line[0] != '#');
        auto s = parse_sample(line);
        // Its family is the one declared last.
        REQUIRE(out.types.count(current) == 1);
        if (out.types[current] == "histogram") {
            bool suffixed = s.name == current + "_bucket" || s.name == current + "_sum" || s.name == current + "_count";
            REQUIRE(suffixed);
            if (s.name == current + "_bucket") REQUIRE(s.labels.count("le") == 1);
        } else {
            REQUIRE(s.name == current);
        }
        out.samples.push_back(std::move(s));
    }
    // Buckets: cumulative per label set, the last one +Inf and equal to _count.
    std::map<std::map<std::string, std::string>, std::vector<double>> buckets;
    std::map<std::map<std::string, std::string>, double> counts;
    for (const auto& s : out.samples) {
        auto labels = s.labels;
        labels.erase("le");
        labels["__name__"] = s.name.substr(0, s.name.rfind('_'));
        if (s.name.size() > 7 && s.name.compare(s.name.size() - 7, 7, "_bucket") == 0) {
            buckets[labels].push_back(s.value);
            if (s.labels.at("le") == "+Inf") CHECK(buckets[labels].size() == zkr::metrics::bucket_bounds().size() + 1);
        }
        if (s.name.size() > 6 && s.name.compare(s.name.size() - 6, 6, "_count") == 0) counts[labels] = s.value;
    }
    for (const auto& [labels, values] : buckets) {
        for (std::size_t i = 1; i < values.size(); ++i) CHECK(values[i] >= values[i - 1]);
        REQUIRE(counts.count(labels) == 1);
        CHECK(values.back() == counts[labels]);
    }
    return out;
}

double sum(const parsed_text& t, const std::string& name, std::map<std::string, std::string> wanted = {}) {
    double total = 0;
    for (const auto& s : t.samples) {
        if (s.name != name) continue;
        bool match = true;
        for (const auto& [k, v] : wanted) match = match && s.labels.count(k) && s.labels.at(k) == v;
        if (match) total += s.value;
    }
    return total;
}

}  // namespace

TEST_CASE("metrics: the Prometheus text follows the exposition format, line by line", "[unit][metrics]") {
    zkr::metrics m;
    zkr::recipe_info lock{1, zkr::recipe_kind::mutex, "/locks/a", 1};
    m.on_connection_state(zkr::connection_state::connected, 7);
    m.on_request_finished({2, zkr::operation::create, "/locks/a/x"}, {}, 3ms);
    m.on_request_finished({3, zkr::operation::remove, "/x"}, zkr::make_error_code(zkr::errc::no_node), 1ms);
    m.on_request_finished({4, zkr::operation::multi, "/x"}, zkr::make_error_code(zkr::errc::outcome_unknown), 1ms);
    m.on_retry({2, zkr::operation::create, "/locks/a/x"}, zkr::make_error_code(zkr::errc::connection_loss), 1, 10ms);
    m.on_acquire_started(lock);
    m.on_acquire_finished(lock, zkr::acquire_outcome::acquired, 20ms);
    m.on_released(lock, 2s);
    m.on_acquire_started(lock);
    m.on_acquire_finished(lock, zkr::acquire_outcome::timed_out, 400s);  // past the last bound: +Inf only
    m.on_leadership({5, zkr::recipe_kind::leader_latch, "/latch"}, true);
    m.on_session_expired(7);
    m.on_events_dropped(3);
    auto text = m.prometheus_text();
    INFO(text);
    auto t = parse(text);
    CHECK(t.types.at("zkr_lock_acquire_seconds") == "histogram");
    CHECK(t.types.at("zkr_requests_total") == "counter");
    CHECK(t.types.at("zkr_lock_waiters") == "gauge");
    CHECK(sum(t, "zkr_requests_total", {{"op", "create"}, {"result", "ok"}}) == 1);
    CHECK(sum(t, "zkr_requests_total", {{"op", "remove"}, {"result", "no_node"}}) == 1);
    CHECK(sum(t, "zkr_requests_total", {{"op", "multi"}, {"result", "other"}}) == 1);
    CHECK(sum(t, "zkr_request_retries_total", {{"op", "create"}}) == 1);
    CHECK(sum(t, "zkr_lock_acquire_seconds_count", {{"recipe", "mutex"}, {"outcome", "acquired"}}) == 1);
    CHECK(sum(t, "zkr_lock_acquire_seconds_bucket", {{"recipe", "mutex"}, {"outcome", "acquired"}, {"le", "0.01"}}) == 0);
    CHECK(sum(t, "zkr_lock_acquire_seconds_bucket", {{"recipe", "mutex"}, {"outcome", "acquired"}, {"le", "0.025"}}) == 1);
    CHECK(sum(t, "zkr_lock_acquire_seconds_bucket", {{"recipe", "mutex"}, {"outcome", "timed_out"}, {"le", "300"}}) == 0);
    CHECK(sum(t, "zkr_lock_acquire_seconds_bucket", {{"recipe", "mutex"}, {"outcome", "timed_out"}, {"le", "+Inf"}}) == 1);
    CHECK(sum(t, "zkr_lock_acquire_seconds_sum", {{"recipe", "mutex"}}) == Approx(400.02));
    CHECK(sum(t, "zkr_lock_hold_seconds_sum", {{"recipe", "mutex"}}) == Approx(2.0));
    CHECK(sum(t, "zkr_lock_held", {{"recipe", "mutex"}}) == 0);
    CHECK(sum(t, "zkr_lock_waiters", {{"recipe", "mutex"}}) == 0);
    CHECK(sum(t, "zkr_leader", {{"recipe", "leader_latch"}}) == 1);
    CHECK(sum(t, "zkr_session_expirations_total") == 1);
    CHECK(sum(t, "zkr_session_expirations_total", {{"cause", "server"}}) == 1);  // the old hook: the server's word
    CHECK(sum(t, "zkr_session_expirations_total", {{"cause", "given_up"}}) == 0);  // printed at zero
    CHECK(sum(t, "zkr_connection_state_changes_total", {{"state", "connected"}}) == 1);
    CHECK(sum(t, "zkr_observer_events_dropped_total") == 3);
    // No path label unless asked for: the series stay bounded.
    for (const auto& s : t.samples) CHECK(s.labels.count("path") == 0);
}

TEST_CASE("metrics: session expiries by cause, and an observer of the older hook hears of every cause", "[unit][metrics]") {
    zkr::metrics m;
    auto fresh = m.snapshot();
    // Both series from the start, at zero.
    CHECK(std::count_if(fresh.samples.begin(), fresh.samples.end(),
                        [](const zkr::metric_sample& s) { return s.name == "zkr_session_expirations_total"; }) == 2);
    zkr::observer& o = m;
    o.on_session_expiry(7, zkr::expiry_cause::given_up);
    o.on_session_expiry(8, zkr::expiry_cause::server);
    o.on_session_expiry(9, zkr::expiry_cause::given_up);
    auto s = m.snapshot();
    CHECK(s.value("zkr_session_expirations_total", {{"cause", "given_up"}}) == 2);
    CHECK(s.value("zkr_session_expirations_total", {{"cause", "server"}}) == 1);
    CHECK(s.value("zkr_session_expirations_total") == 3);
    CHECK(std::string(zkr::to_string(zkr::expiry_cause::server)) == "server");
    CHECK(std::string(zkr::to_string(zkr::expiry_cause::given_up)) == "given_up");

    // Written before on_session_expiry(): its on_session_expired() still hears of each expiry.
    struct older : zkr::observer {
        std::vector<std::int64_t> sessions;
        void on_session_expired(std::int64_t session) override { sessions.push_back(session); }
    } old;
    zkr::observer& base = old;
    base.on_session_expiry(7, zkr::expiry_cause::given_up);
    base.on_session_expiry(8, zkr::expiry_cause::server);
    CHECK(old.sessions == std::vector<std::int64_t>{7, 8});
}

TEST_CASE("metrics: label values with quotes, backslashes and line feeds are escaped", "[unit][metrics]") {
    zkr::metrics m(zkr::metrics_options{.path_label = true});
    std::string odd = "/locks/a\"b\\c\nd";
    zkr::recipe_info lock{1, zkr::recipe_kind::write_lock, odd, 1};
    m.on_acquire_started(lock);
    m.on_acquire_finished(lock, zkr::acquire_outcome::acquired, 1ms);
    m.on_acquire_started({2, zkr::recipe_kind::write_lock, "/locks/plain"});
    auto text = m.prometheus_text();
    CHECK(text.find("path=\"/locks/a\\\"b\\\\c\\nd\"") != std::string::npos);
    auto t = parse(text);  // every line still one sample, and the value reads back whole
    CHECK(sum(t, "zkr_lock_held", {{"path", odd}}) == 1);
    CHECK(sum(t, "zkr_lock_waiters", {{"path", "/locks/plain"}}) == 1);
    CHECK(sum(t, "zkr_lock_waiters", {{"path", odd}}) == 0);
    CHECK(m.snapshot().value("zkr_lock_held", {{"recipe", "write_lock"}, {"path", odd}}) == 1);
}

TEST_CASE("metrics: an acquisition of several leases is as many holds, each released on its own", "[unit][metrics]") {
    zkr::metrics m;
    zkr::recipe_info leases{1, zkr::recipe_kind::semaphore, "/s", 3};
    m.on_acquire_started(leases);
    m.on_acquire_finished(leases, zkr::acquire_outcome::acquired, 1ms);
    CHECK(m.snapshot().value("zkr_lock_held", {{"recipe", "semaphore"}}) == 3);
    m.on_released(leases, 1ms);
    m.on_lost(leases, zkr::loss_reason::session, 1ms);
    m.on_released(leases, 1ms);
    auto s = m.snapshot();
    CHECK(s.value("zkr_lock_held", {{"recipe", "semaphore"}}) == 0);
    CHECK(s.value("zkr_lock_hold_seconds_count", {{"recipe", "semaphore"}}) == 3);
    CHECK(s.value("zkr_lock_acquire_seconds_count", {{"recipe", "semaphore"}}) == 1);
}

TEST_CASE("metrics: hooks called from many threads at once lose no count", "[unit][metrics]") {
    zkr::metrics m;
    constexpr int threads = 4, each = 20000;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&m, t] {
            for (int i = 0; i < each; ++i) {
                zkr::recipe_info r{static_cast<std::uint64_t>(t * each + i), zkr::recipe_kind::mutex, "/l", 1};
                m.on_acquire_started(r);
                m.on_acquire_finished(r, zkr::acquire_outcome::acquired, 1ms);
                m.on_released(r, 1ms);
                m.on_request_finished({0, zkr::operation::get_children, "/l"}, {}, 1ms);
            }
        });
    }
    for (auto& t : pool) t.join();
    auto s = m.snapshot();
    CHECK(s.value("zkr_lock_acquire_seconds_count", {{"outcome", "acquired"}}) == threads * each);
    CHECK(s.value("zkr_lock_hold_seconds_sum") == Approx(threads * each * 0.001));
    CHECK(s.value("zkr_requests_total", {{"op", "get_children"}}) == threads * each);
    CHECK(s.value("zkr_lock_held") == 0);
    CHECK(s.value("zkr_lock_waiters") == 0);
}

}  // namespace metrics_test
