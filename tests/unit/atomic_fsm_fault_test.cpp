// The counters' machine (recipes/atomic/atomic_fsm.hpp) against a model counter, with one fault
// injected at every request it sends, the way Boost.MySQL's check_network_errors does it: a reply
// lost and the request resent, a request given up on before or after it was applied, the session
// expiring before a request or between its application and its resend, another writer's change
// landing first. Whatever happens, a change is applied at most once, exactly once when the
// machine says it succeeded, never when it says it failed for sure; and the object's memory
// taken back serves the next operation, which is applied exactly once.
#include "atomic/atomic_fsm.hpp"
#include "toolkit/big_endian.hpp"
#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace atomic_fsm_fault_test {

namespace {

using namespace zkr;
using namespace zkr::detail;

constexpr const char* counter_path = "/app/counters/c";

struct model {
    struct node {
        std::string data;
        std::int32_t version = 0;
        std::int64_t mzxid = 0;
        std::int64_t owner = 0;
    };
    std::map<std::string, node> nodes{{"/", {}}};
    std::int64_t zxid = 100;
    std::int64_t session = 1;
    int our_applications = 0;  // transactions applied that bumped a record of ours

    zkr::stat stat_of(const std::string& path) const {
        zkr::stat s;
        const auto& n = nodes.at(path);
        s.version = n.version;
        s.mzxid = n.mzxid;
        s.ephemeral_owner = n.owner;
        std::string prefix = path == "/" ? "/" : path + "/";
        for (const auto& [p, _] : nodes)
            if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0 && p.find('/', prefix.size()) == std::string::npos)
                ++s.num_children;
        return s;
    }
    bool has(const std::string& p) const { return nodes.count(p) > 0; }
    std::int64_t value() const { return decode_big_endian<std::int64_t>(nodes.at(counter_path).data).value(); }

    counter_reply read(const std::string& path) {
        counter_reply r;
        if (!has(path)) r.error = make_error_code(errc::no_node);
        else r.value = data_result{nodes[path].data, stat_of(path), {}};
        return r;
    }
    counter_reply exists(const std::string& path) {
        counter_reply r;
        exists_result e;
        e.exists = has(path);
        if (e.exists) e.stat = stat_of(path);
        r.value = e;
        return r;
    }
    counter_reply create(const std::string& path, const std::string& data, create_mode mode) {
        counter_reply r;
        if (has(path)) r.error = make_error_code(errc::node_exists);
        else if (!has(parent_path(path))) r.error = make_error_code(errc::no_node);
        else {
            nodes[path] = node{data, 0, ++zxid, mode == create_mode::ephemeral ? session : 0};
            r.value = create_result{path, stat_of(path)};
        }
        return r;
    }
    counter_reply make_parents(const std::string& path) {
        std::string at;
        for (std::size_t i = 1; i <= path.size(); ++i) {
            if (i == path.size() || path[i] == '/') {
                at = path.substr(0, i);
                if (!has(at)) nodes[at] = node{"", 0, ++zxid, 0};
            }
        }
        return {};
    }
    counter_reply multi(const std::vector<multi_op>& ops) {
        counter_reply r;
        std::vector<multi_op_result> results(ops.size());
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const auto& set = std::get<op::set_data>(ops[i]);
            error_code e;
            if (!has(set.path)) e = make_error_code(errc::no_node);
            else if (set.version != -1 && nodes[set.path].version != set.version) e = make_error_code(errc::bad_version);
            if (e) {
                for (auto& x : results) x.error = make_error_code(errc::runtime_inconsistency);
                results[i].error = e;
                r.error = e;
                r.value = results;
                return r;
            }
        }
        ++zxid;
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const auto& set = std::get<op::set_data>(ops[i]);
            auto& n = nodes[set.path];
            n.data = set.data;
            ++n.version;
            n.mzxid = zxid;
            results[i].stat = stat_of(set.path);
            if (set.path.find("/zkr-writer-") != std::string::npos) ++our_applications;
        }
        r.value = results;
        return r;
    }
    counter_reply apply(const atomic_fsm::request& q) {
        return std::visit(
            [&](const auto& s) -> counter_reply {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, counter_step::read>) return read(s.path);
                else if constexpr (std::is_same_v<S, counter_step::make_parents>) return make_parents(s.path);
                else if constexpr (std::is_same_v<S, counter_step::create>) return create(s.path, s.data, s.mode);
                else if constexpr (std::is_same_v<S, counter_step::exists>) return exists(s.path);
                else if constexpr (std::is_same_v<S, counter_step::write>) return multi(s.ops);
                else if constexpr (std::is_same_v<S, counter_step::promote>) {
                    counter_reply r;
                    r.lock_taken = true;
                    return r;
                }
                else return {};
            },
            q);
    }
    void expire() {
        for (auto it = nodes.begin(); it != nodes.end();) it = it->second.owner == session ? nodes.erase(it) : std::next(it);
        ++session;
    }
    void foreign_write() {
        auto& n = nodes[counter_path];
        n.data = encode_big_endian<std::int64_t>(value() + 1000);
        ++n.version;
        n.mzxid = ++zxid;
    }
};

