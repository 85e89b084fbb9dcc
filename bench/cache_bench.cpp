// zkr_cache_bench — zkr's side of the cache and persistent-node benchmark (bench/cache.sh runs it
// beside Curator's, bench/java/CacheBench.java, with the same command line and output).
//
//   zkr_cache_bench SCENARIO CONNECT PATH [--nodes N] [--events K] [--expire-via CONNECT]
//
//   event-latency  N nodes under PATH, cached; another session writes K times, one node at a
//                  time, and waits for the cache's listener to report that write: p50/p99 µs
//   init           N nodes (PATH/p<i>/c<j>, 100 per parent) cached: time to initialized, and heap
//                  bytes per cached node (glibc's bytes in use, before and after)
//   resync         init, then the session is expired: time until initialized again, and the
//                  requests the server received meanwhile (mntr zk_packets_received)
//   node-back      an ephemeral persistent node; its session is expired: time until another
//                  session sees the node again, owned by the new session
//
// One JSON line on stdout; exit 0, or 1 with the reason on stderr. Nodes made are deleted.
#include "bench_support.hpp"

#include <zkr/testkit.hpp>
#include <zkr/zkr.hpp>

#include <boost/asio/use_future.hpp>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

using zkr::bench::client_options;
using zkr::bench::percentile;
using zkr::bench::server_packets;

struct options {
    std::string scenario, connect, path, expire_via;
    int nodes = 100;
    int events = 200;
};

options parse(int argc, char** argv) {
    if (argc < 4) throw std::invalid_argument("usage: zkr_cache_bench SCENARIO CONNECT PATH [--nodes N] [--events K]");
    options o{argv[1], argv[2], argv[3], argv[2]};
    for (int i = 4; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--nodes") o.nodes = std::stoi(v);
        else if (k == "--events") o.events = std::stoi(v);
        else if (k == "--expire-via") o.expire_via = v;
        else throw std::invalid_argument("unknown option " + k);
    }
    return o;
}

// The node paths of an N-node tree under `path`: up to 100 children directly, else 100 per parent.
std::vector<std::string> layout(const std::string& path, int nodes) {
    std::vector<std::string> out;
    if (nodes <= 100) {
        for (int i = 0; i < nodes; ++i) out.push_back(path + "/c" + std::to_string(i));
        return out;
    }
    for (int p = 0; static_cast<int>(out.size()) < nodes; ++p) {
        std::string parent = path + "/p" + std::to_string(p);
        out.push_back(parent);
        for (int c = 0; c < 99 && static_cast<int>(out.size()) < nodes; ++c) out.push_back(parent + "/c" + std::to_string(c));
    }
    return out;
}

// Creates (or deletes, deepest first) `paths` with at most 1,000 requests in flight.
void populate(zkr::client& c, const std::string& path, const std::vector<std::string>& paths) {
    c.create_parents(path);
    std::vector<std::future<zkr::create_result>> batch;
    for (const auto& p : paths) {
        batch.push_back(c.async_create(p, "d", zkr::create_mode::persistent, boost::asio::use_future));
        if (batch.size() == 1000) {
            for (auto& f : batch) f.get();
            batch.clear();
        }
    }
    for (auto& f : batch) f.get();
}

void remove_all(zkr::client& c, const std::string& path, std::vector<std::string> paths) {
    std::reverse(paths.begin(), paths.end());
    std::vector<std::future<void>> batch;
    for (const auto& p : paths) {
        batch.push_back(c.async_remove(p, zkr::any_version, boost::asio::use_future));
        if (batch.size() == 1000) {
            for (auto& f : batch) f.get();
            batch.clear();
        }
    }
    for (auto& f : batch) f.get();
    zkr::error_code ec;
    c.remove(path, zkr::any_version, ec);
}

double us_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

std::size_t heap_in_use() { return mallinfo2().uordblks; }

void print(const std::string& json) { std::cout << json << std::endl; }

std::string head(const options& o) {
    return "{\"driver\":\"zkr\",\"scenario\":\"" + o.scenario + "\",\"nodes\":" + std::to_string(o.nodes);
}

