// A zkr::leader_latch in a process of its own, for the test that freezes the leader (SIGSTOP) past
// its session timeout.
// Usage: zkr_latch_holder CONNECT LATCH_PATH ID SESSION_MS
//
// Prints, each line flushed at once, times in CLOCK_MONOTONIC nanoseconds (system-wide, so they
// compare with the test's steady_clock):
//   ready                       the latch is started
//   state T0 T1 STATE           state() read between T0 and T1 (held | uncertain | lost | not_held):
//                               on every change, and at least every 50 ms, and for the first read
//                               after any gap of more than 50 ms between reads (a freeze); three
//                               threads read and act, each on its own
//   act T0 T1 ok|refused        has_leadership() read true at T0, so it acted: a write guarded by
//                               the leadership (client::multi with guard()), answered at T1
//   event leader|not_leader T   a listener call
// Ends when its standard input ends.
#include "zkr/client.hpp"
#include "zkr/leader_latch.hpp"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::mutex out_mutex;

void line(const std::string& s) {
    std::lock_guard lock(out_mutex);
    std::fputs((s + "\n").c_str(), stdout);
    std::fflush(stdout);
}

const char* name(zkr::lock_state s) {
    switch (s) {
        case zkr::lock_state::held: return "held";
        case zkr::lock_state::uncertain: return "uncertain";
        case zkr::lock_state::lost: return "lost";
        case zkr::lock_state::not_held: return "not_held";
    }
    return "?";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s CONNECT LATCH_PATH ID SESSION_MS\n", argv[0]);
        return 2;
    }
    zkr::client_options o;
    o.connect = argv[1];
    o.session_timeout = std::chrono::milliseconds(std::atoi(argv[4]));
    zkr::client c(o);
    c.wait_connected(std::chrono::seconds(10));
    const std::string path = argv[2], id = argv[3];
    const std::string data_path = path + "-guarded";
    {
        zkr::error_code ec;
        c.create_parents(path, zkr::create_mode::persistent, ec);
        c.create(data_path, "", zkr::create_mode::persistent, ec);  // exists already: fine
    }
    zkr::leader_latch latch(c, path, id);
    auto up = latch.on_leadership([] { line("event leader " + std::to_string(now_ns())); });
    auto down = latch.on_not_leader([] { line("event not_leader " + std::to_string(now_ns())); });
    latch.start();
    line("ready");

    std::atomic<bool> done{false};
    std::thread input([&] {
        char buf[256];
        while (::read(STDIN_FILENO, buf, sizeof buf) > 0) {
        }
        done = true;
    });

    // Three readers: after a freeze, each races the client's own threads to the first read.
    auto reader = [&] {
        bool first = true;
        zkr::lock_state last{};
        long long last_print = 0, last_read = 0;
        long long acts = 0;
        while (!done) {
            long long t0 = now_ns();
            auto s = latch.state();
            long long t1 = now_ns();
            bool gap = last_read != 0 && t0 - last_read > 50'000'000;
            if (first || s != last || gap || t0 - last_print > 50'000'000) {
                line(std::string("state ") + std::to_string(t0) + " " + std::to_string(t1) + " " + name(s));
                last_print = t0;
            }
            first = false;
            last = s;
            last_read = t1;
            // Act as a leader does: only when has_leadership() says so, and fenced by the leadership.
            long long a0 = now_ns();
            if (latch.has_leadership()) {
                zkr::error_code ec;
                try {
                    c.multi({latch.guard(), zkr::op::set_data{data_path, id + "-" + std::to_string(++acts)}}, ec);
                } catch (const zkr::system_error&) {
                    ec = zkr::make_error_code(zkr::errc::not_owner);  // lost between the two reads
                }
                line("act " + std::to_string(a0) + " " + std::to_string(now_ns()) + (ec ? " refused" : " ok"));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    };
    std::thread r1(reader), r2(reader), r3(reader);
    r1.join();
    r2.join();
    r3.join();
    input.join();
    latch.close();
    return 0;
}