enum class fault {
    none,
    reply_lost_resent,   // applied, the reply lost, resent by the session layer: the resend's reply
    gave_up_unapplied,   // the retry policy gave up before it reached the server
    gave_up_applied,     // ... after it was applied
    expired_before,      // the session expired first; sent on the new one
    expired_resent,      // applied, the session expired, resent on the new session
    foreign_first,       // another writer changed the counter just before
};
const fault all_faults[] = {fault::reply_lost_resent, fault::gave_up_unapplied, fault::gave_up_applied,
                            fault::expired_before,    fault::expired_resent,    fault::foreign_first};
const char* name_of(fault f) {
    switch (f) {
    case fault::none: return "none";
    case fault::reply_lost_resent: return "reply lost, resent";
    case fault::gave_up_unapplied: return "given up, not applied";
    case fault::gave_up_applied: return "given up, applied";
    case fault::expired_before: return "session expired before";
    case fault::expired_resent: return "applied, session expired, resent";
    case fault::foreign_first: return "another writer first";
    }
    return "?";
}

struct outcome {
    counter_step::done done;
    counter_memory memory;
    int requests = 0;
};

int uuid_counter = 0;
std::string next_uuid() { return "u" + std::to_string(++uuid_counter); }

// Runs one operation, with `f` injected at request number `at` (0-based).
outcome run(model& m, counter_change change, counter_memory memory, fault f, int at, fault f2 = fault::none, int at2 = -1,
            int width = 8) {
    atomic_fsm machine(counter_path, width, change, 100, 0, std::move(memory), &next_uuid, "test");
    auto session = [&] { return counter_session{m.session, machine.memory().writer_session == m.session}; };
    auto a = machine.start(session());
    outcome o;
    for (int steps = 0; steps < 200; ++steps) {
        for (const auto& d : a.deletes) m.nodes.erase(d);  // guaranteed deletes go first
        if (auto* done = std::get_if<counter_step::done>(&a.next)) {
            o.done = *done;
            o.memory = machine.memory();
            return o;
        }
        const int n = o.requests++;
        const fault here = n == at ? f : n == at2 ? f2 : fault::none;
        counter_reply r;
        switch (here) {
        case fault::none: r = m.apply(a.next); break;
        case fault::reply_lost_resent:
            m.apply(a.next);
            r = m.apply(a.next);
            break;
        case fault::gave_up_unapplied: r.error = make_error_code(errc::connection_loss); break;
        case fault::gave_up_applied:
            m.apply(a.next);
            r = counter_reply{};
            r.error = make_error_code(errc::connection_loss);
            break;
        case fault::expired_before:
            m.expire();
            r = m.apply(a.next);
            break;
        case fault::expired_resent:
            m.apply(a.next);
            m.expire();
            r = m.apply(a.next);
            break;
        case fault::foreign_first:
            if (m.has(counter_path)) m.foreign_write();
            r = m.apply(a.next);
            break;
        }
        a = machine.on(r, session());
    }
    FAIL("the machine did not end within 200 steps");
    return o;
}

// A counter node with `value`, as a previous operation of ours left it (or none at all).
model with_counter(std::optional<std::int64_t> value) {
    model m;
    if (value) {
        m.make_parents(counter_path);
        m.nodes[counter_path].data = encode_big_endian<std::int64_t>(*value);
    }
    return m;
}

void check_every_fault(const std::string& scenario, std::function<model()> make_model, std::function<counter_memory(model&)> warm_up,
                       counter_change change, std::function<std::int64_t(std::int64_t)> expected_post) {
    // The clean run counts the requests; then each fault at each of them.
    auto clean_model = make_model();
    auto clean_memory = warm_up(clean_model);
    auto clean = run(clean_model, change, clean_memory, fault::none, -1);
    REQUIRE_FALSE(clean.done.error);
    REQUIRE(clean.done.result.succeeded);
    REQUIRE(clean_model.value() == clean.done.result.post);
    for (fault f : all_faults) {
        for (int at = 0; at < clean.requests + 2; ++at) {
            INFO(scenario << ": " << name_of(f) << " at request " << at);
            auto m = make_model();
            auto memory = warm_up(m);
            const int applied_before = m.our_applications;
            auto o = run(m, change, memory, f, at);
            const int applied = m.our_applications - applied_before;
            CHECK(applied <= 1);
            if (!o.done.error && o.done.result.succeeded) {
                CHECK(applied == 1);
                CHECK(o.done.result.post == expected_post(o.done.result.pre));
                CHECK(m.value() == o.done.result.post);  // nobody writes after it in these runs
            } else if (o.done.error != errc::outcome_unknown) {
                CHECK(applied == 0);  // failed for sure: nothing applied
            }
            // Whatever the first did, the object's next operation is applied exactly once, and the
            // counter then holds what its answer says.
            const int applied_mid = m.our_applications;
            auto next = run(m, {counter_change::kind::add, 1, 0}, o.memory, fault::none, -1);
            REQUIRE_FALSE(next.done.error);
            CHECK(next.done.result.succeeded);
            CHECK(m.our_applications - applied_mid == 1);
            CHECK(next.done.result.post == next.done.result.pre + 1);
            CHECK(m.value() == next.done.result.post);
            // At most one record of ours is left (those of ended sessions went with them).
            int records = 0;
            for (const auto& [p, n] : m.nodes) records += p.find("/zkr-writer-") != std::string::npos ? 1 : 0;
            CHECK(records <= 1);
        }
    }
}

