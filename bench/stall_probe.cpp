// zkr_stall_probe — zkr's uncontended lock cycle on one client, with the stall probe at a given
// wait (0: off), for the 3-server ensemble stall of ZooKeeper 3.6.0 to 3.8.0 (ZOOKEEPER-4537;
// bench/RESULTS.md, "A stall on the 3-server ensemble"). Compare with zkr_ensemble_stall (the C
// client alone).
//
//   zkr_stall_probe CONNECT PROBE_MS SECONDS
//
// Prints one line: the cycles made, the slowest, how many took over 50 ms and over 1 s.
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: zkr_stall_probe CONNECT PROBE_MS SECONDS\n");
        return 2;
    }
    using clock = std::chrono::steady_clock;
    zkr::client_options options;
    options.connect = argv[1];
    options.stall_probe_after = std::chrono::milliseconds(std::atol(argv[2]));
    const auto run_for = std::chrono::duration<double>(std::atof(argv[3]));
    zkr::client client(options);
    client.wait_connected(std::chrono::seconds(15));
    zkr::mutex lock(client, "/zkr-stall-probe/" + std::to_string(getpid()));
    long cycles = 0, slow = 0, stalled = 0;
    clock::duration worst{};
    const auto end = clock::now() + run_for;
    while (clock::now() < end) {
        const auto start = clock::now();
        lock.lock();
        lock.unlock();
        const auto took = clock::now() - start;
        worst = std::max(worst, took);
        if (took > std::chrono::milliseconds(50)) ++slow;
        if (took > std::chrono::seconds(1)) ++stalled;
        ++cycles;
    }
    std::printf("probe=%sms cycles=%ld worst=%.3fs slow(>50ms)=%ld stalled(>1s)=%ld\n", argv[2], cycles,
                std::chrono::duration<double>(worst).count(), slow, stalled);
    return 0;
}
