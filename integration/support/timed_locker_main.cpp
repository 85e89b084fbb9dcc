// A separate process that loops try_lock_for on one lock and reports each call, for the test that
// freezes it (SIGSTOP) past its session timeout.
// Usage: zkr_timed_locker CONNECT LOCK_PATH SESSION_MS RUN_MS
// Prints "ready", then "call <start ns> <end ns> <1|0>" per call (CLOCK_MONOTONIC, system-wide),
// then "done" once RUN_MS have passed.
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {
long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s CONNECT LOCK_PATH SESSION_MS RUN_MS\n", argv[0]);
        return 2;
    }
    zkr::client_options o;
    o.connect = argv[1];
    o.session_timeout = std::chrono::milliseconds(std::atoi(argv[3]));
    zkr::client c(o);
    c.wait_connected(std::chrono::seconds(10));
    zkr::mutex m(c, argv[2]);
    std::printf("ready\n");
    std::fflush(stdout);
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atoi(argv[4]));
    while (std::chrono::steady_clock::now() < until) {
        long long start = now_ns();
        bool got = false;
        try {
            got = m.try_lock_for(std::chrono::seconds(2));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "zkr_timed_locker: %s\n", e.what());
        }
        long long end = now_ns();
        if (got) m.unlock();
        std::printf("call %lld %lld %d\n", start, end, got ? 1 : 0);
        std::fflush(stdout);
    }
    std::printf("done\n");
    std::fflush(stdout);
    return 0;
}
