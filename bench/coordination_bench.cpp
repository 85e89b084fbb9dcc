// zkr_coordination_bench — zkr's side of the counter, barrier and id benchmark (bench/coordination.sh
// runs it beside Curator's, bench/java/CoordinationBench.java, with the same command line and output).
//
//   zkr_coordination_bench SCENARIO CONNECT PATH [--clients N] [--seconds S] [--warmup S]
//                          [--releases K] [--block B] [--direct CONNECT] [--max-attempts M]
//
//   inc       N clients (threads, each its own client and its own zkr::atomic_long on PATH/counter,
//             max_attempts M, 1000 as Curator's RetryNTimes(1000, 1)) increment for --warmup, then for
//             --seconds. Over that window: successful increments per second, versioned writes per
//             increment (attempts), failed increments (gave up), the fewest increments one client
//             made and how many clients made any (clients_incrementing), the server's requests
//             per increment (mntr zk_packets_received, read from --direct), and ms per increment
//             (window × N / increments) in round trips (the median of 21 exists() on the same
//             client before the run). Latency p50/p99/max: every increment ending after the
//             window began, including those still trying at its end. At the end the counter
//             must hold exactly the successful increments (else exit 1).
//   barrier   N waiters (threads, each its own client and zkr::barrier) wait on the set barrier
//             PATH/barrier; once every one's watch is on the server (wchp, read from --direct),
//             another client removes it. K times. Release latency: from just before remove() to
//             each waiter's return from wait_for(), p50 and max in ms and in round trips.
//   ids       one zkr::id_generator (block B) on PATH/ids: ids per second over --seconds, the
//             server's requests per 1000 ids. Checks that the ids strictly increase.
//
// One JSON line on stdout; exit 0, or 1 with the reason on stderr (and the JSON, if there is one).
// Nodes made are deleted.
#include "bench_support.hpp"

#include <zkr/testkit.hpp>
#include <zkr/zkr.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
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
using zkr::bench::watchers_of;

struct options {
    std::string scenario, connect, path, direct;
    int clients = 1;
    double seconds = 3, warmup = 1;
    int releases = 20;
    long long block = 1000;
    int max_attempts = 1000;
};

options parse(int argc, char** argv) {
    if (argc < 4)
        throw std::invalid_argument("usage: zkr_coordination_bench SCENARIO CONNECT PATH [--clients N] [--seconds S] "
                                    "[--warmup S] [--releases K] [--block B] [--direct CONNECT] [--max-attempts M]");
    options o{argv[1], argv[2], argv[3], argv[2]};
    for (int i = 4; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--clients") o.clients = std::stoi(v);
        else if (k == "--seconds") o.seconds = std::stod(v);
        else if (k == "--warmup") o.warmup = std::stod(v);
        else if (k == "--releases") o.releases = std::stoi(v);
        else if (k == "--block") o.block = std::stoll(v);
        else if (k == "--direct") o.direct = v;
        else if (k == "--max-attempts") o.max_attempts = std::stoi(v);
        else throw std::invalid_argument("unknown option " + k);
    }
    return o;
}

std::unique_ptr<zkr::client> connect(const std::string& cs) {
    auto c = std::make_unique<zkr::client>(client_options(cs));
    c->wait_connected();
    return c;
}

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// The median round trip of a read on `c` (exists() of a path that need not exist), in ms.
double rtt_ms(zkr::client& c, const std::string& path) {
    for (int i = 0; i < 5; ++i) c.exists(path);  // warm
    std::vector<double> xs;
    for (int i = 0; i < 21; ++i) {
        auto t0 = clock_type::now();
        c.exists(path);
        xs.push_back(seconds_since(t0) * 1000);
    }
    return percentile(xs, 0.5);
}

std::string num(double v) {
    std::ostringstream s;
    s.precision(6);
    s << v;
    return s.str();
}

std::string head(const options& o) { return "{\"driver\":\"zkr\",\"scenario\":\"" + o.scenario + "\""; }

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

