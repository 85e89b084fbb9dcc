// zkr::metrics: fixed arrays of atomics for what is bounded (operations x results, recipes x
// outcomes), so that recording a request allocates nothing and takes no lock; a map under a
// mutex only for series with a path label (made once per path).
#include "zkr/metrics.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

namespace zkr {

observer::~observer() = default;

const char* to_string(operation op) noexcept {
    switch (op) {
        case operation::create: return "create";
        case operation::remove: return "remove";
        case operation::exists: return "exists";
        case operation::get_data: return "get_data";
        case operation::set_data: return "set_data";
        case operation::get_children: return "get_children";
        case operation::multi: return "multi";
        case operation::remove_watches: return "remove_watches";
    }
    return "unknown";
}

const char* to_string(recipe_kind r) noexcept {
    switch (r) {
        case recipe_kind::mutex: return "mutex";
        case recipe_kind::read_lock: return "read_lock";
        case recipe_kind::write_lock: return "write_lock";
        case recipe_kind::semaphore: return "semaphore";
        case recipe_kind::leader_latch: return "leader_latch";
        case recipe_kind::leader_selector: return "leader_selector";
        case recipe_kind::barrier: return "barrier";
        case recipe_kind::count_down_latch: return "count_down_latch";
        case recipe_kind::counter: return "counter";
        case recipe_kind::double_barrier: return "double_barrier";
        case recipe_kind::tree_cache: return "tree_cache";
        case recipe_kind::persistent_node: return "persistent_node";
        case recipe_kind::ttl_node: return "ttl_node";
        case recipe_kind::group_member: return "group_member";
    }
    return "unknown";
}

const char* to_string(recipe_operation o) noexcept {
    switch (o) {
        case recipe_operation::wait: return "wait";
        case recipe_operation::count_down: return "count_down";
        case recipe_operation::change: return "change";
        case recipe_operation::enter: return "enter";
        case recipe_operation::leave: return "leave";
    }
    return "unknown";
}

const char* to_string(operation_outcome o) noexcept {
    switch (o) {
        case operation_outcome::done: return "done";
        case operation_outcome::timed_out: return "timed_out";
        case operation_outcome::cancelled: return "cancelled";
        case operation_outcome::failed: return "failed";
    }
    return "unknown";
}

const char* to_string(acquire_outcome o) noexcept {
    switch (o) {
        case acquire_outcome::acquired: return "acquired";
        case acquire_outcome::timed_out: return "timed_out";
        case acquire_outcome::cancelled: return "cancelled";
        case acquire_outcome::failed: return "failed";
    }
    return "unknown";
}

const char* to_string(loss_reason r) noexcept {
    switch (r) {
        case loss_reason::session: return "session";
        case loss_reason::node_deleted: return "node_deleted";
    }
    return "unknown";
}

const char* to_string(expiry_cause c) noexcept {
    switch (c) {
        case expiry_cause::server: return "server";
        case expiry_cause::given_up: return "given_up";
    }
    return "unknown";
}

namespace {

constexpr std::size_t operations = 8;
constexpr std::size_t recipes = 14;
constexpr std::size_t lock_recipes = 4;        // mutex .. semaphore: the zkr_lock_* series
constexpr std::size_t recipe_operations = 5;   // recipe_operation
constexpr std::size_t operation_outcomes = 4;  // operation_outcome
constexpr std::size_t outcomes = 4;
constexpr std::size_t reasons = 2;
constexpr std::size_t states = 6;
constexpr std::size_t causes = 2;
constexpr expiry_cause all_causes[causes] = {expiry_cause::server, expiry_cause::given_up};

// A request's result as a label: the answers and failures worth telling apart, the rest "other"
// (a bounded set: one series each).
constexpr std::array<std::pair<errc, const char*>, 14> named_results{{
    {errc::no_node, "no_node"},
    {errc::node_exists, "node_exists"},
    {errc::bad_version, "bad_version"},
    {errc::not_empty, "not_empty"},
    {errc::no_auth, "no_auth"},
    {errc::connection_loss, "connection_loss"},
    {errc::operation_timeout, "operation_timeout"},
    {errc::session_expired, "session_expired"},
    {errc::session_moved, "session_moved"},
    {errc::throttled_op, "throttled_op"},
    {errc::closing, "closing"},
    {errc::client_closed, "client_closed"},
    {errc::bad_arguments, "bad_arguments"},
    {errc::cancelled, "cancelled"},
}};
constexpr std::size_t results = named_results.size() + 2;  // + ok, other

std::size_t result_index(const error_code& ec) {
    if (!ec) return 0;
    if (ec.category() == zkr_category()) {
        for (std::size_t i = 0; i < named_results.size(); ++i) {
            if (ec.value() == static_cast<int>(named_results[i].first)) return i + 1;
        }
    }
    return results - 1;
}

const char* result_name(std::size_t i) {
    if (i == 0) return "ok";
    if (i == results - 1) return "other";
    return named_results[i - 1].second;
}

// In the order of their series.
constexpr connection_state all_states[states] = {connection_state::connecting, connection_state::connected,
                                                 connection_state::suspended, connection_state::reconnected,
                                                 connection_state::lost, connection_state::closed};

std::size_t state_index(connection_state s) {
    for (std::size_t i = 0; i < states; ++i)
        if (all_states[i] == s) return i;
    return 0;
}

const std::vector<double> bounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                 0.5,    1,     2.5,    5,     10,   30,    60,   300};

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

// Adds to an atomic double (C++20 fetch_add on double is not in every standard library yet).
void add(std::atomic<double>& a, double v) {
    double old = a.load(std::memory_order_relaxed);
    while (!a.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
    }
}

struct histogram {
    std::array<std::atomic<std::uint64_t>, 18> buckets{};  // bounds.size() + the +Inf bucket, not cumulative
    std::atomic<double> sum{0};
    std::atomic<std::uint64_t> count{0};

