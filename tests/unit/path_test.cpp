#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

using namespace std::string_literals;

TEST_CASE("valid znode paths pass", "[path]") {
    for (const char* p : {"/", "/a", "/a/b", "/locks/orders", "/a.b/c..d/...", "/_c_x-lock-0000000001", "/ünïcode"}) {
        INFO(p);
        CHECK(zkr::path_problem(p).empty());
        CHECK_NOTHROW(zkr::validate_path(p));
    }
}

TEST_CASE("each path rule is named in the error", "[path]") {
    struct bad {
        std::string path;
        const char* rule;
    };
    for (const auto& [path, rule] : {bad{"", "empty"}, bad{"a/b", "start with '/'"}, bad{"/a/", "end with '/'"},
                                     bad{"/a//b", "empty segment"}, bad{"/a/./b", "'.' or '..'"},
                                     bad{"/a/..", "'.' or '..'"}, bad{"/a\0b"s, "NUL"}, bad{"/a\x01", "control"}}) {
        INFO(path);
        CHECK_THAT(zkr::path_problem(path), Catch::Matchers::Contains(rule));
        CHECK_THROWS_WITH(zkr::validate_path(path), Catch::Matchers::Contains(rule) &&
                                                        Catch::Matchers::Contains("invalid znode path"));
    }
}

TEST_CASE("the NUL character is shown escaped in the message", "[path]") {
    CHECK_THROWS_WITH(zkr::validate_path("/a\0b"s), Catch::Matchers::Contains("/a\\0b"));
}

TEST_CASE("a sequential prefix may end with '/'", "[path]") {
    CHECK(zkr::path_problem("/locks/", true).empty());
    CHECK_FALSE(zkr::path_problem("/locks/", false).empty());
    CHECK_FALSE(zkr::path_problem("/locks//x", true).empty());
}

TEST_CASE("parent, name and join", "[path]") {
    CHECK(zkr::parent_path("/a/b/c") == "/a/b");
    CHECK(zkr::parent_path("/a") == "/");
    CHECK(zkr::node_name("/a/b/c") == "c");
    CHECK(zkr::join_path("/", "a") == "/a");
    CHECK(zkr::join_path("/a", "b") == "/a/b");
}
