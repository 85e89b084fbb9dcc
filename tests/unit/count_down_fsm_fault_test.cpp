// The count-down latch's count-down (recipes/barrier/count_down_fsm.hpp) against a model latch,
// with one fault at every request it sends: the retry policy giving up before the request was
// applied, or after (its answer lost for good), the reply lost and the request resent (the
// session layer resends a transaction), a rival count-down landing just before. Whatever
// happens: the count is lowered by ours at most once, exactly once when the call says done, and
// only where our key child stands; "released" stands once the count is 0.
#include "barrier/count_down_fsm.hpp"
#include "toolkit/big_endian.hpp"
#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace count_down_fsm_fault_test {

namespace {

using namespace zkr;
using namespace zkr::detail;

constexpr const char* latch_path = "/jobs/latch";
const std::string our_key = std::string(latch_path) + "/cd-ours";
const std::string released = std::string(latch_path) + "/released";

struct model {
    bool exists = true;
    std::int64_t value = 3;
    std::int32_t version = 5;
    std::set<std::string> children;  // full paths
    int rivals = 0;

    void rival_counts_down() {
        if (!exists || value <= 0) return;
        ++rivals;
        children.insert(std::string(latch_path) + "/cd-rival-" + std::to_string(rivals));
        --value;
        ++version;
        if (value == 0) children.insert(released);
    }
    bool ours_applied() const { return children.count(our_key) > 0; }
};

enum class fault { none, gave_up_before, gave_up_after, closed_after, reply_lost_resent, rival_before };

counter_reply serve(model& m, const count_down_fsm::request& q) {
    counter_reply x;
    auto error = [&](errc e) { x.error = make_error_code(e); };
    std::visit(
        [&](const auto& s) {
            using S = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<S, counter_step::read>) {
                if (!m.exists) return error(errc::no_node);
                data_result d;
                d.data = encode_big_endian<std::int64_t>(m.value);
                d.stat.version = m.version;
                x.value = d;
            } else if constexpr (std::is_same_v<S, counter_step::create>) {
                REQUIRE(s.path == released);
                if (m.children.count(s.path)) return error(errc::node_exists);
                m.children.insert(s.path);
                x.value = create_result{};
            } else if constexpr (std::is_same_v<S, counter_step::write>) {
                // A transaction: every op checked in order, all applied or none.
                std::vector<multi_op_result> results(s.ops.size());
                std::size_t failed = s.ops.size();
                errc why{};
                std::set<std::string> made = m.children;
                for (std::size_t i = 0; i < s.ops.size() && failed == s.ops.size(); ++i) {
                    if (auto* c = std::get_if<op::create>(&s.ops[i])) {
                        if (made.count(c->path)) failed = i, why = errc::node_exists;
                        else made.insert(c->path);
                    } else if (auto* set = std::get_if<op::set_data>(&s.ops[i])) {
                        REQUIRE(set->path == latch_path);
                        if (!m.exists) failed = i, why = errc::no_node;
                        else if (set->version != m.version) failed = i, why = errc::bad_version;
                    } else {
                        FAIL("an op the count-down never sends");
                    }
                }
                if (failed < s.ops.size()) {
                    for (auto& r : results) r.error = make_error_code(errc::runtime_inconsistency);
                    results[failed].error = make_error_code(why);
                    x.error = make_error_code(why);
                } else {
                    m.children = made;
                    for (auto& o : s.ops) {
                        if (auto* set = std::get_if<op::set_data>(&o)) {
                            m.value = *decode_big_endian<std::int64_t>(set->data);
                            ++m.version;
                        }
                    }
                }
                x.value = results;
            }
        },
        q);
    return x;
}

struct outcome {
    counter_step::done done;
    int steps = 0;
};

outcome run(model& m, fault f, int at) {
    count_down_fsm machine(latch_path, our_key);
    auto a = machine.start();
    outcome o;
    for (int n = 0; n < 200; ++n) {
        if (auto* d = std::get_if<counter_step::done>(&a.next)) {
            o.done = *d;
            return o;
        }
        const fault here = o.steps++ == at ? f : fault::none;
        if (here == fault::rival_before) m.rival_counts_down();
        counter_reply r;
        switch (here) {
        case fault::none:
        case fault::rival_before: r = serve(m, a.next); break;
        case fault::gave_up_before: r.error = make_error_code(errc::connection_loss); break;
        case fault::gave_up_after:
            serve(m, a.next);
            r = counter_reply{};
            r.error = make_error_code(errc::connection_loss);
            break;
        case fault::closed_after:  // applied; the client closes before its answer
            serve(m, a.next);
            r = counter_reply{};
            r.error = make_error_code(errc::client_closed);
            break;
        case fault::reply_lost_resent:
            serve(m, a.next);
            r = serve(m, a.next);
            break;
        }
        a = machine.on(r);
    }
    FAIL("the count-down did not end within 200 steps");
    return o;
}

