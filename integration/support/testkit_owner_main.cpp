// An ensemble owned by a process of its own, for the test that kills its owner outright.
// Usage: zkr_testkit_owner N. Prints "dir DIR", then "pid I PID" for each server, then waits for
// the end of its standard input (then destroys the ensemble as usual).
#include "zkr/testkit.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s N\n", argv[0]);
        return 2;
    }
    zkr::testkit::ensemble_options o;
    o.servers = std::atoi(argv[1]);
    o.allow_external = false;
    zkr::testkit::ensemble zk(o);
    std::printf("dir %s\n", zk.directory().c_str());
    for (int i = 0; i < zk.size(); ++i) {
        std::ifstream pid(zk.directory() + "/s" + std::to_string(i) + "/pid");
        std::string text;
        pid >> text;
        std::printf("pid %d %s\n", i, text.c_str());
    }
    std::fflush(stdout);
    char buffer[64];
    while (::read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
    }
    return 0;
}
