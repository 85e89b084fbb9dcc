// A product catalog read by many, updated by one: zkr::shared_mutex.
//
//   catalog [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
#include <zkr/zkr.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    const char* env = std::getenv("ZK_CONNECT");
    zkr::client_options options;
    options.connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    zkr::client client(options);
    client.wait_connected(15s);
    const std::string catalog = "/examples/catalog";
    client.create_parents(catalog);

    std::atomic<int> readers_inside{0}, most_readers{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < 4; ++i) {
        readers.emplace_back([&] {
            zkr::shared_mutex lock(client, "/examples/catalog-lock");
            for (int n = 0; n < 5; ++n) {
                std::shared_lock reading(lock);  // many readers at once
                int now = ++readers_inside;
                int seen = most_readers.load();
                while (now > seen && !most_readers.compare_exchange_weak(seen, now)) {}
                auto price = client.get_data(catalog).data;
                std::this_thread::sleep_for(20ms);
                --readers_inside;
                (void)price;
            }
        });
    }
    std::thread updater([&] {
        zkr::shared_mutex lock(client, "/examples/catalog-lock");
        for (int version = 1; version <= 3; ++version) {
            std::this_thread::sleep_for(30ms);
            std::unique_lock writing(lock);  // alone: no reader sees a half-done update
            client.set_data(catalog, "price list v" + std::to_string(version));
            std::cout << "updated to v" << version << " with " << readers_inside.load() << " readers inside\n";
        }
    });
    for (auto& r : readers) r.join();
    updater.join();
    std::cout << "catalog now: " << client.get_data(catalog).data << "; up to " << most_readers.load()
              << " readers read at once\n";
}