const char* name_of(fault f) {
    switch (f) {
    case fault::none: return "none";
    case fault::gave_up_before: return "given up before it was applied";
    case fault::gave_up_after: return "given up after it was applied";
    case fault::closed_after: return "the client closed after it was applied";
    case fault::reply_lost_resent: return "reply lost, resent";
    case fault::rival_before: return "a rival count-down first";
    }
    return "?";
}

// The latch as each scenario starts it: a count of 3, of 1 (ours releases it), of 0 (released
// already), and a "released" made by hand while the count is 1.
model start(int scenario) {
    model m;
    if (scenario == 1) m.value = 1;
    if (scenario == 2) {
        m.value = 0;
        m.children.insert(released);
    }
    if (scenario == 3) {
        m.value = 1;
        m.children.insert(released);
    }
    return m;
}

}  // namespace

TEST_CASE("count-down machine: a fault at any request counts ours down at most once, exactly once when it says done",
          "[count_down_latch][faults]") {
    const fault faults[] = {fault::gave_up_before, fault::gave_up_after, fault::closed_after, fault::reply_lost_resent,
                            fault::rival_before};
    for (int scenario = 0; scenario < 4; ++scenario) {
        auto clean_model = start(scenario);
        const auto before = clean_model.value;
        auto clean = run(clean_model, fault::none, -1);
        INFO("scenario " << scenario << " (count " << before << ")");
        REQUIRE_FALSE(clean.done.error);
        CHECK(clean_model.value == std::max<std::int64_t>(0, before - 1));
        CHECK(clean_model.children.count(released) == (clean_model.value == 0 ? 1u : 0u));
        for (fault f : faults) {
            for (int at = 0; at < clean.steps + 3; ++at) {
                INFO(name_of(f) << " at request " << at);
                auto m = start(scenario);
                auto o = run(m, f, at);
                // Exactly once by its key: the count is lowered by the rivals, and by ours only
                // where our key stands (a count already at 0 is not lowered).
                const std::int64_t lowered = before - m.value;
                if (before > 0) CHECK(lowered == m.rivals + (m.ours_applied() ? 1 : 0));
                else CHECK(lowered == 0);
                if (!o.done.error) {
                    if (before - m.rivals > 0) CHECK(m.ours_applied());  // done: ours counted
                } else if (o.done.error == errc::outcome_unknown) {
                    // Only a transaction given up on leaves it open (applied or not: the client
                    // cannot tell), and the message names the key that says which.
                    CHECK((f == fault::gave_up_after || f == fault::gave_up_before || f == fault::closed_after));
                    CHECK_THAT(o.done.what, Catch::Contains(our_key));
                } else {
                    CHECK((o.done.error == errc::connection_loss || (f == fault::closed_after && o.done.error == errc::client_closed)));
                    CHECK_FALSE(m.ours_applied());  // failed: not applied
                }
                if (m.value == 0 && !o.done.error) CHECK(m.children.count(released));
                CHECK(m.value >= 0);
            }
        }
    }
}

TEST_CASE("count-down machine: a latch with no count, or a node that holds none, is an error naming it",
          "[count_down_latch][faults]") {
    model none;
    none.exists = false;
    auto o = run(none, fault::none, -1);
    CHECK(o.done.error == errc::no_node);
    CHECK_THAT(o.done.what, Catch::Contains(latch_path) && Catch::Contains("try_set_count"));

    count_down_fsm machine(latch_path, our_key);
    machine.start();
    counter_reply r;
    data_result d;
    d.data = "abc";
    r.value = d;
    auto a = machine.on(r);
    auto* done = std::get_if<counter_step::done>(&a.next);
    REQUIRE(done);
    CHECK(done->error == errc::bad_arguments);
    CHECK_THAT(done->what, Catch::Contains(latch_path) && Catch::Contains("3 bytes"));
}

}  // namespace count_down_fsm_fault_test
