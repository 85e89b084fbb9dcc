// zkr_observer_bench — what zkr::metrics costs: lock cycles per second with the metrics observer
// on and off, in one interleaved run (off, on, off, on... rounds of the same length against the
// same server), and allocations per lock cycle with and without it.
//
//   zkr_observer_bench [--connect CONNECT] [--rounds R] [--seconds S] [--contenders N]
//
//   uncontended  one client, one thread: lock + unlock of its own zkr::mutex, for S seconds.
//   contended    N clients (threads) on one path: lock + unlock, for S seconds; cycles of all.
//   Each mode R times off and R times on, alternating (off first in even rounds, on first in odd
//   ones); the medians and on/off ratios are reported. Allocations: every operator new of the process counted over one uncontended round
//   of each, per cycle (the observed path must add none).
// Without --connect, a standalone server of its own (zkr::testkit) on loopback.
// One JSON line on stdout; exit 0, or 1 with the reason on stderr.
#include "bench_support.hpp"

#include <zkr/testkit.hpp>
#include <zkr/zkr.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {
std::atomic<std::uint64_t> allocations{0};
}

// Counts every allocation of the process (the library's included: it links against this one).
void* operator new(std::size_t n) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

struct options {
    std::string connect;
    int rounds = 5, contenders = 8;
    double seconds = 2;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--connect") o.connect = v;
        else if (k == "--rounds") o.rounds = std::stoi(v);
        else if (k == "--seconds") o.seconds = std::stod(v);
        else if (k == "--contenders") o.contenders = std::stoi(v);
        else throw std::invalid_argument("unknown option " + k + " (zkr_observer_bench [--connect C] [--rounds R] [--seconds S] [--contenders N])");
    }
    if (o.rounds < 1 || o.seconds <= 0 || o.contenders < 1) throw std::invalid_argument("rounds, seconds and contenders must be positive");
    return o;
}

zkr::client_options client_options(const std::string& connect, std::shared_ptr<zkr::observer> observer) {
    auto o = zkr::bench::client_options(connect);
    o.observer = std::move(observer);
    return o;
}

// Cycles per second of `threads` clients locking `path` for `seconds` (each thread its own client).
double cycles_per_second(const options& o, const std::string& path, int threads, bool observed, double* allocs_per_cycle = nullptr) {
    auto metrics = observed ? std::make_shared<zkr::metrics>() : nullptr;
    std::vector<std::unique_ptr<zkr::client>> clients;
    std::vector<std::unique_ptr<zkr::mutex>> locks;
    for (int i = 0; i < threads; ++i) {
        clients.push_back(std::make_unique<zkr::client>(client_options(o.connect, metrics)));
        clients.back()->wait_connected(10s);
        locks.push_back(std::make_unique<zkr::mutex>(*clients.back(), path));
        locks.back()->lock();  // warm: the path's parents exist, the first cycle is done
        locks.back()->unlock();
    }
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> cycles{0}, counted{0};  // counted: as they happen (cycles: at the end)
    auto allocs_before = allocations.load();
    auto started = clock_type::now();
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
        pool.emplace_back([&, i] {
            std::uint64_t mine = 0;
            while (!stop.load(std::memory_order_relaxed)) {
                locks[i]->lock();
                locks[i]->unlock();
                ++mine;
                counted.fetch_add(1, std::memory_order_relaxed);
            }
            cycles += mine;
        });
    }
    // The measuring window (not a synchronisation). Allocations are counted over its second half:
    // the first fills the new client's buffers (the observer's ring among them).
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds / 2));
    std::uint64_t cycles_mid = 0;
    auto count_cycles = [&] { return counted.load(); };
    cycles_mid = count_cycles();
    allocs_before = allocations.load();
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds / 2));
    auto allocs_after = allocations.load();
    auto cycles_end = count_cycles();
    stop = true;
    for (auto& t : pool) t.join();
    double elapsed = std::chrono::duration<double>(clock_type::now() - started).count();
    if (allocs_per_cycle)
        *allocs_per_cycle = static_cast<double>(allocs_after - allocs_before) / static_cast<double>(std::max<std::uint64_t>(cycles_end - cycles_mid, 1));
    if (metrics) {
        for (auto& c : clients) c->flush_observer(10s);
        auto acquired = metrics->snapshot().value("zkr_lock_acquire_seconds_count", {{"outcome", "acquired"}});
        // Every cycle of the window, plus the warm-up ones: the numbers must be what happened.
        if (acquired != static_cast<double>(cycles.load() + threads)) {
            std::ostringstream why;
            why << "metrics counted " << acquired << " acquisitions for " << cycles.load() + threads << " cycles";
            throw std::runtime_error(why.str());
        }
    }
    return cycles.load() / elapsed;
}

