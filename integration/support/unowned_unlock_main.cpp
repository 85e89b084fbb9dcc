// Built without NDEBUG: unlock() by a thread that holds nothing must stop a debug build.
// Usage: zkr_unowned_unlock CONNECT LOCK_PATH
#include "zkr/client.hpp"
#include "zkr/mutex.hpp"

#include <cstdio>

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    zkr::client_options o;
    o.connect = argv[1];
    zkr::client c(o);
    zkr::mutex m(c, argv[2]);
    m.unlock();  // asserts
    std::puts("no assertion");
    return 0;
}
