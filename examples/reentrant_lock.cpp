// zkr::mutex used the way Java's ReentrantLock (and Curator's InterProcessMutex) is used.
//
//   reentrant_lock [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
#include <zkr/zkr.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;

namespace {

// Re-entry: a function that takes the lock can call another that takes it too.
void audit(zkr::mutex& lock) {
    std::lock_guard guard(lock);  // the same thread again: no round trip, count goes up
    std::cout << "  audit: hold count " << lock.hold_count() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
    const char* env = std::getenv("ZK_CONNECT");
    zkr::client_options options;
    options.connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    options.session_timeout = 10s;
    zkr::client client(options);
    client.wait_connected(15s);

    zkr::mutex lock(client, "/examples/reentrant-lock");

    // lock() / unlock(), like ReentrantLock.lock() / unlock().
    lock.lock();
    std::cout << "locked: held by this thread? " << std::boolalpha << lock.is_held_by_current_thread()
              << ", hold count " << lock.hold_count() << ", fencing token " << lock.fencing_token() << "\n";
    audit(lock);  // nested re-entry
    std::cout << "back: hold count " << lock.hold_count() << "\n";

    // Another thread cannot get in while we hold it: tryLock(timeout) gives up.
    std::thread([&] {
        bool got = lock.try_lock_for(300ms);
        std::cout << "other thread: try_lock_for(300ms) -> " << got << ", held by it? " << lock.is_held_by_current_thread()
                  << ", held in this process? " << lock.is_acquired_in_this_process() << "\n";
    }).join();

    for (const auto& p : lock.participants())
        std::cout << "queue: " << p.node << (p.holds ? " (holds)" : "") << " owner " << p.owner.host << " pid "
                  << p.owner.pid << " thread " << p.owner.thread << "\n";

    lock.unlock();
    std::cout << "unlocked: hold count " << lock.hold_count() << "\n";

    // The standard's lock types work as they do with std::mutex.
    {
        std::unique_lock guard(lock, std::defer_lock);
        if (guard.try_lock_for(2s)) std::cout << "unique_lock::try_lock_for: got it\n";
    }
    // A session that ends takes the lock with it: you are told.
    auto subscription = lock.on_lost([](const std::string& node) { std::cout << "lost " << node << "\n"; });
    std::cout << "state now: " << zkr::to_string(lock.state()) << "\n";
}