int inc(const options& o) {
    const std::string path = o.path + "/counter";
    std::vector<std::unique_ptr<zkr::client>> clients;
    for (int i = 0; i < o.clients; ++i) clients.push_back(connect(o.connect));
    clients[0]->create_parents(o.path);
    double rtt = rtt_ms(*clients[0], o.path);
    struct op {
        clock_type::time_point end;
        double ms;
        int attempts;
        bool ok;
    };
    std::atomic<bool> stop{false};
    std::atomic<long long> ok{0}, failed{0};
    std::mutex error_mutex;
    std::string error;
    std::vector<std::vector<op>> ops(clients.size());
    std::vector<std::thread> threads;
    std::vector<std::unique_ptr<zkr::atomic_long>> counters;
    zkr::atomic_options ao;
    ao.max_attempts = o.max_attempts;  // 1000 by default, as Curator's RetryNTimes(1000, 1)
    for (auto& c : clients) counters.push_back(std::make_unique<zkr::atomic_long>(*c, path, ao));
    for (std::size_t i = 0; i < counters.size(); ++i) {
        threads.emplace_back([&, i] {
            auto& mine = ops[i];
            mine.reserve(1 << 16);
            try {
                while (!stop.load(std::memory_order_relaxed)) {
                    auto t = clock_type::now();
                    auto r = counters[i]->increment();
                    auto end = clock_type::now();
                    mine.push_back({end, std::chrono::duration<double, std::milli>(end - t).count(), r.attempts, r.succeeded});
                    if (r.succeeded) ++ok;
                    else ++failed;
                }
            } catch (const std::exception& e) {
                std::lock_guard lock(error_mutex);
                if (error.empty()) error = e.what();
                stop = true;
            }
        });
    }
    sleep_s(o.warmup);
    auto packets0 = server_packets(o.direct);
    auto t0 = clock_type::now();
    sleep_s(o.seconds);
    auto t1 = clock_type::now();
    auto packets1 = server_packets(o.direct);
    double window = std::chrono::duration<double>(t1 - t0).count();
    stop = true;
    for (auto& t : threads) t.join();
    if (!error.empty()) throw std::runtime_error("an increment threw: " + error);
    counters.clear();  // their writer records go (guaranteed deletes)
    auto final_value = zkr::atomic_long(*clients[0], path).get().post;
    // In the window: successes, their attempts, failures, each client's successes. Latency: every
    // increment that ended after the window began, those that were still trying at its end too.
    long long n = 0, attempts = 0, failed_in = 0, fewest = -1, active = 0;
    std::vector<double> latencies;
    for (auto& mine : ops) {
        long long own = 0;
        for (auto& x : mine) {
            if (x.end < t0) continue;
            if (x.ok) latencies.push_back(x.ms);
            if (x.end > t1) continue;
            if (x.ok) ++own, attempts += x.attempts;
            else ++failed_in;
        }
        n += own;
        active += own > 0;
        fewest = fewest < 0 ? own : std::min(fewest, own);
    }
    double op_ms = n ? window * 1000 * o.clients / static_cast<double>(n) : 0;
    std::string out = head(o) + ",\"clients\":" + std::to_string(o.clients) + ",\"seconds\":" + num(window) +
                      ",\"ops\":" + std::to_string(n) + ",\"ops_per_s\":" + num(static_cast<double>(n) / window) +
                      ",\"attempts_per_op\":" + num(n ? static_cast<double>(attempts) / static_cast<double>(n) : 0) +
                      ",\"requests_per_op\":" + num(n ? static_cast<double>(packets1 - packets0) / static_cast<double>(n) : 0) +
                      ",\"failed_ops\":" + std::to_string(failed_in) + ",\"fewest_by_one_client\":" + std::to_string(fewest) +
                      ",\"clients_incrementing\":" + std::to_string(active) +
                      ",\"p50_op_ms\":" + num(percentile(latencies, 0.5)) + ",\"p99_op_ms\":" + num(percentile(latencies, 0.99)) +
                      ",\"max_op_ms\":" + num(percentile(latencies, 1.0)) + ",\"rtt_ms\":" + num(rtt) + ",\"op_ms\":" + num(op_ms) +
                      ",\"rtt_per_op\":" + num(rtt > 0 ? op_ms / rtt : 0) + ",\"total_ok\":" + std::to_string(ok.load()) +
                      ",\"total_failed\":" + std::to_string(failed.load()) + ",\"final_value\":" + std::to_string(final_value) +
                      ",\"counter_ok\":" + (final_value == ok ? "true" : "false") + "}";
    std::cout << out << std::endl;
    // Clean up: the writer records are ephemeral children, gone with their sessions.
    for (std::size_t i = 1; i < clients.size(); ++i) clients[i]->close();
    for (int tries = 0; tries < 50; ++tries) {
        zkr::error_code ec;
        clients[0]->remove(path, zkr::any_version, ec);
        if (ec != zkr::errc::not_empty) break;
        std::this_thread::sleep_for(20ms);
    }
    {
        zkr::error_code ec;
        clients[0]->remove(o.path, zkr::any_version, ec);
    }
    if (final_value != ok) {
        std::cerr << "zkr_coordination_bench: the counter holds " << final_value << " after " << ok.load()
                  << " successful increments\n";
        return 1;
    }
    return 0;
}

