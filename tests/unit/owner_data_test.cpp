#include "owner_data.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace owner_data_test {

using zkr::detail::current_owner_data;
using zkr::detail::decode_owner;
using zkr::detail::encode_owner;

TEST_CASE("owner data: encode format", "[owner_data]") {
    CHECK(encode_owner("node-7.example.com", 1234, 5678) == "zkr:1;host=node-7.example.com;pid=1234;thread=5678");
    CHECK(encode_owner("", 1, 2) == "zkr:1;host=;pid=1;thread=2");
}

TEST_CASE("owner data: encode/decode round trip", "[owner_data]") {
    std::string data = encode_owner("build-box", 4242, 4243);
    auto owner = decode_owner(data);
    CHECK(owner.is_zkr());
    CHECK(owner.host == "build-box");
    CHECK(owner.pid == 4242);
    CHECK(owner.thread == 4243);
    CHECK(owner.raw == data);

    auto big = decode_owner(encode_owner("h", 4194304, INT64_C(9007199254740993)));
    CHECK(big.pid == 4194304);
    CHECK(big.thread == INT64_C(9007199254740993));
}

TEST_CASE("owner data: semicolons and equals signs in the host name are sanitized", "[owner_data]") {
    std::string data = encode_owner("we;ird=host;pid=1", 77, 78);
    CHECK(data == "zkr:1;host=we_ird_host_pid_1;pid=77;thread=78");
    auto owner = decode_owner(data);
    CHECK(owner.host == "we_ird_host_pid_1");
    CHECK(owner.pid == 77);  // not the 1 smuggled in the host name
    CHECK(owner.thread == 78);
}

TEST_CASE("owner data: foreign data gives only raw", "[owner_data]") {
    for (std::string foreign : {"127.0.0.1", "", "10.0.0.5", "zkr:2;host=a;pid=1;thread=2", "zkr:1",
                                "zkr:1;garbage", "zkr:1;host=a;pid=notanumber;thread=3", "zkr:1;host=a;thread=3",
                                "ZKR:1;host=a;pid=1;thread=2"}) {
        INFO(foreign);
        auto owner = decode_owner(foreign);
        CHECK_FALSE(owner.is_zkr());
        CHECK(owner.raw == foreign);
        CHECK(owner.host.empty());
        CHECK(owner.pid == 0);
        CHECK(owner.thread == 0);
    }
    // Binary data (not text) too.
    std::string binary("\x00\x01\xff", 3);
    auto owner = decode_owner(binary);
    CHECK_FALSE(owner.is_zkr());
    CHECK(owner.raw == binary);
}

TEST_CASE("owner data: unknown keys are skipped", "[owner_data]") {
    auto owner = decode_owner("zkr:1;host=h1;zone=eu-west;pid=11;thread=12;build=abc=def");
    CHECK(owner.is_zkr());
    CHECK(owner.host == "h1");
    CHECK(owner.pid == 11);
    CHECK(owner.thread == 12);
    CHECK(owner.raw == "zkr:1;host=h1;zone=eu-west;pid=11;thread=12;build=abc=def");

    auto reordered = decode_owner("zkr:1;thread=3;pid=2;host=x;");
    CHECK(reordered.is_zkr());
    CHECK(reordered.host == "x");
    CHECK(reordered.pid == 2);
    CHECK(reordered.thread == 3);
}

TEST_CASE("owner data: current_owner_data names this process and thread", "[owner_data]") {
    std::string data = current_owner_data();
    auto owner = decode_owner(data);
    REQUIRE(owner.is_zkr());
    CHECK(owner.pid == static_cast<std::int64_t>(getpid()));
    CHECK(owner.thread != 0);
    CHECK(owner.thread == static_cast<std::int64_t>(syscall(SYS_gettid)));
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::string expected_host(host);
    for (char& c : expected_host) {
        if (c == ';' || c == '=') c = '_';
    }
    CHECK(owner.host == expected_host);
    CHECK(current_owner_data() == data);  // stable on one thread

    std::string other;
    std::thread([&] { other = current_owner_data(); }).join();
    auto other_owner = decode_owner(other);
    REQUIRE(other_owner.is_zkr());
    CHECK(other_owner.pid == owner.pid);
    CHECK(other_owner.host == owner.host);
    CHECK(other_owner.thread != 0);
    CHECK(other_owner.thread != owner.thread);
}

TEST_CASE("owner data: the holding mark", "[owner_data][handoff]") {
    using zkr::detail::holding_mark;
    using zkr::detail::is_marked_holding;
    std::string data = zkr::detail::encode_owner("host-1", 42, 7);
    CHECK_FALSE(is_marked_holding(data));
    std::string marked = holding_mark(data);
    CHECK(marked == data + ";held=1");
    CHECK(is_marked_holding(marked));
    // Still the same owner to anyone reading it (unknown keys are skipped).
    auto owner = decode_owner(marked);
    REQUIRE(owner.is_zkr());
    CHECK(owner.host == "host-1");
    CHECK(owner.pid == 42);
    CHECK(owner.thread == 7);
    CHECK(is_marked_holding(holding_mark(zkr::detail::encode_owner("h", 1, 2, true))));
    // Not zkr's, or not marked: Curator's IP address, empty data, a lookalike.
    CHECK_FALSE(is_marked_holding("10.0.0.7"));
    CHECK_FALSE(is_marked_holding(""));
    CHECK_FALSE(is_marked_holding(";held=1"));
    CHECK_FALSE(is_marked_holding(data + ";held=0"));
}

}  // namespace owner_data_test