std::function<counter_memory(model&)> cold() {
    return [](model&) { return counter_memory{}; };
}
// A previous add of ours: the object remembers the value, the version and its record.
std::function<counter_memory(model&)> warm() {
    return [](model& m) { return run(m, {counter_change::kind::add, 1, 0}, {}, fault::none, -1).memory; };
}

}  // namespace

TEST_CASE("atomic machine: a fault at any request of an add never applies it twice, and the next add is exact", "[atomic][faults]") {
    auto add5 = [](std::int64_t pre) { return pre + 5; };
    check_every_fault("new counter, cold object", [] { return with_counter(std::nullopt); }, cold(), {counter_change::kind::add, 5, 0}, add5);
    check_every_fault("existing counter, cold object", [] { return with_counter(7); }, cold(), {counter_change::kind::add, 5, 0}, add5);
    check_every_fault("existing counter, warm object", [] { return with_counter(7); }, warm(), {counter_change::kind::add, 5, 0}, add5);
}

TEST_CASE("atomic machine: a fault at any request of a compare-and-set or a set never applies it twice", "[atomic][faults]") {
    check_every_fault("compare-and-set", [] { return with_counter(7); }, warm(), {counter_change::kind::compare_and_set, 8, 42},
                      [](std::int64_t) { return 42; });
    check_every_fault("set", [] { return with_counter(7); }, warm(), {counter_change::kind::set, -3, 0}, [](std::int64_t) { return -3; });
}

TEST_CASE("atomic machine: a warm object's uncontended add is one request, a cold one's reads and makes its record", "[atomic][faults]") {
    auto m = with_counter(7);
    auto memory = warm()(m);
    auto o = run(m, {counter_change::kind::add, 1, 0}, memory, fault::none, -1);
    CHECK(o.requests == 1);
    CHECK(o.done.result.pre == 8);
    CHECK(o.done.result.post == 9);
    CHECK(o.done.result.attempts == 1);

    auto fresh = with_counter(std::nullopt);
    auto first = run(fresh, {counter_change::kind::add, 1, 0}, {}, fault::none, -1);
    CHECK(first.requests == 6);  // read, parents, counter, read, record, write
    CHECK(fresh.value() == 1);
}

TEST_CASE("atomic machine: a lost race reads again and applies once, a compare that fails writes nothing", "[atomic][faults]") {
    auto m = with_counter(7);
    auto memory = warm()(m);
    m.foreign_write();  // 1008, our memory says 8
    auto o = run(m, {counter_change::kind::add, 1, 0}, memory, fault::none, -1);
    CHECK(o.done.result.succeeded);
    CHECK(o.done.result.pre == 1008);
    CHECK(o.done.result.attempts == 2);
    CHECK(m.value() == 1009);

    const int applied = m.our_applications;
    auto cas = run(m, {counter_change::kind::compare_and_set, 5, 6}, o.memory, fault::none, -1);
    CHECK_FALSE(cas.done.error);
    CHECK_FALSE(cas.done.result.succeeded);
    CHECK(cas.done.result.pre == 1009);
    CHECK(m.our_applications == applied);
}

TEST_CASE("atomic machine: a counter that holds no counter is bad_arguments naming the path and length", "[atomic][faults]") {
    auto m = with_counter(7);
    m.nodes[counter_path].data = "abc";
    auto o = run(m, {counter_change::kind::add, 1, 0}, {}, fault::none, -1);
    CHECK(o.done.error == errc::bad_arguments);
    CHECK_THAT(o.done.what, Catch::Contains("/app/counters/c") && Catch::Contains("3 bytes"));
    CHECK(m.our_applications == 0);
}

TEST_CASE("atomic machine: a change whose session was lost, then whose settling read failed, is outcome_unknown", "[atomic][faults]") {
    auto m = with_counter(7);
    auto memory = warm()(m);
    // The warm add is one request (the write); applied, its session expired, resent on the new
    // one (its record gone: no_node); the read that would settle it is given up on.
    auto o = run(m, {counter_change::kind::add, 1, 0}, memory, fault::expired_resent, 0, fault::gave_up_unapplied, 1);
    CHECK(o.done.error == errc::outcome_unknown);  // applied: a caller told connection_loss might do it again
    CHECK(m.our_applications == 2);                 // the warm-up's and this one's, once
    CHECK(m.value() == 9);
}

}  // namespace atomic_fsm_fault_test
