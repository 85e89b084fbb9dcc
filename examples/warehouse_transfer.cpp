// Stock moved between two warehouses: zkr::multi_lock, and one guarded transaction per move.
//
// Two nodes hold the stock counts of warehouses A and B. A move reads both counts and writes both
// back, changed by the amount moved. The writes are unversioned, so only the locks keep two moves
// from reading the same counts and one of them being lost (as a service writing to a store
// without versions would be). Each move therefore:
//   - holds both warehouses' locks at once (one zkr::multi_lock of the two lock paths), and
//   - writes both counts in ONE transaction guarded by both locks:
//         client.multi({both.guard(), op::set_data{a, ...}, op::set_data{b, ...}})
//     both counts change or neither does, and only while both locks are still ours: a move whose
//     session was lost meanwhile (a pause, a partition) is refused with errc::lock_lost instead of
//     writing over the move that took the locks after it.
// Half the movers name the two locks in the opposite order. With two plain mutexes taken one after
// the other that could deadlock (each holding one, waiting for the other); multi_lock takes its
// parts in one canonical order whatever order they are named in, so it cannot. Every lock wait has
// a deadline, so a deadlock would show as a failure, not a hang.
//
//   warehouse_transfer [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
// Exit status 0 when every move was made, the total stock is unchanged and no count ever went
// negative; 1 otherwise.
#include <zkr/zkr.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

constexpr int initial_each = 50;  // per warehouse
constexpr int clients_count = 2;
constexpr int movers_per_client = 2;
constexpr int moves_per_mover = 15;

std::atomic<int> moves_made{0}, nothing_to_move{0}, inside{0}, most_inside{0}, wrong{0};

void expect(bool ok, const std::string& what) {
    if (ok) return;
    static std::mutex print;
    std::lock_guard guard(print);
    std::cout << "WRONG: " << what << "\n";
    ++wrong;
}

// Deletes `path` and everything below it; best effort (the example's own nodes).
void remove_tree(zkr::client& client, const std::string& path) {
    zkr::error_code ec;
    auto children = client.get_children(path, ec);
    if (ec) return;
    for (const auto& child : children.children) remove_tree(client, path + "/" + child);
    client.remove(path, zkr::any_version, ec);
}

zkr::client_options options_for(const std::string& connect) {
    zkr::client_options options;
    options.connect = connect;
    options.session_timeout = 10s;
    return options;
}

// One mover: random amounts, in random directions, each move under both locks.
void mover(int me, zkr::client& client, const std::string& root, unsigned seed) {
    const std::string a = root + "/stock/a", b = root + "/stock/b";
    // Odd movers name the locks B first: the opposite order to the even ones.
    std::vector<std::string> lock_paths{root + "/locks/a", root + "/locks/b"};
    if (me % 2 == 1) std::swap(lock_paths[0], lock_paths[1]);
    zkr::multi_lock both(client, lock_paths);
    std::mt19937 random(seed);

    for (int n = 0; n < moves_per_mover; ++n) {
        const bool a_to_b = random() % 2 == 0;
        int amount = 1 + static_cast<int>(random() % 10);

        std::unique_lock hold(both, std::defer_lock);
        if (!hold.try_lock_for(5s)) {  // a deadline, not a wait for ever
            expect(false, "mover " + std::to_string(me) + " could not take both locks within 5 s");
            return;
        }
        int now_inside = ++inside;
        for (int most = most_inside; now_inside > most && !most_inside.compare_exchange_weak(most, now_inside);) {}

        int count_a = std::stoi(client.get_data(a).data);
        int count_b = std::stoi(client.get_data(b).data);
        expect(count_a >= 0 && count_b >= 0, "a count went negative: a " + std::to_string(count_a) + ", b " +
                                                   std::to_string(count_b));
        int& from = a_to_b ? count_a : count_b;
        int& to = a_to_b ? count_b : count_a;
        amount = std::min(amount, from);  // never move stock that is not there
        if (amount == 0) {
            ++nothing_to_move;
        } else {
            from -= amount;
            to += amount;
            // Both counts in one transaction, applied only while both locks are still ours.
            client.multi({both.guard(), zkr::op::set_data{a, std::to_string(count_a)},
                          zkr::op::set_data{b, std::to_string(count_b)}});
        }
        ++moves_made;
        --inside;
    }  // each hold ends with its iteration: both locks released
}

}  // namespace

int main(int argc, char** argv) try {
    const char* env = std::getenv("ZK_CONNECT");
    const std::string connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    // A root of this run's own: lock nodes left by an earlier run that crashed cannot get in the way.
    const std::string root = "/examples/warehouse-" + std::to_string(getpid());

    std::vector<std::unique_ptr<zkr::client>> clients;
    for (int i = 0; i < clients_count; ++i) {
        clients.push_back(std::make_unique<zkr::client>(options_for(connect)));
        clients.back()->wait_connected(15s);
    }
    zkr::client& admin = *clients.front();
    admin.create_parents(root + "/stock");
    admin.create(root + "/stock/a", std::to_string(initial_each));
    admin.create(root + "/stock/b", std::to_string(initial_each));

    const unsigned seed = std::random_device{}();
    std::cout << "seed " << seed << "\n";
    std::vector<std::thread> threads;
    for (int i = 0; i < clients_count * movers_per_client; ++i) {
        zkr::client& client = *clients[i % clients_count];  // movers spread over the clients
        threads.emplace_back([&, i] {
            try {
                mover(i, client, root, seed + i);
            } catch (const std::exception& e) {
                expect(false, "mover " + std::to_string(i) + " failed: " + e.what());
            }
        });
    }
    for (auto& t : threads) t.join();

    const int a = std::stoi(admin.get_data(root + "/stock/a").data);
    const int b = std::stoi(admin.get_data(root + "/stock/b").data);
    std::cout << "after " << moves_made << " moves (" << nothing_to_move << " with nothing to move): a " << a << ", b "
              << b << ", total " << a + b << "; most moves inside both locks at once: " << most_inside << "\n";
    expect(moves_made == clients_count * movers_per_client * moves_per_mover, "not every move was made");
    expect(a >= 0 && b >= 0, "a count is negative");
    expect(a + b == 2 * initial_each, "the total stock changed: stock was lost or made up");
    expect(most_inside <= 1, "two moves were inside both locks at once");

    remove_tree(admin, root);
    std::cout << (wrong == 0 ? "total stock unchanged, no count negative" : std::to_string(wrong) + " thing(s) went WRONG")
              << "\n";
    return wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "warehouse_transfer: " << e.what() << "\n";
    return 1;
}
