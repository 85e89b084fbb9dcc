// A service registry: instances register with zkr::persistent_node, clients discover them with
// zkr::tree_cache.
//
// Three instances of an "orders" service register under /services/orders, each with an ephemeral
// node named after its host and its address as data. A router keeps a tree_cache of
// /services (every service, every instance) and picks instances from it without a round trip.
// Then, as in production:
// - an operator deletes an instance's node by mistake: the instance registers again at once;
// - an instance moves to a new address (set_data): the router sees the new address;
// - an instance shuts down (close): the router stops seeing it.
//
//   service_registry [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
// Exit status 0 when the router's view followed each step; 1 otherwise.
#include <zkr/zkr.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

// Polls `condition` until it holds or 10 s pass.
bool within_10s(const std::function<bool()>& condition) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

// The router's view of one service: instance -> address, from the cache alone.
std::map<std::string, std::string> instances(const zkr::tree_cache& cache, const std::string& service) {
    std::map<std::string, std::string> out;
    for (const auto& name : cache.children(service)) {
        if (auto node = cache.get(service + "/" + name)) out[name] = node->data;
    }
    return out;
}

void remove_tree(zkr::client& client, const std::string& path) {
    zkr::error_code ec;
    auto children = client.get_children(path, ec);
    if (ec) return;
    for (const auto& child : children.children) remove_tree(client, path + "/" + child);
    client.remove(path, zkr::any_version, ec);
}

}  // namespace

int main(int argc, char** argv) try {
    const char* env = std::getenv("ZK_CONNECT");
    zkr::client_options options;
    options.connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    const std::string root = "/zkr-example-registry-" + std::to_string(::getpid());
    const std::string services = root + "/services";
    const std::string orders = services + "/orders";
    int wrong = 0;
    auto expect = [&](bool ok, const std::string& what) {
        std::cout << (ok ? "ok:    " : "WRONG: ") << what << "\n";
        if (!ok) ++wrong;
    };

    zkr::client router_client(options);
    router_client.wait_connected();

    // The router: a cache of every service and instance, and a log of what changed.
    zkr::tree_cache router(router_client, services);
    auto log = router.on_change([](const zkr::cache_event& e) {
        std::cout << "  router saw: " << zkr::to_string(e.type) << " " << e.path << (e.data.empty() ? "" : " = " + e.data)
                  << "\n";
    });
    router.start();  // /services does not exist yet: the cache waits for it, and creates nothing
    expect(router.wait_initialized(10s), "the router's cache is initialized (nothing registered yet)");

    // Three instances, each on a client of its own (as three processes would be).
    std::vector<std::unique_ptr<zkr::client>> clients;
    std::vector<std::unique_ptr<zkr::persistent_node>> registrations;
    for (int i = 1; i <= 3; ++i) {
        clients.push_back(std::make_unique<zkr::client>(options));
        registrations.push_back(std::make_unique<zkr::persistent_node>(
            *clients.back(), orders + "/host-" + std::to_string(i), zkr::create_mode::ephemeral,
            "10.0.0." + std::to_string(i) + ":8080"));
        registrations.back()->start();
    }
    for (auto& r : registrations) {
        bool made = r->wait_created(10s);
        expect(made, "registered " + r->node_path());
    }
    expect(within_10s([&] { return instances(router, orders).size() == 3; }), "the router sees 3 orders instances");

    // An operator deletes host-2's node by mistake: it is back at once.
    router_client.remove(orders + "/host-2");
    expect(within_10s([&] { return router_client.exists(orders + "/host-2").exists; }), "host-2 registered itself again");
    expect(within_10s([&] { return instances(router, orders).count("host-2") == 1; }), "the router sees host-2 again");

    // host-3 moves.
    registrations[2]->set_data("10.0.1.3:8080");
    expect(within_10s([&] { return instances(router, orders)["host-3"] == "10.0.1.3:8080"; }),
           "the router sees host-3's new address");

    // host-1 shuts down.
    registrations[0]->close();
    expect(within_10s([&] { return instances(router, orders).count("host-1") == 0; }), "the router no longer sees host-1");
    auto now = instances(router, orders);
    expect(now.size() == 2, "2 instances left: host-2 and host-3");

    registrations.clear();
    clients.clear();
    router.close();
    remove_tree(router_client, root);
    std::cout << (wrong == 0 ? "the router followed every step" : std::to_string(wrong) + " thing(s) went WRONG") << "\n";
    return wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "service_registry: " << e.what() << "\n";
    return 1;
}
