#include "zkr/path.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

// A namespace of its own: the unit tests are a unity build (tests/CMakeLists.txt).
namespace path_test {

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

// The server's own rule (PathUtils.validatePath) works on Java chars: it refuses the C1 controls,
// surrogates and the private use area (U+D800-U+F8FF), U+FFF0-U+FFFF (U+FFFD, what bytes that are
// not UTF-8 decode to, among them), and so every character past U+FFFF (a surrogate pair in Java).
TEST_CASE("paths that are not valid UTF-8 are refused, naming the byte", "[path]") {
    struct bad {
        std::string path;
        const char* shown;
    };
    for (const auto& [path, shown] : {bad{"/a\xff", "\\xff"}, bad{"/a\x80z", "\\x80"}, bad{"/a\xc3", "\\xc3"},
                                      bad{"/a\xc3z", "\\xc3"}, bad{"/\xc0\xaf", "\\xc0"}, bad{"/\xe0\x80\xaf", "\\xe0"},
                                      bad{"/\xed\xa0\x80", "\\xed"}, bad{"/\xf4\x90\x80\x80", "\\xf4"},
                                      bad{"/\xf8\x88\x80\x80\x80", "\\xf8"}}) {
        INFO(path);
        CHECK_THAT(zkr::path_problem(path), Catch::Matchers::Contains("not valid UTF-8"));
        CHECK_THROWS_WITH(zkr::validate_path(path), Catch::Matchers::Contains(shown));
    }
}

TEST_CASE("characters the server refuses are refused here, naming the code point", "[path]") {
    struct bad {
        std::string path;
        const char* code_point;
    };
    for (const auto& [path, code_point] :
         {bad{"/a\x7f", "U+007F"}, bad{"/a\xc2\x80", "U+0080"}, bad{"/a\xc2\x85", "U+0085"}, bad{"/a\xc2\x9f", "U+009F"},
          bad{"/a\xee\x80\x80", "U+E000"}, bad{"/a\xef\xa3\xbf", "U+F8FF"}, bad{"/a\xef\xbf\xb0", "U+FFF0"},
          bad{"/a\xef\xbf\xbd", "U+FFFD"}, bad{"/a\xef\xbf\xbf", "U+FFFF"}, bad{"/a\xf0\x9f\x98\x80", "U+1F600"},
          bad{"/a\xf4\x8f\xbf\xbf", "U+10FFFF"}}) {
        INFO(path);
        CHECK_THAT(zkr::path_problem(path), Catch::Matchers::Contains(code_point));
        CHECK_THROWS_AS(zkr::validate_path(path), std::invalid_argument);
    }
    // Next to those ranges, all fine.
    for (const char* good : {"/a~", "/a\xc2\xa0", "/a\xed\x9f\xbf", "/a\xef\xa4\x80", "/a\xef\xbf\xaf", "/\xe6\x97\xa5\xe6\x9c\xac"}) {
        INFO(good);
        CHECK(zkr::path_problem(good).empty());
    }
}

TEST_CASE("a long path is shown truncated, with its length", "[path]") {
    std::string huge = "/locks/" + std::string(1100 * 1024, 'a');
    try {
        zkr::validate_path(huge + "//x");
        FAIL("not refused");
    } catch (const std::invalid_argument& e) {
        std::string what = e.what();
        CHECK(what.size() < 400);
        CHECK_THAT(what, Catch::Matchers::Contains("\"/locks/aaaa"));
        CHECK_THAT(what, Catch::Matchers::Contains(std::to_string(huge.size() + 3) + " bytes"));
        CHECK_THAT(what, Catch::Matchers::Contains("empty segment"));
    }
}

TEST_CASE("the NUL character is shown escaped however far into a long path", "[path]") {
    std::string path = "/" + std::string(50, 'a') + "\0b"s + std::string(5000, 'c');
    CHECK_THROWS_WITH(zkr::validate_path(path), Catch::Matchers::Contains("aa\\0bcc") && Catch::Matchers::Contains("NUL"));
}

}  // namespace path_test
