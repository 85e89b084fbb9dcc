// A product catalog read by many, updated by one: zkr::shared_mutex.
//
//   catalog [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
// Exit status 0 when no reader ever saw an update half done and every update landed, 1 otherwise.
#include <zkr/zkr.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) try {
    const char* env = std::getenv("ZK_CONNECT");
    zkr::client_options options;
    options.connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    zkr::client client(options);
    client.wait_connected(15s);
    const std::string catalog = "/examples/catalog";
    client.create_parents(catalog);
    client.set_data(catalog, "price list v0");

    std::atomic<int> readers_inside{0}, most_readers{0}, writers_inside{0}, reads{0};
    std::atomic<int> wrong{0};  // a reader beside the writer, or the writer beside anyone
    std::atomic<int> failed{0};  // a thread that stopped on an exception
    std::vector<std::thread> readers;
    for (int i = 0; i < 4; ++i) {
        readers.emplace_back([&] {
            try {
                zkr::shared_mutex lock(client, "/examples/catalog-lock");
                for (int n = 0; n < 5; ++n) {
                    std::shared_lock reading(lock);  // many readers at once
                    int now = ++readers_inside;
                    if (writers_inside != 0) ++wrong;
                    int seen = most_readers.load();
                    while (now > seen && !most_readers.compare_exchange_weak(seen, now)) {}
                    auto price = client.get_data(catalog).data;
                    if (price.rfind("price list v", 0) != 0) ++wrong;
                    std::this_thread::sleep_for(20ms);
                    --readers_inside;
                    ++reads;
                }
            } catch (const std::exception& e) {
                std::cerr << "a reader failed: " << e.what() << "\n";
                ++failed;
            }
        });
    }
    std::thread updater([&] {
        try {
            zkr::shared_mutex lock(client, "/examples/catalog-lock");
            for (int version = 1; version <= 3; ++version) {
                std::this_thread::sleep_for(30ms);
                std::unique_lock writing(lock);  // alone: no reader sees a half-done update
                if (++writers_inside != 1 || readers_inside != 0) ++wrong;
                client.set_data(catalog, "price list v" + std::to_string(version));
                std::cout << "updated to v" << version << " with " << readers_inside.load() << " readers inside\n";
                --writers_inside;
            }
        } catch (const std::exception& e) {
            std::cerr << "the updater failed: " << e.what() << "\n";
            ++failed;
        }
    });
    for (auto& r : readers) r.join();
    updater.join();
    auto final_price = client.get_data(catalog).data;
    std::cout << "catalog now: " << final_price << "; " << reads << " reads, up to " << most_readers.load()
              << " readers read at once\n";
    bool right = wrong == 0 && failed == 0 && reads == 20 && final_price == "price list v3";
    std::cout << (right ? "readers and the writer never overlapped; every update landed"
                        : "WRONG: a reader and the writer overlapped, an update was lost, or a thread failed")
              << "\n";
    return right ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "catalog: " << e.what() << "\n";
    return 1;
}