int event_latency(const options& o) {
    zkr::client c(client_options(o.connect)), writer(client_options(o.connect));
    auto paths = layout(o.path, o.nodes);
    populate(writer, o.path, paths);
    std::mutex mutex;
    std::condition_variable seen;
    std::string want_path, want_data;
    bool got = false;
    zkr::tree_cache cache(c, o.path);
    auto sub = cache.on_change([&](const zkr::cache_event& e) {
        std::lock_guard lock(mutex);
        if (e.type == zkr::cache_event_type::changed && e.path == want_path && e.data == want_data) {
            got = true;
            seen.notify_all();
        }
    });
    cache.start();
    if (!cache.wait_initialized(60s)) throw std::runtime_error("the cache was not initialized within 60 s");
    std::vector<double> latencies;
    for (int k = 0; k < o.events; ++k) {
        {
            std::lock_guard lock(mutex);
            want_path = paths[static_cast<std::size_t>(k) % paths.size()];
            want_data = "v" + std::to_string(k);
            got = false;
        }
        auto t0 = clock_type::now();
        writer.set_data(want_path, want_data);
        std::unique_lock lock(mutex);
        if (!seen.wait_for(lock, 10s, [&] { return got; })) throw std::runtime_error("no event for " + want_path + " within 10 s");
        latencies.push_back(us_since(t0));
    }
    cache.close();
    remove_all(writer, o.path, paths);
    print(head(o) + ",\"events\":" + std::to_string(o.events) + ",\"p50_us\":" + std::to_string(percentile(latencies, 0.5)) +
          ",\"p99_us\":" + std::to_string(percentile(latencies, 0.99)) + "}");
    return 0;
}

int init(const options& o, bool resync) {
    zkr::client c(client_options(o.connect)), writer(client_options(o.connect));
    auto paths = layout(o.path, o.nodes);
    populate(writer, o.path, paths);
    c.wait_connected();
    auto before = heap_in_use();
    auto t0 = clock_type::now();
    auto cache = std::make_unique<zkr::tree_cache>(c, o.path);
    cache->start();
    if (!cache->wait_initialized(300s)) throw std::runtime_error("the cache was not initialized within 300 s");
    double init_ms = us_since(t0) / 1000;
    auto after = heap_in_use();
    if (cache->size() != paths.size() + 1) throw std::runtime_error("the cache holds " + std::to_string(cache->size()) + " nodes");
    std::string out = head(o) + ",\"init_ms\":" + std::to_string(init_ms) + ",\"bytes_per_node\":" +
                      std::to_string(static_cast<double>(after - before) / static_cast<double>(paths.size() + 1));
    if (resync) {
        auto packets0 = server_packets(o.connect);
        auto t1 = clock_type::now();
        zkr::testkit::expire_session(c, o.expire_via);
        const auto deadline = clock_type::now() + 300s;
        while (!cache->initialized()) {
            if (clock_type::now() > deadline) throw std::runtime_error("no resync within 300 s");
            std::this_thread::sleep_for(1ms);
        }
        double resync_ms = us_since(t1) / 1000;
        auto packets = server_packets(o.connect) - packets0;
        out += ",\"resync_ms\":" + std::to_string(resync_ms) + ",\"resync_requests\":" + std::to_string(packets);
    }
    cache.reset();
    remove_all(writer, o.path, paths);
    print(out + "}");
    return 0;
}

int node_back(const options& o) {
    zkr::client c(client_options(o.connect)), observer(client_options(o.connect));
    observer.create_parents(o.path);
    std::string path = o.path + "/node";
    zkr::persistent_node node(c, path, zkr::create_mode::ephemeral, "payload");
    node.start();
    if (!node.wait_created(30s)) throw std::runtime_error("the node was not made within 30 s");
    auto old_owner = observer.exists(path).stat.ephemeral_owner;
    auto t0 = clock_type::now();
    zkr::testkit::expire_session(c, o.expire_via);
    double expire_ms = us_since(t0) / 1000;
    const auto deadline = clock_type::now() + 60s;
    for (;;) {
        auto r = observer.exists(path, zkr::set_watch);
        if (r.exists && r.stat.ephemeral_owner != old_owner) {
            r.watch.remove();
            break;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
        if (left <= 0ms || !r.watch.wait(left)) throw std::runtime_error("the node was not back within 60 s");
    }
    double back_ms = us_since(t0) / 1000;
    node.close();
    zkr::error_code ec;
    observer.remove(o.path, zkr::any_version, ec);
    print(head(o) + ",\"back_ms\":" + std::to_string(back_ms) + ",\"expire_ms\":" + std::to_string(expire_ms) + "}");
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    zkr::log::set_threshold(zkr::log::level::error);
    auto o = parse(argc, argv);
    if (o.scenario == "event-latency") return event_latency(o);
    if (o.scenario == "init") return init(o, false);
    if (o.scenario == "resync") return init(o, true);
    if (o.scenario == "node-back") return node_back(o);
    throw std::invalid_argument("unknown scenario " + o.scenario);
} catch (const std::exception& e) {
    std::cerr << "zkr_cache_bench: " << e.what() << "\n";
    return 1;
}
