#include "connect_string.hpp"

#include <catch2/catch.hpp>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace connect_string_test {

TEST_CASE("well-formed connect strings", "[connect]") {
    for (const char* s : {"127.0.0.1:2181", "a:1,b:2,c:3", "zk1.example:2181/app/chroot", "[::1]:2181", "h:65535"}) {
        INFO(s);
        CHECK(zkr::detail::connect_string_problem(s).empty());
    }
}

TEST_CASE("malformed connect strings name the problem", "[connect]") {
    struct bad {
        const char* s;
        const char* problem;
    };
    for (auto [s, problem] : {bad{"", "empty"}, bad{"localhost", "no ':port'"}, bad{"h:", "invalid port"},
                              bad{"h:abc", "non-numeric"}, bad{"h:0", "outside"}, bad{"h:70000", "outside"},
                              bad{"a:1,,b:2", "empty host entry"}, bad{":2181", "no host"},
                              bad{"h:1/bad//chroot", "chroot"}, bad{"/chroot", "no host"}, bad{"h ost:1", "white space"}}) {
        INFO(s);
        CHECK_THAT(zkr::detail::connect_string_problem(s), Catch::Matchers::Contains(problem));
    }
}

TEST_CASE("a semicolon between hosts or an empty host is refused, naming it", "[connect]") {
    CHECK_THAT(zkr::detail::connect_string_problem("zk1:2181;zk2:2181"), Catch::Matchers::Contains("';'") &&
                                                                            Catch::Matchers::Contains("','"));
    CHECK_THAT(zkr::detail::connect_string_problem("zk1:2181,zk2:2181;"), Catch::Matchers::Contains("';'"));
    CHECK_THAT(zkr::detail::connect_string_problem("[]:2181"), Catch::Matchers::Contains("no host"));
    CHECK_THAT(zkr::detail::connect_string_problem("zk1:2181,[]:2182"), Catch::Matchers::Contains("no host"));
    CHECK(zkr::detail::connect_string_problem("zk1:2181/app;x").empty());  // a chroot may hold one
}

TEST_CASE("a connect string with a very long chroot is shown truncated", "[connect]") {
    std::string problem = zkr::detail::connect_string_problem("h:1/" + std::string(1 << 20, 'a') + "//x");
    CHECK_THAT(problem, Catch::Matchers::Contains("empty segment"));
    CHECK(problem.size() < 500);
}

}  // namespace connect_string_test
