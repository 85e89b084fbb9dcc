// The counters' wire format (Curator's DistributedAtomicLong/-Integer, SharedCount).
#include "toolkit/big_endian.hpp"
#include "toolkit/blocking.hpp"

#include <catch2/catch.hpp>

#include <limits>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace big_endian_test {

using zkr::detail::decode_big_endian;
using zkr::detail::encode_big_endian;

namespace {
std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int c : b) s.push_back(static_cast<char>(c));
    return s;
}
}  // namespace

TEST_CASE("big-endian counters: Java's ByteBuffer.putLong / putInt layout, both ways", "[big_endian]") {
    CHECK(encode_big_endian<std::int64_t>(1) == bytes({0, 0, 0, 0, 0, 0, 0, 1}));
    CHECK(encode_big_endian<std::int64_t>(-2) == bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}));
    CHECK(encode_big_endian<std::int64_t>(0x0102030405060708) == bytes({1, 2, 3, 4, 5, 6, 7, 8}));
    CHECK(encode_big_endian<std::int32_t>(0x01020304) == bytes({1, 2, 3, 4}));
    CHECK(encode_big_endian<std::int32_t>(std::numeric_limits<std::int32_t>::min()) == bytes({0x80, 0, 0, 0}));
    for (std::int64_t v : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::max(),
                           std::numeric_limits<std::int64_t>::min(), std::int64_t{0x7f80}})
        CHECK(decode_big_endian<std::int64_t>(encode_big_endian(v)) == v);
    CHECK(decode_big_endian<std::int64_t>("") == 0);  // no data reads as 0 (Curator's rule)
    CHECK(decode_big_endian<std::int32_t>("") == 0);
    // Any other length is refused (Curator reads the first bytes of a longer one silently).
    CHECK_FALSE(decode_big_endian<std::int64_t>(bytes({0, 0, 0, 1})));
    CHECK_FALSE(decode_big_endian<std::int64_t>(bytes({0, 0, 0, 0, 0, 0, 0, 0, 1})));
    CHECK_FALSE(decode_big_endian<std::int32_t>(bytes({0, 0, 0, 0, 0, 0, 0, 1})));
}

TEST_CASE("blocking waits: deadlines computed without overflow", "[big_endian]") {
    using namespace std::chrono_literals;
    namespace b = zkr::detail::blocking;
    CHECK_FALSE(b::deadline_after(std::chrono::milliseconds::max()));  // for ever
    auto d = b::deadline_after(std::chrono::milliseconds::max() - 1ms);
    REQUIRE(d);
    CHECK(*d > b::clock::now() + 24h);
    auto past = b::deadline_after(-5ms);
    REQUIRE(past);
    CHECK(*past <= b::clock::now());
    auto soon = b::deadline_after(10s);
    REQUIRE(soon);
    CHECK(*soon - b::clock::now() <= 10s);
    CHECK(*soon - b::clock::now() > 9s);
}

}  // namespace big_endian_test
