// The integration tests' main: Catch2, plus a check no test case can forget.
//
// Live objects: once a test case has ended (every client it made is destroyed), zkr must have
// nothing of its own left alive: no request in flight, watch, result owed, hold, recipe
// operation or client (src/live_objects.hpp). LeakSanitizer cannot see those when a block the
// C client leaks refers to them, and a normal build has no LeakSanitizer at all. A test case
// that leaves any behind fails the run (exit status 1), whatever its own assertions said.
#include <catch2/catch.hpp>

#include "live_objects.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using zkr::detail::live_counts;

std::vector<std::string>& leaks() {
    static std::vector<std::string> found;
    return found;
}

// What is alive now beyond `baseline` (what earlier test cases of this run left, already reported).
live_counts beyond(const live_counts& now, const live_counts& baseline) {
    live_counts d;
    d.requests = now.requests - baseline.requests;
    d.watches = now.watches - baseline.watches;
    d.completions = now.completions - baseline.completions;
    d.holds = now.holds - baseline.holds;
    d.operations = now.operations - baseline.operations;
    d.clients = now.clients - baseline.clients;
    d.dropped_completions = now.dropped_completions - baseline.dropped_completions;
    return d;
}

// How long a test case's leftovers get to go: 20 s, or $ZKR_TEST_LIVE_OBJECTS_WAIT_MS.
std::chrono::milliseconds wait_bound() {
    const char* env = std::getenv("ZKR_TEST_LIVE_OBJECTS_WAIT_MS");
    return std::chrono::milliseconds(env && *env ? std::atol(env) : 20'000);
}

struct live_objects_check : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;

    void testCaseStarting(Catch::TestCaseInfo const& info) override {
        TestEventListenerBase::testCaseStarting(info);
        baseline_ = zkr::detail::live_now();
    }

    void testCaseEnded(Catch::TestCaseStats const& stats) override {
        TestEventListenerBase::testCaseEnded(stats);
        // Handlers still being delivered on an executor the test made may hold results a moment
        // after the last client is gone: wait for the counts themselves, up to a bound that fails.
        const auto deadline = std::chrono::steady_clock::now() + wait_bound();
        live_counts left = beyond(zkr::detail::live_now(), baseline_);
        while (!left.all_zero() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            left = beyond(zkr::detail::live_now(), baseline_);
        }
        if (left.all_zero()) return;
        std::string line = "\"" + stats.testInfo.name + "\" left zkr objects alive " +
                           std::to_string(wait_bound().count()) + " ms after it ended: " + left.describe();
        std::fprintf(stderr, "\nFAILED (live objects): %s\n", line.c_str());
        leaks().push_back(std::move(line));
    }

private:
    live_counts baseline_;
};

}  // namespace

CATCH_REGISTER_LISTENER(live_objects_check)

// Catch2's own main, prebuilt by Debian and renamed (integration/CMakeLists.txt): it runs the
// session.
extern "C" int zkr_catch2_main(int argc, char** argv);

int main(int argc, char** argv) {
    int result = zkr_catch2_main(argc, argv);
    if (!leaks().empty()) {
        std::fprintf(stderr, "\n%zu test case(s) left zkr objects alive (see above): the run fails.\n", leaks().size());
        return result != 0 ? result : 1;
    }
    return result;
}