    void observe(double v) {
        std::size_t i = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
        buckets[i].fetch_add(1, std::memory_order_relaxed);
        add(sum, v);
        count.fetch_add(1, std::memory_order_relaxed);
    }
};

// The series of one recipe (and path, with the path label).
struct recipe_series {
    std::array<histogram, outcomes> acquire;
    histogram hold;
    std::atomic<std::int64_t> waiters{0}, held{0}, leaders{0};
    std::atomic<std::int64_t> queue_depth{-1};  // -1 until read
    std::array<std::atomic<std::uint64_t>, reasons> lost{};
    std::array<std::atomic<std::uint64_t>, 2> leader_changes{};  // gained, lost
    // zkr_recipe_operation_seconds, made on the first operation (locks never have one).
    using operation_table = std::array<std::array<histogram, operation_outcomes>, recipe_operations>;
    std::atomic<operation_table*> operations_seen{nullptr};
    operation_table& operations() {
        if (auto* t = operations_seen.load(std::memory_order_acquire)) return *t;
        auto made = std::make_unique<operation_table>();
        operation_table* expected = nullptr;
        if (operations_seen.compare_exchange_strong(expected, made.get(), std::memory_order_acq_rel)) return *made.release();
        return *expected;  // another thread made it first
    }
    recipe_series() = default;
    recipe_series(const recipe_series&) = delete;
    recipe_series& operator=(const recipe_series&) = delete;
    ~recipe_series() { delete operations_seen.load(); }
};

using labels = std::vector<std::pair<std::string, std::string>>;

std::string format_number(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (std::isnan(v)) return "NaN";
    char buf[64];
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
        std::snprintf(buf, sizeof buf, "%.0f", v);
        return buf;
    }
    // The shortest form that reads back as the same double: 0.025, not 0.025000000000000001.
    for (int precision = 1; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

// Label values in the text format: backslash, double quote and line feed escaped.
std::string escape_label(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

const std::vector<metric_family> all_families{
    {"zkr_connection_state_changes_total", "counter", "Connection state changes of the observed clients, by the state entered."},
    {"zkr_session_expirations_total", "counter",
     "Sessions expired, each once, by cause: server (the server said so first) or given_up (the client gave it up "
     "after a whole session timeout disconnected, before any server said so)."},
    {"zkr_requests_total", "counter", "Requests ended, by operation and result (ok, an answer such as no_node, or a failure)."},
    {"zkr_request_seconds", "histogram", "Time from a request's start to its end, retries included."},
    {"zkr_request_retries_total", "counter", "Requests sent again after a retryable failure, by operation."},
    {"zkr_lock_acquire_seconds", "histogram", "Time acquisitions (locks, semaphore leases) waited, by recipe and outcome."},
    {"zkr_lock_hold_seconds", "histogram", "How long holds lasted until their release or loss, by recipe."},
    {"zkr_lock_waiters", "gauge", "Acquisitions of this process in progress, by recipe."},
    {"zkr_lock_held", "gauge", "Holds of this process standing now, by recipe."},
    {"zkr_lock_queue_depth", "gauge", "Nodes in a lock's queue (holders included) when it was last read."},
    {"zkr_lock_lost_total", "counter", "Holds lost before their release, by recipe and reason (session, node_deleted)."},
    {"zkr_leader", "gauge", "Leader latches and selectors of this process that lead now."},
    {"zkr_leader_changes_total", "counter", "Leadership gained or lost, by recipe."},
    {"zkr_recipe_operation_seconds", "histogram",
     "Operations of the recipes that are not locks (barrier and count-down latch waits, count-downs, counter "
     "operations, double-barrier enters and leaves, the waits of caches, nodes and group members), by recipe, "
     "operation and outcome."},
    {"zkr_observer_events_dropped_total", "counter", "Events dropped because an observer was too slow (its queue was full)."},
};

}  // namespace

double metrics_snapshot::value(std::string_view name,
                               std::initializer_list<std::pair<std::string_view, std::string_view>> wanted) const {
    double total = 0;
    for (const auto& s : samples) {
        if (s.name != name) continue;
        bool match = std::all_of(wanted.begin(), wanted.end(), [&](const auto& w) {
            return std::any_of(s.labels.begin(), s.labels.end(),
                               [&](const auto& l) { return l.first == w.first && l.second == w.second; });
        });
        if (match) total += s.value;
    }
    return total;
}

struct metrics::state {
    explicit state(metrics_options o) : options(o) {}
    const metrics_options options;

    std::array<std::atomic<std::uint64_t>, states> state_changes{};
    std::array<std::atomic<std::uint64_t>, causes> expirations{};  // by expiry_cause
    std::atomic<std::uint64_t> dropped{0};
    std::array<std::array<std::atomic<std::uint64_t>, results>, operations> requests{};
    std::array<histogram, operations> request_seconds;
    std::array<std::atomic<std::uint64_t>, operations> retries{};

    std::array<recipe_series, recipes> by_recipe;  // without the path label
    mutable std::mutex paths_mutex;                // with it: made on first use, never removed
    // Looked up by (recipe, string_view): a path seen before costs no allocation.
    struct path_key_less {
        using is_transparent = void;
        template <class A, class B>
        bool operator()(const A& a, const B& b) const {
            return std::pair<std::size_t, std::string_view>(a.first, a.second) <
                   std::pair<std::size_t, std::string_view>(b.first, b.second);
        }
    };
    std::map<std::pair<std::size_t, std::string>, std::unique_ptr<recipe_series>, path_key_less> by_path;

    recipe_series& series(const recipe_info& r) {
        auto kind = static_cast<std::size_t>(r.recipe) % recipes;
        if (!options.path_label) return by_recipe[kind];
        std::lock_guard lock(paths_mutex);
        auto it = by_path.find(std::pair<std::size_t, std::string_view>(kind, r.path));
        if (it == by_path.end())
            it = by_path.emplace(std::make_pair(kind, std::string(r.path)), std::make_unique<recipe_series>()).first;
        return *it->second;
    }
};

metrics::metrics() : metrics(metrics_options{}) {}
metrics::metrics(metrics_options options) : state_(std::make_unique<state>(options)) {}
metrics::~metrics() = default;

const std::vector<double>& metrics::bucket_bounds() { return bounds; }
const std::vector<metric_family>& metrics::families() { return all_families; }

void metrics::on_connection_state(connection_state s, std::int64_t) { ++state_->state_changes[state_index(s)]; }
void metrics::on_session_expiry(std::int64_t, expiry_cause cause) {
    ++state_->expirations[static_cast<std::size_t>(cause) % causes];
}
void metrics::on_session_expired(std::int64_t session) { on_session_expiry(session, expiry_cause::server); }
void metrics::on_request_started(const request_info&) {}
void metrics::on_retry(const request_info& r, error_code, int, std::chrono::nanoseconds) {
    ++state_->retries[static_cast<std::size_t>(r.operation) % operations];
}
void metrics::on_request_finished(const request_info& r, error_code result, std::chrono::nanoseconds d) {
    auto op = static_cast<std::size_t>(r.operation) % operations;
    state_->requests[op][result_index(result)].fetch_add(1, std::memory_order_relaxed);
    state_->request_seconds[op].observe(seconds(d));
}
void metrics::on_acquire_started(const recipe_info& r) { ++state_->series(r).waiters; }
void metrics::on_acquire_finished(const recipe_info& r, acquire_outcome o, std::chrono::nanoseconds wait) {
    auto& s = state_->series(r);
    --s.waiters;
    s.acquire[static_cast<std::size_t>(o) % outcomes].observe(seconds(wait));
    if (o == acquire_outcome::acquired) s.held += static_cast<std::int64_t>(r.holds);
}
void metrics::on_released(const recipe_info& r, std::chrono::nanoseconds held) {
    auto& s = state_->series(r);
    --s.held;
    s.hold.observe(seconds(held));
}
void metrics::on_lost(const recipe_info& r, loss_reason why, std::chrono::nanoseconds held) {
    auto& s = state_->series(r);
    --s.held;
    s.hold.observe(seconds(held));
    ++s.lost[static_cast<std::size_t>(why) % reasons];
}
void metrics::on_leadership(const recipe_info& r, bool leader) {
    auto& s = state_->series(r);
    if (leader) ++s.leaders;
    else --s.leaders;
    ++s.leader_changes[leader ? 0 : 1];
}
void metrics::on_queue_depth(const recipe_info& r, std::size_t depth) {
    state_->series(r).queue_depth = static_cast<std::int64_t>(depth);
}
void metrics::on_operation(const recipe_info& r, recipe_operation op, operation_outcome outcome, std::chrono::nanoseconds d) {
    auto& table = state_->series(r).operations();
    table[static_cast<std::size_t>(op) % recipe_operations][static_cast<std::size_t>(outcome) % operation_outcomes].observe(seconds(d));
}
void metrics::on_events_dropped(std::uint64_t count) { state_->dropped += count; }

metrics_snapshot metrics::snapshot() const {
    metrics_snapshot out;
    auto& v = out.samples;
    auto sample = [&](const char* name, labels l, double value) { v.push_back({name, std::move(l), value}); };
    auto hist = [&](const std::string& name, const labels& l, const histogram& h) {
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= bounds.size(); ++i) {
            cumulative += h.buckets[i].load(std::memory_order_relaxed);
            auto with_le = l;
            with_le.emplace_back("le", i < bounds.size() ? format_number(bounds[i]) : "+Inf");
            v.push_back({name + "_bucket", std::move(with_le), static_cast<double>(cumulative)});
        }
        v.push_back({name + "_sum", l, h.sum.load(std::memory_order_relaxed)});
        // The count is the +Inf bucket (read once: both agree even while others record).
        v.push_back({name + "_count", l, static_cast<double>(cumulative)});
    };
    const auto& st = *state_;

    for (std::size_t i = 0; i < states; ++i)
        sample("zkr_connection_state_changes_total", {{"state", to_string(all_states[i])}}, static_cast<double>(st.state_changes[i].load()));
    // Both causes, zeros too: an alert on either finds its series from the start.
    for (std::size_t i = 0; i < causes; ++i)
        sample("zkr_session_expirations_total", {{"cause", to_string(all_causes[i])}}, static_cast<double>(st.expirations[i].load()));
    for (std::size_t op = 0; op < operations; ++op) {
        for (std::size_t r = 0; r < results; ++r) {
            auto n = st.requests[op][r].load(std::memory_order_relaxed);
            if (n == 0) continue;  // a series appears once it has happened: 8 x 16 zeros say nothing
            sample("zkr_requests_total", {{"op", to_string(static_cast<operation>(op))}, {"result", result_name(r)}},
                   static_cast<double>(n));
        }
    }
    for (std::size_t op = 0; op < operations; ++op)
        hist("zkr_request_seconds", {{"op", to_string(static_cast<operation>(op))}}, st.request_seconds[op]);
    for (std::size_t op = 0; op < operations; ++op)
        sample("zkr_request_retries_total", {{"op", to_string(static_cast<operation>(op))}}, static_cast<double>(st.retries[op].load()));

    // The recipe series, each with its labels.
    std::vector<std::pair<labels, const recipe_series*>> series;
    if (!st.options.path_label) {
        for (std::size_t k = 0; k < recipes; ++k)
            series.push_back({{{"recipe", to_string(static_cast<recipe_kind>(k))}}, &st.by_recipe[k]});
    } else {
        std::lock_guard lock(st.paths_mutex);
        for (const auto& [key, s] : st.by_path)
            series.push_back({{{"recipe", to_string(static_cast<recipe_kind>(key.first))}, {"path", key.second}}, s.get()});
    }
    auto is_lock = [](const labels& l) {
        auto r = l.front().second;
        for (std::size_t k = 0; k < lock_recipes; ++k)
            if (r == to_string(static_cast<recipe_kind>(k))) return true;
        return false;
    };
    for (const auto& [l, s] : series) {
        if (!is_lock(l)) continue;
        for (std::size_t o = 0; o < outcomes; ++o) {
            auto with = l;
            with.emplace_back("outcome", to_string(static_cast<acquire_outcome>(o)));
            hist("zkr_lock_acquire_seconds", with, s->acquire[o]);
        }
    }
    for (const auto& [l, s] : series) if (is_lock(l)) hist("zkr_lock_hold_seconds", l, s->hold);
    for (const auto& [l, s] : series) if (is_lock(l)) sample("zkr_lock_waiters", l, static_cast<double>(s->waiters.load()));
    for (const auto& [l, s] : series) if (is_lock(l)) sample("zkr_lock_held", l, static_cast<double>(s->held.load()));
    for (const auto& [l, s] : series) {
        auto depth = s->queue_depth.load();
        if (is_lock(l) && depth >= 0) sample("zkr_lock_queue_depth", l, static_cast<double>(depth));
    }
    for (const auto& [l, s] : series) {
        if (!is_lock(l)) continue;
        for (std::size_t r = 0; r < reasons; ++r) {
            auto with = l;
            with.emplace_back("reason", to_string(static_cast<loss_reason>(r)));
            sample("zkr_lock_lost_total", with, static_cast<double>(s->lost[r].load()));
        }
    }
    auto is_leader = [](const labels& l) {
        auto r = l.front().second;
        return r == std::string_view("leader_latch") || r == std::string_view("leader_selector");
    };
    for (const auto& [l, s] : series) if (is_leader(l)) sample("zkr_leader", l, static_cast<double>(s->leaders.load()));
    for (const auto& [l, s] : series) {
        if (!is_leader(l)) continue;
        for (int gained = 1; gained >= 0; --gained) {
            auto with = l;
            with.emplace_back("event", gained ? "gained" : "lost");
            sample("zkr_leader_changes_total", with, static_cast<double>(s->leader_changes[gained ? 0 : 1].load()));
        }
    }
    // A recipe operation's series appears once it has happened (14 recipes x 5 operations x 4
    // outcomes of zeros would say nothing).
    for (const auto& [l, s] : series) {
        const auto* table = s->operations_seen.load(std::memory_order_acquire);
        if (!table) continue;
        for (std::size_t op = 0; op < recipe_operations; ++op) {
            for (std::size_t o = 0; o < operation_outcomes; ++o) {
                const auto& h = (*table)[op][o];
                if (h.count.load(std::memory_order_relaxed) == 0) continue;
                auto with = l;
                with.emplace_back("operation", to_string(static_cast<recipe_operation>(op)));
                with.emplace_back("outcome", to_string(static_cast<operation_outcome>(o)));
                hist("zkr_recipe_operation_seconds", with, h);
            }
        }
    }
    sample("zkr_observer_events_dropped_total", {}, static_cast<double>(st.dropped.load()));
    return out;
}

std::string metrics::prometheus_text() const {
    auto snap = snapshot();
    std::string out;
    out.reserve(snap.samples.size() * 96);
    for (const auto& f : all_families) {
        out += "# HELP ";
        out += f.name;
        out += ' ';
        out += f.help;  // our own text: no backslash or line feed to escape
        out += "\n# TYPE ";
        out += f.name;
        out += ' ';
        out += f.type;
        out += '\n';
        std::string_view base = f.name;
        for (const auto& s : snap.samples) {
            std::string_view n = s.name;
            bool mine = n == base || (f.type == "histogram" && n.size() > base.size() &&
                                      n.substr(0, base.size()) == base &&
                                      (n.substr(base.size()) == "_bucket" || n.substr(base.size()) == "_sum" ||
                                       n.substr(base.size()) == "_count"));
            if (!mine) continue;
            out += s.name;
            if (!s.labels.empty()) {
                out += '{';
                for (std::size_t i = 0; i < s.labels.size(); ++i) {
                    if (i) out += ',';
                    out += s.labels[i].first;
                    out += "=\"";
                    out += escape_label(s.labels[i].second);
                    out += '"';
                }
                out += '}';
            }
            out += ' ';
            out += format_number(s.value);
            out += '\n';
        }
    }
    return out;
}

}  // namespace zkr
