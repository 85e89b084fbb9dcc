// zkr::mutex used the way Java's ReentrantLock (and Curator's InterProcessMutex) is used.
//
//   reentrant_lock [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
// Exit status 0 when the lock behaved as shown (re-entry counted, another thread kept out, the
// queue as expected, everything released), 1 otherwise.
#include <zkr/zkr.hpp>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;

namespace {

int wrong = 0;

// Says what was expected when it did not happen.
void expect(bool ok, const char* what) {
    if (!ok) {
        std::cout << "WRONG: " << what << "\n";
        ++wrong;
    }
}

// Re-entry: a function that takes the lock can call another that takes it too.
void audit(zkr::mutex& lock) {
    std::lock_guard guard(lock);  // the same thread again: no round trip, count goes up
    std::cout << "  audit: hold count " << lock.hold_count() << "\n";
    expect(lock.hold_count() == 2, "re-entry counts: hold count 2 inside audit()");
}

}  // namespace

int main(int argc, char** argv) try {
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
    expect(lock.is_held_by_current_thread() && lock.hold_count() == 1, "held by this thread, hold count 1");
    expect(lock.state() == zkr::lock_state::held, "state() held");
    audit(lock);  // nested re-entry
    std::cout << "back: hold count " << lock.hold_count() << "\n";
    expect(lock.hold_count() == 1, "back to hold count 1 after audit()");

    // Another thread cannot get in while we hold it: tryLock(timeout) gives up.
    std::thread([&] {
        bool got = lock.try_lock_for(300ms);
        std::cout << "other thread: try_lock_for(300ms) -> " << got << ", held by it? " << lock.is_held_by_current_thread()
                  << ", held in this process? " << lock.is_acquired_in_this_process() << "\n";
        expect(!got && !lock.is_held_by_current_thread(), "another thread is kept out");
        expect(lock.is_acquired_in_this_process(), "held in this process");
        if (got) lock.unlock();
    }).join();

    // The other thread's timed-out attempt removes its node (no orphans), though not before
    // try_lock_for returns: give it a moment, bounded.
    auto queue = lock.participants();
    for (auto until = std::chrono::steady_clock::now() + 5s; queue.size() > 1 && std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(20ms);
        queue = lock.participants();
    }
    for (const auto& p : queue)
        std::cout << "queue: " << p.node << (p.holds ? " (holds)" : "") << " owner " << p.owner.host << " pid "
                  << p.owner.pid << " thread " << p.owner.thread << "\n";
    expect(queue.size() == 1 && queue[0].holds && queue[0].owner.is_zkr(), "one node in the queue: ours, holding");

    lock.unlock();
    std::cout << "unlocked: hold count " << lock.hold_count() << "\n";
    expect(lock.hold_count() == 0 && !lock.is_held_by_current_thread(), "released: hold count 0");

    // The standard's lock types work as they do with std::mutex.
    {
        std::unique_lock guard(lock, std::defer_lock);
        bool got = guard.try_lock_for(2s);
        if (got) std::cout << "unique_lock::try_lock_for: got it\n";
        expect(got && lock.hold_count() == 1, "unique_lock::try_lock_for gets the free lock");
    }
    // A session that ends takes the lock with it: you are told.
    auto subscription = lock.on_lost([](const std::string& node) { std::cout << "lost " << node << "\n"; });
    std::cout << "state now: " << zkr::to_string(lock.state()) << "\n";
    expect(lock.state() == zkr::lock_state::not_held, "state() not_held once released");
    if (wrong > 0) std::cout << wrong << " thing(s) went WRONG\n";
    return wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "reentrant_lock: " << e.what() << "\n";
    return 1;
}
