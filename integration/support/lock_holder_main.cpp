// A separate process that takes a zkr::mutex and keeps it until killed: the "holder crashes" case.
// Usage: zkr_lock_holder CONNECT LOCK_PATH SESSION_MS
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s CONNECT LOCK_PATH SESSION_MS\n", argv[0]);
        return 2;
    }
    zkr::client_options o;
    o.connect = argv[1];
    o.session_timeout = std::chrono::milliseconds(std::atoi(argv[3]));
    zkr::client c(o);
    c.wait_connected(std::chrono::seconds(10));
    zkr::mutex m(c, argv[2]);
    m.lock();
    std::printf("acquired %s\n", m.node_path().c_str());
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}
