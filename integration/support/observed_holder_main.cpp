// A separate process that holds a zkr::mutex with zkr::metrics as its client's observer, and says
// what its metrics read when asked: for the test that freezes it (SIGSTOP) past its session timeout
// and counts its session expiries after it resumes.
// Usage: zkr_observed_holder CONNECT LOCK_PATH SESSION_MS
// Prints "ready" once it holds the lock. Then, per line on stdin:
//   "metrics": every sample line of its metrics' Prometheus text (after flushing the observer;
//              "error flush" if that timed out), then "end";
//   "state":   "state <the lock's state>" (held, uncertain, lost ...).
// At the end of stdin it releases the lock and exits 0.
#include "zkr/client.hpp"
#include "zkr/metrics.hpp"
#include "zkr/mutex.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s CONNECT LOCK_PATH SESSION_MS\n", argv[0]);
        return 2;
    }
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client_options o;
    o.connect = argv[1];
    o.session_timeout = std::chrono::milliseconds(std::atoi(argv[3]));
    o.observer = metrics;
    zkr::client c(o);
    c.wait_connected(std::chrono::seconds(10));
    zkr::mutex m(c, argv[2]);
    m.lock();
    std::printf("ready\n");
    std::fflush(stdout);
    std::string command;
    while (std::getline(std::cin, command)) {
        if (command == "metrics") {
            if (!c.flush_observer(std::chrono::seconds(10))) std::printf("error flush\n");
            std::istringstream text(metrics->prometheus_text());
            for (std::string line; std::getline(text, line);) {
                if (!line.empty() && line[0] != '#') std::printf("%s\n", line.c_str());
            }
            std::printf("end\n");
        } else if (command == "state") {
            std::printf("state %s\n", zkr::to_string(m.state()));
        } else {
            std::printf("error unknown command %s\n", command.c_str());
        }
        std::fflush(stdout);
    }
    m.unlock();
    return 0;
}
