#include "sequence_queue.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace sequence_queue_test {

using zkr::detail::contender;
using zkr::detail::decide;
using zkr::detail::has_prefix;
using zkr::detail::queue_kind;
using zkr::detail::queue_marker;
using zkr::detail::parse_contender;
using zkr::detail::protection_prefix;
using zkr::detail::sorted_contenders;

namespace {

std::vector<std::string> names(const std::vector<contender>& queue) {
    std::vector<std::string> out;
    for (const auto& c : queue) out.push_back(c.name);
    return out;
}

}  // namespace

TEST_CASE("lock markers are Curator's", "[sequence_queue]") {
    CHECK(queue_marker(queue_kind::exclusive) == "lock-");
    CHECK(queue_marker(queue_kind::read) == "__READ__");
    CHECK(queue_marker(queue_kind::write) == "__WRIT__");
}

TEST_CASE("parse_contender: mutex names", "[sequence_queue]") {
    SECTION("protected name") {
        auto c = parse_contender("_c_0f3c9a1e-4b2d-4c55-9e8a-123456789abc-lock-0000000007", queue_kind::exclusive);
        REQUIRE(c);
        CHECK(c->name == "_c_0f3c9a1e-4b2d-4c55-9e8a-123456789abc-lock-0000000007");
        CHECK(c->kind == queue_kind::exclusive);
        CHECK(c->sequence == 7);
    }
    SECTION("unprotected Curator name") {
        auto c = parse_contender("lock-0000000123", queue_kind::exclusive);
        REQUIRE(c);
        CHECK(c->sequence == 123);
        CHECK(c->kind == queue_kind::exclusive);
    }
    SECTION("the text after the LAST marker is the sequence") {
        auto c = parse_contender("_c_lock-5-lock-0000000042", queue_kind::exclusive);
        REQUIRE(c);
        CHECK(c->sequence == 42);
        // The digits after an earlier marker do not count when the last one has bad digits.
        CHECK_FALSE(parse_contender("lock-0000000001-lock-xyz", queue_kind::exclusive));
    }
    SECTION("large sequence") {
        auto c = parse_contender("lock-2147483647", queue_kind::exclusive);
        REQUIRE(c);
        CHECK(c->sequence == 2147483647);
    }
    SECTION("non-lock children are ignored") {
        CHECK_FALSE(parse_contender("leases", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-__READ__0000000001", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-__WRIT__0000000001", queue_kind::exclusive));
    }
    SECTION("bad digits are rejected") {
        CHECK_FALSE(parse_contender("lock-", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-lock-", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-lock-00000000x1", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-lock-0000000001x", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-lock- 0000000001", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-lock-+0000000001", queue_kind::exclusive));
        CHECK_FALSE(parse_contender("_c_abc-lock-99999999999999999999999", queue_kind::exclusive));  // overflows int64
    }
}

TEST_CASE("parse_contender: read/write names", "[sequence_queue]") {
    auto r = parse_contender("_c_abc-__READ__0000000003", queue_kind::write);
    REQUIRE(r);
    CHECK(r->kind == queue_kind::read);
    CHECK(r->sequence == 3);
    CHECK(r->name == "_c_abc-__READ__0000000003");

    auto w = parse_contender("_c_abc-__WRIT__0000000004", queue_kind::write);
    REQUIRE(w);
    CHECK(w->kind == queue_kind::write);
    CHECK(w->sequence == 4);

    // Unprotected Curator names.
    auto r2 = parse_contender("__READ__0000000010", queue_kind::write);
    REQUIRE(r2);
    CHECK(r2->kind == queue_kind::read);
    CHECK(r2->sequence == 10);

    SECTION("mutex names are not part of a read/write lock") {
        CHECK_FALSE(parse_contender("_c_abc-lock-0000000001", queue_kind::write));
        CHECK_FALSE(parse_contender("something-else", queue_kind::write));
    }
    SECTION("bad digits are rejected") {
        CHECK_FALSE(parse_contender("_c_abc-__READ__", queue_kind::write));
        CHECK_FALSE(parse_contender("_c_abc-__WRIT__", queue_kind::write));
        CHECK_FALSE(parse_contender("_c_abc-__READ__12z", queue_kind::write));
        CHECK_FALSE(parse_contender("_c_abc-__WRIT__0000000001.tmp", queue_kind::write));
    }
    SECTION("both markers: the later one names the node") {
        auto a = parse_contender("__WRIT__0000000001__READ__0000000002", queue_kind::write);
        REQUIRE(a);
        CHECK(a->kind == queue_kind::read);
        CHECK(a->sequence == 2);
        auto b = parse_contender("__READ__0000000001__WRIT__0000000005", queue_kind::write);
        REQUIRE(b);
        CHECK(b->kind == queue_kind::write);
        CHECK(b->sequence == 5);
        // The last marker's digits are bad: not a lock node, whatever precedes.
        CHECK_FALSE(parse_contender("__READ__0000000001__WRIT__", queue_kind::write));
    }
}

TEST_CASE("sorted_contenders orders by sequence, across kinds, dropping non-lock children", "[sequence_queue]") {
    SECTION("mutex") {
        std::vector<std::string> children{"_c_c-lock-0000000012", "junk", "_c_a-lock-0000000010",
                                          "_c_b-lock-0000000002", "_c_d-__READ__0000000001", "_c_e-lock-"};
        auto q = sorted_contenders(children, queue_kind::exclusive);
        CHECK(names(q) == std::vector<std::string>{"_c_b-lock-0000000002", "_c_a-lock-0000000010",
                                                   "_c_c-lock-0000000012"});
        CHECK(q[0].sequence == 2);
        CHECK(q[2].sequence == 12);
    }
    SECTION("read/write: the uuid prefix does not decide the order, the sequence does") {
        std::vector<std::string> children{"_c_zzz-__READ__0000000005", "_c_aaa-__WRIT__0000000007",
                                          "_c_mmm-__WRIT__0000000001", "_c_bbb-__READ__0000000003",
                                          "_c_ccc-lock-0000000000", "other"};
        auto q = sorted_contenders(children, queue_kind::write);
        REQUIRE(q.size() == 4);
        CHECK(names(q) == std::vector<std::string>{"_c_mmm-__WRIT__0000000001", "_c_bbb-__READ__0000000003",
                                                   "_c_zzz-__READ__0000000005", "_c_aaa-__WRIT__0000000007"});
        CHECK(q[0].kind == queue_kind::write);
        CHECK(q[1].kind == queue_kind::read);
        CHECK(q[2].kind == queue_kind::read);
        CHECK(q[3].kind == queue_kind::write);
    }
    SECTION("numeric, not lexicographic, order") {
        auto q = sorted_contenders({"lock-100", "lock-99", "lock-0000000098"}, queue_kind::exclusive);
        CHECK(names(q) == std::vector<std::string>{"lock-0000000098", "lock-99", "lock-100"});
    }
    SECTION("equal sequences fall back to the name") {
        auto q = sorted_contenders({"_c_b-lock-0000000001", "_c_a-lock-0000000001"}, queue_kind::exclusive);
        CHECK(names(q) == std::vector<std::string>{"_c_a-lock-0000000001", "_c_b-lock-0000000001"});
    }
    SECTION("empty") {
        CHECK(sorted_contenders({}, queue_kind::exclusive).empty());
        CHECK(sorted_contenders({"a", "b"}, queue_kind::write).empty());
    }
}

TEST_CASE("decide: exclusive lock", "[sequence_queue]") {
    auto q = sorted_contenders({"_c_c-lock-0000000003", "_c_a-lock-0000000001", "_c_b-lock-0000000002"}, queue_kind::exclusive);

    auto first = decide(q, "_c_a-lock-0000000001");
    CHECK(first.holds);
    CHECK(first.watch.empty());

    auto second = decide(q, "_c_b-lock-0000000002");
    CHECK_FALSE(second.holds);
    CHECK(second.watch == "_c_a-lock-0000000001");

    auto third = decide(q, "_c_c-lock-0000000003");
    CHECK_FALSE(third.holds);
    CHECK(third.watch == "_c_b-lock-0000000002");  // the immediate predecessor, not the head

    SECTION("alone") {
        auto solo = sorted_contenders({"_c_a-lock-0000000009"}, queue_kind::exclusive);
        CHECK(decide(solo, "_c_a-lock-0000000009").holds);
    }
    SECTION("not in the queue: neither holds nor watches") {
        auto d = decide(q, "_c_x-lock-0000000004");
        CHECK_FALSE(d.holds);
        CHECK(d.watch.empty());
    }
}

TEST_CASE("decide: write lock", "[sequence_queue]") {
    auto q = sorted_contenders({"_c_r1-__READ__0000000001", "_c_r2-__READ__0000000002", "_c_w1-__WRIT__0000000003",
                                "_c_w2-__WRIT__0000000004"},
                               queue_kind::write);
    // A writer waits for everyone before it, readers included: it watches its immediate predecessor.
    auto w1 = decide(q, "_c_w1-__WRIT__0000000003");
    CHECK_FALSE(w1.holds);
    CHECK(w1.watch == "_c_r2-__READ__0000000002");
    auto w2 = decide(q, "_c_w2-__WRIT__0000000004");
    CHECK_FALSE(w2.holds);
    CHECK(w2.watch == "_c_w1-__WRIT__0000000003");

    auto head = sorted_contenders({"_c_w-__WRIT__0000000000", "_c_r-__READ__0000000001"}, queue_kind::write);
    CHECK(decide(head, "_c_w-__WRIT__0000000000").holds);
}

TEST_CASE("decide: read lock", "[sequence_queue]") {
    auto q = sorted_contenders({"_c_r1-__READ__0000000001", "_c_w1-__WRIT__0000000002", "_c_w2-__WRIT__0000000003",
                                "_c_r2-__READ__0000000004", "_c_r3-__READ__0000000005"},
                               queue_kind::write);
    SECTION("no writer precedes it: holds, even behind readers") {
        auto r1 = decide(q, "_c_r1-__READ__0000000001");
        CHECK(r1.holds);
        auto readers = sorted_contenders(
            {"_c_a-__READ__0000000001", "_c_b-__READ__0000000002", "_c_c-__READ__0000000003"}, queue_kind::write);
        CHECK(decide(readers, "_c_c-__READ__0000000003").holds);
    }
    SECTION("behind writers: watches the NEAREST preceding writer") {
        auto r2 = decide(q, "_c_r2-__READ__0000000004");
        CHECK_FALSE(r2.holds);
        CHECK(r2.watch == "_c_w2-__WRIT__0000000003");
        // A reader behind a reader behind a writer skips the reader.
        auto r3 = decide(q, "_c_r3-__READ__0000000005");
        CHECK_FALSE(r3.holds);
        CHECK(r3.watch == "_c_w2-__WRIT__0000000003");
    }
    SECTION("the nearest writer leaves: the next one is watched") {
        auto pruned = sorted_contenders({"_c_r1-__READ__0000000001", "_c_w1-__WRIT__0000000002",
                                         "_c_r2-__READ__0000000004"},
                                        queue_kind::write);
        auto r2 = decide(pruned, "_c_r2-__READ__0000000004");
        CHECK_FALSE(r2.holds);
        CHECK(r2.watch == "_c_w1-__WRIT__0000000002");
    }
}

TEST_CASE("decide: the ignored node (downgrade) does not block", "[sequence_queue]") {
    SECTION("a reader behind its own thread's write node holds") {
        auto q = sorted_contenders({"_c_me-__WRIT__0000000001", "_c_me2-__READ__0000000002"}, queue_kind::write);
        CHECK_FALSE(decide(q, "_c_me2-__READ__0000000002").holds);
        auto d = decide(q, "_c_me2-__READ__0000000002", "_c_me-__WRIT__0000000001");
        CHECK(d.holds);
        CHECK(d.watch.empty());
    }
    SECTION("only the ignored writer is skipped; an earlier foreign writer still blocks") {
        auto q = sorted_contenders(
            {"_c_x-__WRIT__0000000001", "_c_me-__WRIT__0000000002", "_c_me2-__READ__0000000003"}, queue_kind::write);
        auto d = decide(q, "_c_me2-__READ__0000000003", "_c_me-__WRIT__0000000002");
        CHECK_FALSE(d.holds);
        CHECK(d.watch == "_c_x-__WRIT__0000000001");
    }
    SECTION("exclusive: the ignored predecessor is skipped") {
        auto q = sorted_contenders({"_c_a-lock-0000000001", "_c_b-lock-0000000002", "_c_c-lock-0000000003"}, queue_kind::exclusive);
        auto d = decide(q, "_c_c-lock-0000000003", "_c_b-lock-0000000002");
        CHECK_FALSE(d.holds);
        CHECK(d.watch == "_c_a-lock-0000000001");
        CHECK(decide(q, "_c_b-lock-0000000002", "_c_a-lock-0000000001").holds);
    }
}

TEST_CASE("protection prefix", "[sequence_queue]") {
    CHECK(protection_prefix("u1") == "_c_u1-");
    std::string uuid = "0f3c9a1e-4b2d-4c55-9e8a-123456789abc";
    std::string prefix = protection_prefix(uuid);
    CHECK(prefix == "_c_0f3c9a1e-4b2d-4c55-9e8a-123456789abc-");

    CHECK(has_prefix(prefix + "lock-0000000001", prefix));
    CHECK(has_prefix(prefix + "__READ__0000000001", prefix));
    CHECK(has_prefix(prefix, prefix));
    CHECK_FALSE(has_prefix("_c_0f3c9a1e-lock-0000000001", prefix));
    CHECK_FALSE(has_prefix("x" + prefix + "lock-0000000001", prefix));
    CHECK_FALSE(has_prefix("_c_", prefix));  // shorter than the prefix
    CHECK_FALSE(has_prefix("", prefix));
    // u1 is not a prefix of u10's nodes thanks to the trailing '-'.
    CHECK_FALSE(has_prefix(protection_prefix("u10") + "lock-0000000001", protection_prefix("u1")));
    CHECK(has_prefix("anything", ""));
}

}  // namespace sequence_queue_test