int barrier(const options& o) {
    const std::string path = o.path + "/barrier";
    auto controller = connect(o.connect);
    controller->create_parents(o.path);
    double rtt = rtt_ms(*controller, o.path);
    zkr::barrier gate(*controller, path);
    std::vector<std::unique_ptr<zkr::client>> clients;
    for (int i = 0; i < o.clients; ++i) clients.push_back(connect(o.connect));
    std::mutex mutex;
    std::condition_variable cv;
    int round = -1, woken = 0;
    bool quit = false;
    std::string error;
    std::vector<clock_type::time_point> wake(static_cast<std::size_t>(o.clients));
    std::vector<std::thread> threads;
    for (int i = 0; i < o.clients; ++i) {
        threads.emplace_back([&, i] {
            zkr::barrier b(*clients[static_cast<std::size_t>(i)], path);
            int seen = -1;
            for (;;) {
                {
                    std::unique_lock lock(mutex);
                    cv.wait(lock, [&] { return quit || round != seen; });
                    if (quit) return;
                    seen = round;
                }
                bool passed = false;
                std::string why;
                try {
                    passed = b.wait(30s);
                } catch (const std::exception& e) {
                    why = e.what();
                }
                auto t = clock_type::now();
                std::lock_guard lock(mutex);
                wake[static_cast<std::size_t>(i)] = t;
                if (!passed && error.empty()) error = why.empty() ? "a waiter was not released within 30 s" : why;
                ++woken;
                cv.notify_all();
            }
        });
    }
    std::vector<double> latencies;
    std::vector<double> remove_ms;
    std::string failure;
    try {
        for (int k = 0; k < o.releases; ++k) {
            gate.set();
            {
                std::lock_guard lock(mutex);
                if (!error.empty()) break;
                woken = 0;
                ++round;
            }
            cv.notify_all();
            const auto deadline = clock_type::now() + 30s;
            while (watchers_of(o.direct, path) < o.clients) {
                if (clock_type::now() > deadline) throw std::runtime_error("the waiters' watches were not all set within 30 s");
                std::this_thread::sleep_for(1ms);
            }
            auto t0 = clock_type::now();
            gate.remove();
            remove_ms.push_back(seconds_since(t0) * 1000);
            std::unique_lock lock(mutex);
            if (!cv.wait_for(lock, 60s, [&] { return woken == o.clients; })) throw std::runtime_error("waiters not back within 60 s");
            for (auto t : wake) latencies.push_back(std::chrono::duration<double, std::milli>(t - t0).count());
        }
    } catch (const std::exception& e) {
        failure = e.what();
    }
    {
        std::lock_guard lock(mutex);
        quit = true;
    }
    cv.notify_all();
    gate.remove();  // lets a waiter still waiting go
    for (auto& t : threads) t.join();
    {
        zkr::error_code ec;
        controller->remove(o.path, zkr::any_version, ec);
    }
    if (!failure.empty()) throw std::runtime_error(failure);
    if (!error.empty()) throw std::runtime_error(error);
    double p50 = percentile(latencies, 0.5), mx = percentile(latencies, 1.0);
    std::cout << head(o) << ",\"waiters\":" << o.clients << ",\"releases\":" << o.releases << ",\"rtt_ms\":" << num(rtt)
              << ",\"p50_ms\":" << num(p50) << ",\"max_ms\":" << num(mx) << ",\"p50_rtt\":" << num(p50 / rtt)
              << ",\"max_rtt\":" << num(mx / rtt) << ",\"remove_p50_ms\":" << num(percentile(remove_ms, 0.5)) << "}" << std::endl;
    return 0;
}

int ids(const options& o) {
    const std::string path = o.path + "/ids";
    auto c = connect(o.connect);
    c->create_parents(o.path);
    double rtt = rtt_ms(*c, o.path);
    long long n = 0;
    std::int64_t last = 0;
    {
        zkr::id_generator gen(*c, path, o.block);
        const auto warm_end = clock_type::now() + std::chrono::duration<double>(o.warmup);
        while (clock_type::now() < warm_end) {
            for (int i = 0; i < 1000; ++i) last = gen.next();
        }
        auto packets0 = server_packets(o.direct);
        auto t0 = clock_type::now();
        const auto end = t0 + std::chrono::duration<double>(o.seconds);
        while (clock_type::now() < end) {
            for (int i = 0; i < 1000; ++i, ++n) {
                auto id = gen.next();
                if (id <= last) throw std::runtime_error("id " + std::to_string(id) + " after " + std::to_string(last));
                last = id;
            }
        }
        double window = seconds_since(t0);
        auto packets = server_packets(o.direct) - packets0;
        std::cout << head(o) << ",\"block\":" << o.block << ",\"seconds\":" << num(window) << ",\"ids\":" << n
                  << ",\"ids_per_s\":" << num(static_cast<double>(n) / window)
                  << ",\"requests_per_1000_ids\":" << num(static_cast<double>(packets) * 1000 / static_cast<double>(n))
                  << ",\"rtt_ms\":" << num(rtt) << "}" << std::endl;
    }
    c->close();  // the writer record goes with the session
    auto cleanup = connect(o.connect);
    zkr::error_code ec;
    cleanup->remove(path, zkr::any_version, ec);
    cleanup->remove(o.path, zkr::any_version, ec);
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    zkr::log::set_threshold(zkr::log::level::error);
    auto o = parse(argc, argv);
    if (o.scenario == "inc") return inc(o);
    if (o.scenario == "barrier") return barrier(o);
    if (o.scenario == "ids") return ids(o);
    throw std::invalid_argument("unknown scenario " + o.scenario);
} catch (const std::exception& e) {
    std::cerr << "zkr_coordination_bench: " << e.what() << "\n";
    return 1;
}