std::string list(const std::vector<double>& v) {
    std::ostringstream out;
    out << '[';
    for (std::size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << static_cast<long long>(v[i]);
    out << ']';
    return out.str();
}

// The median over rounds of the on/off ratio within each round (paired: the rounds' drift cancels).
double paired(const std::vector<double>& on, const std::vector<double>& off);

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double paired(const std::vector<double>& on, const std::vector<double>& off) {
    std::vector<double> r;
    for (std::size_t i = 0; i < on.size(); ++i) r.push_back(on[i] / off[i]);
    return median(r);
}

}  // namespace

int main(int argc, char** argv) try {
    auto o = parse(argc, argv);
    std::unique_ptr<zkr::testkit::ensemble> own;
    if (o.connect.empty()) {
        own = std::make_unique<zkr::testkit::ensemble>(zkr::testkit::ensemble_options{});
        o.connect = own->connect_string();
    }
    std::vector<double> un_off, un_on, co_off, co_on;
    double allocs_off = 0, allocs_on = 0;
    for (int r = 0; r < o.rounds; ++r) {
        std::string base = "/zkr-observer-bench/r" + std::to_string(r);
        // Off first in even rounds, on first in odd ones: neither gains from going first or second.
        for (bool on : {r % 2 == 1, r % 2 == 0}) {
            auto* allocs = r == 0 ? (on ? &allocs_on : &allocs_off) : nullptr;
            (on ? un_on : un_off).push_back(cycles_per_second(o, base + (on ? "/u-on" : "/u-off"), 1, on, allocs));
        }
        for (bool on : {r % 2 == 1, r % 2 == 0})
            (on ? co_on : co_off).push_back(cycles_per_second(o, base + (on ? "/c-on" : "/c-off"), o.contenders, on));
    }
    std::cout << "{\"rounds\": " << o.rounds << ", \"seconds\": " << o.seconds << ", \"contenders\": " << o.contenders
              << ", \"uncontended_off\": " << median(un_off) << ", \"uncontended_on\": " << median(un_on)
              << ", \"uncontended_ratio\": " << median(un_on) / median(un_off) << ", \"contended_off\": " << median(co_off)
              << ", \"contended_on\": " << median(co_on) << ", \"contended_ratio\": " << median(co_on) / median(co_off)
              << ", \"uncontended_paired_ratio\": " << paired(un_on, un_off)
              << ", \"contended_paired_ratio\": " << paired(co_on, co_off) << ", \"uncontended_off_rounds\": " << list(un_off)
              << ", \"uncontended_on_rounds\": " << list(un_on) << ", \"contended_off_rounds\": " << list(co_off)
              << ", \"contended_on_rounds\": " << list(co_on)
              << ", \"allocations_per_cycle_off\": " << allocs_off << ", \"allocations_per_cycle_on\": " << allocs_on << "}"
              << std::endl;
    return 0;
} catch (const std::exception& e) {
    std::cerr << "zkr_observer_bench: " << e.what() << std::endl;
    return 1;
}
