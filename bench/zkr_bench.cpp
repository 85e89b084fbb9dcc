// zkr_bench — the C++ side of zkr's benchmark: zkr's locks, and the raw ZooKeeper C client
// (libzookeeper_mt) as the floor and the ceiling of what one session can do.
//
//   zkr_bench DRIVER SCENARIO CONNECT PATH [options]      prints one JSON line, exit 0 on success
//
// Drivers:
//   zkr            zkr::mutex / zkr::shared_mutex, one zkr::client for the whole process
//   raw-sync       synchronous create(EPHEMERAL_SEQUENTIAL) + get_children + delete: 3 round trips
//   raw-pipelined  create and get_children sent back to back (async), waited for together; the
//                  delete sent without waiting (ordered before the next create): 1 round trip
//   raw-async      like raw-pipelined, but all in completion callbacks, --threads cycles in flight
//                  on one session (no thread hand-offs at all): the ceiling of one session
// Scenarios (the Java and Python drivers accept the same):
//   uncontended    1 thread acquiring and releasing PATH
//   contended      --threads threads on PATH (in this process; run.sh starts several processes
//                  with --start-at for the multi-process variant)
//   distinct       --threads threads, each on its own path PATH/t<i>
//   shared-reads   --threads threads taking the read lock of the read/write lock PATH
//   rw-mix         --threads threads, each cycle a write with probability --write-percent, else a read
//   herd           one holder, --waiters threads queued behind it on PATH; then the chain of
//                  hand-offs: each waiter takes the lock and releases it at once
//   rtt            raw drivers only: one thread sending a synchronous zoo_exists("/") after the
//                  other (PATH is not used): one "cycle" is the round trip of one request, as the
//                  C client sees it (the network's and the server's share of every lock operation)
// The recipe scenarios (zkr only; Curator's side: bench/java/RecipeBench.java, same JSON):
//   latch-handoff  rounds of --waiters zkr::leader_latch on PATH (one client): all join, every
//                  follower's watches set, then each leader in turn is closed: close() -> the next
//                  latch's on_leadership (hand-off figures, as RecipeBench)
//   latch-join     one latch at a time: start() -> on_leadership; then close() and wait for the
//                  node's deletion, so every join is uncontended
//   sem-uncontended, sem-contended
//                  --threads threads, each its own zkr::semaphore(PATH, --max M): acquire() +
//                  release() per cycle; also acquire_p50_us (acquire alone), max_leases, most_held
//   queue-depth    a holder, then --waiters async acquisitions queued on PATH from --clients
//                  clients (split over --procs processes), each released as soon as granted:
//                  per_handoff_us, rss_per_waiter_kb, server_requests_per_handoff (issue 23)
//   multi-lock     1 thread: zkr::multi_lock over the mutexes PATH/a and PATH/b (lock() + unlock())
// The timed scenarios, latch-join, latch-handoff and sem-* add the servers' cost over the window,
// sampled at its start and end and divided by the cycles that ended between the two samples:
// server_requests_per_cycle (each server's mntr zk_packets_received / the cycles that ended
// between its two answers, summed over the servers of --mntr-servers; every session's:
// meaningful while nothing else uses the servers), harness_requests_per_cycle
// (those of them this benchmark sent itself: polls, its own watches; the recipe's are the
// difference) and server_cpu_ms_per_1000 (utime + stime of the --server-pids processes, from
// /proc/PID/stat, per 1000 cycles; null without --server-pids). latch-handoff's cycle is a
// hand-off (with --waiters 2, one round: 2 joins, the hand-off, 2 closes).
// The raw drivers do uncontended, distinct and rtt only (they have no waiting).
//
// Options:
//   --threads T         worker threads (raw-async: cycles in flight)            [1]
//   --seconds S         measured time                                            [3]
//   --warmup W          seconds of cycles before the measured window            [1]
//   --start-at MS       start the measured window at this wall-clock time (ms since the epoch)
//                       instead of after --warmup (several processes measured together)
//   --emit-latencies    add every latency sample (µs) to the output, for merging
//   --write-percent P   rw-mix: share of writes                                  [10]
//   --waiters N         herd: waiters                                            [10]
//   --seed N            rw-mix: random seed                                      [1]
//   --resolve-delay MS  raw drivers: zoo_set_servers_resolution_delay(MS) (-1: never re-resolve);
//                       default 0, the C client's own default: re-resolve on every I/O loop turn
//   --max M             sem-*: the semaphore's maximum                          [3]
//   --clients K         queue-depth: clients, over all its processes            [10]
//   --procs P           queue-depth: processes the waiters are split over       [1]
//   --pause-queued S    queue-depth (one process): pause S s once queued, for a fault by hand
//   --server-pids P,..  the ZooKeeper server processes whose CPU the window's cost adds up
//   --mntr-servers H,.. host:port of every server to ask mntr (default: CONNECT's servers); a
//                       client connected to one follower still costs the leader requests
//   --settle-ms MS      latch-handoff: once all have joined, sleep MS instead of polling the
//                       servers' watch count (mntr costs a server ~1.4 ms of CPU: it would swamp
//                       server_cpu_ms_per_1000); the polls for the joins count as the harness's
//
// A cycle is acquire + release, measured from the call to acquire to the return of release. Output
// (one line): cycles in the window, cycles_per_s, p50_us, p99_us, cpu_s (user+sys of this
// process, getrusage, over the window), cpu_ms_per_1000 (ms of CPU per 1000 cycles), rss_kb
// (peak RSS of this process), errors. herd prints hand-off figures instead.
#include "bench_support.hpp"

#include <zkr/zkr.hpp>

#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

using zkr::bench::mntr_sum;
using zkr::bench::mntr_value;
using zkr::bench::server_packets;
using zkr::bench::servers_of;

// ------------------------------------------------------------------ options

struct options {
    std::string driver, scenario, connect, path;
    int threads = 1;
    double seconds = 3;
    double warmup = 1;
    std::optional<std::int64_t> start_at_ms;
    bool emit_latencies = false;
    int write_percent = 10;
    int waiters = 10;
    std::uint64_t seed = 1;
    int resolve_delay_ms = 0;  // raw drivers: zoo_set_servers_resolution_delay (0: the C client's default)
    int max = 3;               // sem-*: the semaphore's maximum
    int clients = 10;          // queue-depth: clients (over all processes)
    int procs = 1;             // queue-depth: processes
    int pause_queued = 0;      // queue-depth: seconds to pause once queued (faults by hand)
    std::vector<int> server_pids;  // the servers' processes (their CPU over the window)
    std::string mntr_servers;      // the servers to ask mntr (default: connect's)
    int settle_ms = -1;            // latch-handoff: sleep instead of polling mntr (-1: poll)
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "zkr_bench: %s\n"
                 "usage: zkr_bench zkr|raw-sync|raw-pipelined|raw-async "
                 "uncontended|contended|distinct|shared-reads|rw-mix|herd|rtt|\n"
                 "       latch-handoff|latch-join|sem-uncontended|sem-contended|multi-lock CONNECT PATH\n"
                 "       [--threads T] [--seconds S] [--warmup W] [--start-at MS] [--emit-latencies]\n"
                 "       [--write-percent P] [--waiters N] [--seed N] [--resolve-delay MS] [--max M]\n"
                 "       [--server-pids P1,P2,...] [--mntr-servers HOST:PORT,...] [--settle-ms MS]\n",
                 why.c_str());
    std::exit(2);
}

options parse(int argc, char** argv) {
    options o;
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage("missing value for " + a);
            return argv[++i];
        };
        try {
            if (a == "--threads") o.threads = std::stoi(value());
            else if (a == "--seconds") o.seconds = std::stod(value());
            else if (a == "--warmup") o.warmup = std::stod(value());
            else if (a == "--start-at") o.start_at_ms = std::stoll(value());
            else if (a == "--emit-latencies") o.emit_latencies = true;
            else if (a == "--write-percent") o.write_percent = std::stoi(value());
            else if (a == "--waiters") o.waiters = std::stoi(value());
            else if (a == "--seed") o.seed = std::stoull(value());
            else if (a == "--resolve-delay") o.resolve_delay_ms = std::stoi(value());
            else if (a == "--max") o.max = std::stoi(value());
            else if (a == "--clients") o.clients = std::stoi(value());
            else if (a == "--procs") o.procs = std::stoi(value());
            else if (a == "--pause-queued") o.pause_queued = std::stoi(value());
            else if (a == "--server-pids") {
                std::istringstream in(value());
                for (std::string pid; std::getline(in, pid, ',');)
                    if (!pid.empty()) o.server_pids.push_back(std::stoi(pid));
            } else if (a == "--mntr-servers") o.mntr_servers = value();
            else if (a == "--settle-ms") o.settle_ms = std::stoi(value());
            else if (a.rfind("--", 0) == 0) usage("unknown option " + a);
            else pos.push_back(a);
        } catch (const std::logic_error&) {
            usage("bad value for " + a);
        }
    }
    if (pos.size() != 4) usage("expected DRIVER SCENARIO CONNECT PATH");
    o.driver = pos[0];
    o.scenario = pos[1];
    o.connect = pos[2];
    o.path = pos[3];
    if (o.mntr_servers.empty()) o.mntr_servers = o.connect;
    if (o.threads < 1 || o.seconds <= 0 || o.warmup < 0 || o.waiters < 1 || o.write_percent < 0 || o.write_percent > 100 ||
        o.max < 1)
        usage("out-of-range option");
    if ((o.scenario == "uncontended" || o.scenario == "sem-uncontended" || o.scenario == "latch-join" ||
         o.scenario == "multi-lock") &&
        o.threads != 1)
        usage(o.scenario + " runs 1 thread");
    if (o.scenario == "latch-handoff" && o.waiters < 2) usage("latch-handoff needs --waiters >= 2");
    if (o.path.size() < 2 || o.path[0] != '/' || o.path.back() == '/') usage("PATH must be an absolute znode path");
    return o;
}

// ------------------------------------------------------------------ measuring

double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto tv = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    return tv(ru.ru_utime) + tv(ru.ru_stime);
}

long peak_rss_kb() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

double percentile_us(std::vector<std::int64_t> ns, double q) { return zkr::bench::percentile(std::move(ns), q) / 1e3; }

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
        else out += c;
    }
    return out;
}

/// One line of JSON: fields in insertion order.
class json_line {
public:
    json_line& num(const std::string& k, double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g", v);
        return raw(k, buf);
    }
    json_line& integer(const std::string& k, std::int64_t v) { return raw(k, std::to_string(v)); }
    json_line& str(const std::string& k, const std::string& v) { return raw(k, "\"" + json_escape(v) + "\""); }
    json_line& null(const std::string& k) { return raw(k, "null"); }
    json_line& raw(const std::string& k, const std::string& v) {
        out_ << (first_ ? "{" : ", ") << '"' << k << "\": " << v;
        first_ = false;
        return *this;
    }
    std::string done() { return out_.str() + "}"; }

private:
    std::ostringstream out_;
    bool first_ = true;
};

json_line header(const options& o) {
    json_line j;
    j.str("driver", o.driver).str("scenario", o.scenario).integer("threads", o.threads);
    return j;
}

/// The measured window: [t0, t1]. Cycles ending inside it count.
struct window {
    clock_type::time_point t0, t1;
};

window make_window(const options& o) {
    auto now = clock_type::now();
    window w;
    if (o.start_at_ms) {
        auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
        w.t0 = now + std::chrono::milliseconds(*o.start_at_ms - wall);
        if (w.t0 < now)
            throw std::runtime_error("ready " + std::to_string(wall - *o.start_at_ms) + " ms after --start-at");
    } else {
        w.t0 = now + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.warmup));
    }
    w.t1 = w.t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.seconds));
    return w;
}

// ------------------------------------------------------------------ four-letter words, the server's cost

/// Sends a four-letter word to the first server of the connect string; returns its reply.
std::string four_letter(const std::string& connect, const std::string& word) {
    return zkr::bench::four_letter(servers_of(connect).front(), word);
}

/// Watches the servers hold now, data and child (mntr zk_watch_count, summed).
std::int64_t server_watch_count(const std::string& servers) { return mntr_sum(servers, "zk_watch_count"); }

/// CPU time (utime + stime, s) the processes `pids` have used so far, summed; -1 if one of them
/// cannot be read. /proc/PID/stat fields 14 and 15, in clock ticks, counted after the ")" that
/// ends field 2 (a command name may hold spaces).
double processes_cpu_s(const std::vector<int>& pids) {
    static const double tick = double(sysconf(_SC_CLK_TCK));
    double total = 0;
    for (int pid : pids) {
        std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
        if (!f) return -1;
        char buf[2048];
        std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
        std::fclose(f);
        buf[n] = '\0';
        const char* p = std::strrchr(buf, ')');
        if (!p) return -1;
        // After ")": field 3 (state) ... field 15 (stime): skip fields 3..13.
        std::istringstream in(p + 1);
        std::string skip;
        for (int field = 3; field <= 13; ++field) in >> skip;
        unsigned long long utime = 0, stime = 0;
        if (!(in >> utime >> stime)) return -1;
        total += double(utime + stime) / tick;
    }
    return total;
}

// Cycles ended and requests the benchmark sent itself, so far: read by window_sampler together
// with the servers' counters, so that a window's requests are divided by the cycles that ended
// between its two mntr samples, not by those of [t0, t1] (a sample taken late on a busy machine
// would otherwise miscount).
std::atomic<std::int64_t> cycles_done{0};
std::atomic<std::int64_t> harness_sent{0};

/// `n` cycles ended (a latch-handoff round: its hand-offs).
void note_cycles(std::int64_t n = 1) { cycles_done.fetch_add(n, std::memory_order_relaxed); }

/// One request sent by the benchmark itself (a poll, a watch of its own), not the recipe's.
void note_harness() { harness_sent.fetch_add(1, std::memory_order_relaxed); }

/// What the servers did between the window's two samples: every session's requests per cycle,
/// the benchmark's own requests, the cycles that ended, and the server processes' CPU.
struct server_cost {
    double requests_per_cycle = -1;  // every session's, summed over the servers (-1: mntr not answered)
    double harness = 0;              // requests this benchmark sent itself (not the recipe's)
    double cycles = 0;               // cycles ended
    double cpu_s = -1;               // the server processes' CPU (-1: no --server-pids)
};

/// Samples this process's CPU, each server's requests, the server processes' CPU, the cycles
/// ended and the harness's requests at the window's start and its end, on a thread of its own
/// (the measured threads are busy). The servers are asked one after the other: each server's
/// requests are divided by the cycles that ended between its own two answers.
class window_sampler {
public:
    window_sampler(const options& o, window w) : servers_(servers_of(o.mntr_servers)), pids_(o.server_pids) {
        for (auto& v : packets_) v.assign(servers_.size(), -1);
        for (auto& v : at_) v.assign(servers_.size(), 0);
        thread_ = std::thread([this, w] {
            sample(0);  // once before: the first call's set-up must not stretch the sample at t0
            std::this_thread::sleep_until(w.t0);
            sample(0);
            std::this_thread::sleep_until(w.t1);
            sample(1);
        });
    }
    ~window_sampler() { join(); }
    void join() {
        if (thread_.joinable()) thread_.join();
    }
    double cpu_s() const { return cpu_[1] - cpu_[0]; }
    server_cost cost() const {
        server_cost c;
        c.harness = harness_[1] - harness_[0];
        c.cycles = cycles_[1] - cycles_[0];
        double per_cycle = 0;
        for (std::size_t s = 0; s < servers_.size(); ++s) {
            double cycles = at_[1][s] - at_[0][s];
            if (packets_[0][s] < 0 || packets_[1][s] < 0 || cycles <= 0) return c;
            // A four-letter word counts as a packet too: less the end sample's own mntr.
            per_cycle += double(packets_[1][s] - packets_[0][s] - 1) / cycles;
        }
        c.requests_per_cycle = per_cycle;
        if (server_cpu_[0] >= 0 && server_cpu_[1] >= 0) c.cpu_s = server_cpu_[1] - server_cpu_[0];
        return c;
    }

private:
    void sample(int i) {
        // Counters read before and after a server's mntr: their mean is when it answered.
        auto c0 = cycles_done.load(), h0 = harness_sent.load();
        cpu_[i] = cpu_seconds();
        for (std::size_t s = 0; s < servers_.size(); ++s) {
            auto before = cycles_done.load();
            try {
                packets_[i][s] = mntr_value(servers_[s], "zk_packets_received");
            } catch (const std::exception&) {
                packets_[i][s] = -1;
            }
            at_[i][s] = double(before + cycles_done.load()) / 2;
        }
        server_cpu_[i] = pids_.empty() ? -1 : processes_cpu_s(pids_);
        cycles_[i] = double(c0 + cycles_done.load()) / 2;
        harness_[i] = double(h0 + harness_sent.load()) / 2;
    }
    std::vector<std::string> servers_;
    std::vector<int> pids_;
    double cpu_[2] = {0, 0};
    std::vector<std::int64_t> packets_[2];  // per server
    std::vector<double> at_[2];             // per server: the cycles ended when it answered
    double server_cpu_[2] = {-1, -1};
    double cycles_[2] = {0, 0};
    double harness_[2] = {0, 0};
    std::thread thread_;
};

/// The servers' cost per cycle ended between the samples: server_requests_per_cycle (every
/// request, the harness's included), harness_requests_per_cycle, server_cpu_ms_per_1000 (null
/// where unknown).
void add_server_cost(json_line& j, const server_cost& c) {
    if (c.requests_per_cycle < 0) j.null("server_requests_per_cycle");
    else j.num("server_requests_per_cycle", c.requests_per_cycle);
    if (c.cycles <= 0) j.null("harness_requests_per_cycle");
    else j.num("harness_requests_per_cycle", c.harness / c.cycles);
    if (c.cpu_s < 0 || c.cycles <= 0) j.null("server_cpu_ms_per_1000");
    else j.num("server_cpu_ms_per_1000", c.cpu_s * 1e3 / c.cycles * 1000.0);
}

/// Runs `wait` (joins); if it has not returned by `deadline`, reports the run as stuck and ends
/// the process (a deadlocked lock must not hang the benchmark).
void stuck_guard(clock_type::time_point deadline, const options& o, const std::function<void()>& wait) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread guard([&] {
        std::unique_lock lock(m);
        if (!cv.wait_until(lock, deadline, [&] { return done; })) {
            std::printf("{\"driver\": \"%s\", \"scenario\": \"%s\", \"errors\": 1, "
                        "\"error\": \"stuck: threads still in a cycle 20 s after the window\"}\n",
                        o.driver.c_str(), o.scenario.c_str());
            std::fflush(stdout);
            std::_Exit(1);
        }
    });
    wait();
    {
        std::lock_guard lock(m);
        done = true;
    }
    cv.notify_all();
    guard.join();
}

struct run_result {
    std::vector<std::int64_t> latencies_ns;
    double cpu_s = 0;
    std::uint64_t errors = 0;
    std::string first_error;
    server_cost server;  // the servers' cost over the window
};

/// Runs `cycle(thread index, rng)` on `threads` threads until the window closes. `cycle` does one
/// acquire + release and throws on failure. `prepare(i)` runs on each thread before its first cycle.
run_result run_threads(const options& o, int threads, const std::function<void(int)>& prepare,
                       const std::function<void(int, std::mt19937_64&)>& cycle) {
    window w = make_window(o);
    std::vector<std::vector<std::int64_t>> lat(threads);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> errors{0};
    std::mutex error_mutex;
    std::string first_error;
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
        pool.emplace_back([&, i] {
            std::mt19937_64 rng(o.seed * 1000003 + std::uint64_t(i));
            try {
                if (prepare) prepare(i);
                while (!stop.load(std::memory_order_relaxed)) {
                    auto s = clock_type::now();
                    if (s >= w.t1) break;
                    cycle(i, rng);
                    note_cycles();
                    auto e = clock_type::now();
                    if (e >= w.t0 && e <= w.t1) lat[i].push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(e - s).count());
                }
            } catch (const std::exception& e) {
                ++errors;
                stop = true;
                std::lock_guard lock(error_mutex);
                if (first_error.empty()) first_error = e.what();
            }
        });
    }
    window_sampler sampler(o, w);
    sampler.join();  // returns at the window's end
    stuck_guard(w.t1 + 20s, o, [&] {
        for (auto& t : pool) t.join();
    });
    run_result r;
    for (auto& v : lat) r.latencies_ns.insert(r.latencies_ns.end(), v.begin(), v.end());
    r.cpu_s = sampler.cpu_s();
    r.server = sampler.cost();
    r.errors = errors;
    r.first_error = first_error;
    return r;
}

std::string finish_timed(const options& o, const run_result& r, json_line j) {
    auto cycles = static_cast<std::int64_t>(r.latencies_ns.size());
    j.integer("procs", 1).num("seconds", o.seconds).integer("cycles", cycles).num("cycles_per_s", double(cycles) / o.seconds);
    j.num("p50_us", percentile_us(r.latencies_ns, 0.50)).num("p99_us", percentile_us(r.latencies_ns, 0.99));
    j.num("cpu_s", r.cpu_s);
    if (cycles > 0) j.num("cpu_ms_per_1000", r.cpu_s * 1e3 / double(cycles) * 1000.0);
    else j.null("cpu_ms_per_1000");
    j.integer("rss_kb", peak_rss_kb()).integer("errors", static_cast<std::int64_t>(r.errors));
    if (!r.first_error.empty()) j.str("error", r.first_error);
    add_server_cost(j, r.server);
    if (o.emit_latencies) {
        std::string arr = "[";
        for (std::size_t i = 0; i < r.latencies_ns.size(); ++i) {
            if (i) arr += ',';
            arr += std::to_string((r.latencies_ns[i] + 500) / 1000);
        }
        j.raw("latencies_us", arr + "]");
    }
    return j.done();
}

/// Watch notifications the server has triggered so far (mntr: the sums of the watch-count
/// summaries of node created/deleted/changed/children events).
std::int64_t server_notifications(const std::string& connect) {
    std::istringstream in(four_letter(connect, "mntr"));
    std::int64_t total = 0;
    for (std::string line; std::getline(in, line);) {
        auto tab = line.find('\t');
        if (tab == std::string::npos) continue;
        std::string key = line.substr(0, tab);
        if (key.rfind("zk_sum_node_", 0) == 0 && key.size() > 12 && key.find("_watch_count") != std::string::npos)
            total += std::stoll(line.substr(tab + 1));
    }
    return total;
}

/// Watches the server holds now (wchs: "Total watches:N").
std::int64_t server_watches(const std::string& connect) {
    std::string reply = four_letter(connect, "wchs");
    auto at = reply.find("Total watches:");
    return at == std::string::npos ? -1 : std::stoll(reply.substr(at + 14));
}

// ------------------------------------------------------------------ herd (any lock)

struct herd_figures {
    std::vector<std::int64_t> handoff_ns;  // in acquisition order
    double queue_s = 0;
    double chain_s = 0;
    std::int64_t notifications = 0;
    std::int64_t watches_queued = 0;
    std::optional<std::int64_t> wakeups;
};

std::string herd_json(const options& o, const herd_figures& f) {
    json_line j;
    j.str("driver", o.driver).str("scenario", "herd").integer("threads", o.waiters + 1).integer("procs", 1);
    j.integer("waiters", o.waiters).integer("handoffs", static_cast<std::int64_t>(f.handoff_ns.size()));
    j.num("handoff_p50_us", percentile_us(f.handoff_ns, 0.5)).num("handoff_p99_us", percentile_us(f.handoff_ns, 0.99));
    j.num("handoff_max_us", percentile_us(f.handoff_ns, 1.0));
    // Mean hand-off of the first and the last tenth of the queue: flat in position if equal.
    auto n = f.handoff_ns.size();
    std::size_t tenth = std::max<std::size_t>(1, n / 10);
    auto mean = [&](std::size_t from, std::size_t to) {
        double s = 0;
        for (auto i = from; i < to; ++i) s += double(f.handoff_ns[i]);
        return to > from ? s / double(to - from) / 1e3 : 0.0;
    };
    j.num("handoff_first_tenth_us", mean(0, std::min(tenth, n))).num("handoff_last_tenth_us", mean(n - std::min(tenth, n), n));
    j.num("queue_s", f.queue_s).num("chain_s", f.chain_s);
    double releases = double(std::max<std::size_t>(1, n));
    j.integer("server_watches_queued", f.watches_queued);
    j.num("notifications_per_release", double(f.notifications) / releases);
    if (f.wakeups) j.num("wakeups_per_release", double(*f.wakeups) / releases);
    else j.null("wakeups_per_release");
    j.integer("rss_kb", peak_rss_kb()).integer("errors", 0);
    return j.done();
}

// ------------------------------------------------------------------ zkr

struct exclusion_check {
    std::atomic<int> writers{0}, readers{0};
    void write_in() {
        if (writers.fetch_add(1) != 0 || readers.load() != 0) throw std::runtime_error("mutual exclusion violated (write)");
    }
    void write_out() { writers.fetch_sub(1); }
    void read_in() {
        readers.fetch_add(1);
        if (writers.load() != 0) throw std::runtime_error("mutual exclusion violated (read)");
    }
    void read_out() { readers.fetch_sub(1); }
};

void require_empty(zkr::client& c, const std::string& path) {
    zkr::error_code ec;
    auto r = c.get_children(path, ec);
    if (!ec && !r.children.empty())
        throw std::runtime_error(std::to_string(r.children.size()) + " node(s) left under " + path + " after the run");
}

// ------------------------------------------------------------------ zkr recipes (leader latch, semaphore)
//
// The zkr side of bench/java/RecipeBench.java: the same scenarios, the same measurements, the same
// JSON (bench.py pairs them), with the servers' cost over the window (window_sampler): every
// request of every client, so it is this driver's only while nothing else talks to the servers;
// the polls and watches of the benchmark's own are counted apart (harness_requests_per_cycle).

/// finish_timed's line with more fields appended.
std::string with_fields(const std::string& line, const std::string& more) {
    return line.substr(0, line.size() - 1) + more + "}";
}

/// Children of `path` from its stat (0 if it is missing). `harness`: count the request as the
/// benchmark's own.
int num_children(zkr::client& c, const std::string& path, bool harness = false) {
    zkr::error_code ec;
    if (harness) note_harness();
    auto r = c.exists(path, ec);
    if (ec) throw zkr::system_error(ec);
    return r.exists ? r.stat.num_children : 0;
}

void wait_for_children(zkr::client& c, const std::string& path, int n, std::chrono::seconds timeout, const char* what,
                       bool harness = false) {
    auto deadline = clock_type::now() + timeout;
    while (num_children(c, path, harness) != n) {
        if (clock_type::now() > deadline)
            throw std::runtime_error(std::string(what) + ": " + path + " has " + std::to_string(num_children(c, path)) +
                                     " children, expected " + std::to_string(n));
        std::this_thread::sleep_for(1ms);
    }
}

/// Who led when, in order (the latches' on_leadership listeners, on the client's executor).
struct leader_queue {
    std::mutex m;
    std::condition_variable cv;
    std::vector<int> order;  // latch indexes, in the order they said they lead
    std::size_t taken = 0;
    std::vector<std::int64_t> at_ns;

    void led(int i) {
        auto t = now_ns();
        std::lock_guard lock(m);
        at_ns[static_cast<std::size_t>(i)] = t;
        order.push_back(i);
        cv.notify_all();
    }
    std::optional<int> next(std::chrono::seconds timeout) {
        std::unique_lock lock(m);
        if (!cv.wait_for(lock, timeout, [&] { return order.size() > taken; })) return std::nullopt;
        return order[taken++];
    }
    bool more() {
        std::lock_guard lock(m);
        return order.size() > taken;
    }
};

/// latch-handoff: rounds of --waiters latches on PATH (one client): all join and the followers'
/// watches are set (wchs), then each leader in turn is closed (silent); the hand-off is close() ->
/// the next latch's on_leadership. Hand-offs whose close() falls in the window count.
int run_zkr_latch_handoff(const options& o, zkr::client& client) {
    const int n = o.waiters;
    window w = make_window(o);
    window_sampler sampler(o, w);
    std::vector<std::int64_t> lat;
    int rounds = 0;
    std::string error;
    bool watch_count = true;
    std::int64_t t0 = std::chrono::duration_cast<std::chrono::nanoseconds>(w.t0.time_since_epoch()).count();
    std::int64_t t1 = std::chrono::duration_cast<std::chrono::nanoseconds>(w.t1.time_since_epoch()).count();
    try {
        while (now_ns() < t1) {
            bool measured = false;
            leader_queue q;
            q.at_ns.assign(static_cast<std::size_t>(n), 0);
            std::vector<std::unique_ptr<zkr::leader_latch>> latches;
            std::vector<zkr::subscription> subs;
            for (int i = 0; i < n; ++i) {
                latches.push_back(std::make_unique<zkr::leader_latch>(client, o.path, "latch-" + std::to_string(i)));
                subs.push_back(latches.back()->on_leadership([&q, i] { q.led(i); }));
                latches.back()->start();
            }
            // --settle-ms: give the joins (and the followers' watches) that long, then check the
            // joins with as few polls as may be; no mntr in the window.
            if (o.settle_ms >= 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.settle_ms));
            wait_for_children(client, o.path, n, 60s, "latches joining", true);
            // Every follower watches the one ahead before the chain starts (as RecipeBench waits for
            // wchs >= N - 1). zkr's waiters watch with child watches (on the node ahead and on their
            // own node, set together), which wchs does not count: mntr's zk_watch_count does (data
            // and child watches, one per path and session), and it reaches N (every node watched)
            // once the last follower's watches are set.
            if (watch_count && o.settle_ms < 0) {
                auto deadline = clock_type::now() + 2s;
                try {
                    while (server_watch_count(o.mntr_servers) < n && clock_type::now() < deadline) std::this_thread::sleep_for(1ms);
                } catch (const std::exception&) {
                    watch_count = false;
                }
            }
            auto cur = q.next(30s);
            if (!cur) throw std::runtime_error("latch-handoff: no leader within 30 s");
            for (int closed = 1;; ++closed) {
                auto tc = now_ns();
                latches[static_cast<std::size_t>(*cur)]->close();
                if (closed == n) break;
                auto nxt = q.next(30s);
                if (!nxt) throw std::runtime_error("latch-handoff: no on_leadership within 30 s of close() " + std::to_string(closed));
                std::int64_t d;
                {
                    std::lock_guard lock(q.m);
                    d = q.at_ns[static_cast<std::size_t>(*nxt)] - tc;
                }
                if (d < 0) throw std::runtime_error("latch-handoff: latch " + std::to_string(*nxt) + " led before the leader closed");
                if (q.more()) throw std::runtime_error("latch-handoff: two on_leadership calls after one close()");
                if (tc >= t0 && tc <= t1) {
                    lat.push_back(d);
                    measured = true;
                }
                cur = nxt;
            }
            wait_for_children(client, o.path, 0, 30s, "latches leaving", true);
            note_cycles(n - 1);  // the round's hand-offs, its requests all sent
            subs.clear();
            latches.clear();
            if (measured) ++rounds;
        }
    } catch (const std::exception& e) {
        error = e.what();
    }
    sampler.join();
    json_line j;
    j.str("driver", o.driver).str("scenario", o.scenario).integer("latches", n);
    j.num("seconds", o.seconds).integer("rounds", rounds).integer("handoffs", static_cast<std::int64_t>(lat.size()));
    double mean = 0;
    for (auto v : lat) mean += double(v);
    j.num("handoff_p50_us", percentile_us(lat, 0.5)).num("handoff_p99_us", percentile_us(lat, 0.99));
    j.num("handoff_max_us", percentile_us(lat, 1.0));
    if (lat.empty()) j.null("handoff_mean_us");
    else j.num("handoff_mean_us", mean / double(lat.size()) / 1e3);
    j.num("cpu_s", sampler.cpu_s());
    if (lat.empty()) j.null("cpu_ms_per_handoff");
    else j.num("cpu_ms_per_handoff", sampler.cpu_s() * 1e3 / double(lat.size()));
    add_server_cost(j, sampler.cost());  // a cycle: a hand-off (and its round's share)
    j.integer("rss_kb", peak_rss_kb()).integer("errors", error.empty() ? 0 : 1);
    if (!error.empty()) j.str("error", error);
    std::cout << j.done() << std::endl;
    zkr::error_code ec;
    client.remove(o.path, zkr::any_version, ec);
    return error.empty() ? 0 : 1;
}

/// latch-join: one latch at a time on PATH: start() -> on_leadership is the latency; then close()
/// and wait (a watch on its node) until the node is deleted, so every join is uncontended.
/// cycles_per_s counts whole cycles (join + close + deletion seen).
int run_zkr_latch_join(const options& o, zkr::client& client) {
    window w = make_window(o);
    window_sampler sampler(o, w);
    run_result r;
    try {
        while (clock_type::now() < w.t1) {
            zkr::leader_latch latch(client, o.path, "join");
            std::mutex m;
            std::condition_variable cv;
            std::int64_t led_at = 0;
            auto sub = latch.on_leadership([&] {
                auto t = now_ns();
                std::lock_guard lock(m);
                led_at = t;
                cv.notify_all();
            });
            auto s = now_ns();
            latch.start();
            std::int64_t e;
            {
                std::unique_lock lock(m);
                if (!cv.wait_for(lock, 30s, [&] { return led_at != 0; }))
                    throw std::runtime_error("an uncontended latch did not lead within 30 s");
                e = led_at;
            }
            std::string ours = latch.node_path();
            if (!ours.empty()) note_harness();
            auto seen = ours.empty() ? zkr::exists_result{} : client.exists(ours, zkr::set_watch);
            latch.close();
            if (seen.exists) {
                auto ev = seen.watch.wait(30s);
                if (!ev) throw std::runtime_error("the closed latch's node " + ours + " was not deleted within 30 s");
                if (ev->type != zkr::event_type::deleted) {
                    // The watch ended otherwise (e.g. removed with the latch's own): poll for the deletion.
                    auto deadline = clock_type::now() + 30s;
                    for (;;) {
                        note_harness();
                        if (!client.exists(ours).exists) break;
                        if (clock_type::now() > deadline) throw std::runtime_error("the closed latch's node was not deleted");
                        std::this_thread::sleep_for(1ms);
                    }
                }
            }
            std::int64_t t0 = std::chrono::duration_cast<std::chrono::nanoseconds>(w.t0.time_since_epoch()).count();
            std::int64_t t1 = std::chrono::duration_cast<std::chrono::nanoseconds>(w.t1.time_since_epoch()).count();
            if (e >= t0 && e <= t1) r.latencies_ns.push_back(e - s);
            note_cycles();  // join + close + deletion seen
        }
    } catch (const std::exception& e) {
        ++r.errors;
        r.first_error = e.what();
    }
    sampler.join();
    r.cpu_s = sampler.cpu_s();
    r.server = sampler.cost();
    std::cout << finish_timed(o, r, header(o)) << std::endl;
    zkr::error_code ec;
    client.remove(o.path, zkr::any_version, ec);
    return r.errors ? 1 : 0;
}

/// sem-uncontended (1 thread) and sem-contended (--threads): each thread its own
/// zkr::semaphore(PATH, --max) on the one client; a cycle is acquire() + release(); the process
/// checks that no more than --max leases are held at once, and that PATH/leases and PATH/locks
/// are empty after the run.
int run_zkr_semaphore(const options& o, zkr::client& client) {
    std::vector<std::unique_ptr<zkr::semaphore>> sems(static_cast<std::size_t>(o.threads));
    std::atomic<int> holders{0}, most{0};
    const int max = o.max;
    window w = make_window(o);  // run_threads's, give or take microseconds
    // acquire() alone (the caller waits for it; release() returns at once), per thread: (end, latency).
    std::vector<std::vector<std::pair<clock_type::time_point, std::int64_t>>> acquires(static_cast<std::size_t>(o.threads));
    run_result r = run_threads(
        o, o.threads, [&](int i) { sems[static_cast<std::size_t>(i)] = std::make_unique<zkr::semaphore>(client, o.path, max); },
        [&](int i, std::mt19937_64&) {
            auto a0 = clock_type::now();
            zkr::lease l = sems[static_cast<std::size_t>(i)]->acquire();
            auto a1 = clock_type::now();
            acquires[static_cast<std::size_t>(i)].emplace_back(a1, std::chrono::duration_cast<std::chrono::nanoseconds>(a1 - a0).count());
            int h = ++holders;
            for (int m = most.load(); h > m && !most.compare_exchange_weak(m, h);) {
            }
            if (h > max) throw std::runtime_error(std::to_string(h) + " leases held at once, max " + std::to_string(max));
            --holders;
            l.release();
        });
    if (r.errors == 0 && !o.start_at_ms) {
        try {
            for (const char* sub : {"/leases", "/locks"}) {
                int left = num_children(client, o.path + sub);
                if (left != 0) throw std::runtime_error(std::to_string(left) + " node(s) left under " + o.path + sub + " after the run");
            }
        } catch (const std::exception& e) {
            ++r.errors;
            r.first_error = e.what();
        }
    }
    std::vector<std::int64_t> acquire_ns;
    for (auto& v : acquires)
        for (auto& [end, ns] : v)
            if (end >= w.t0 && end <= w.t1) acquire_ns.push_back(ns);
    json_line extra;
    extra.integer("max_leases", max).integer("most_held", most.load());
    extra.num("acquire_p50_us", percentile_us(acquire_ns, 0.5)).num("acquire_p99_us", percentile_us(acquire_ns, 0.99));
    std::string more = extra.done();
    std::cout << with_fields(finish_timed(o, r, header(o)), ", " + more.substr(1, more.size() - 2)) << std::endl;
    sems.clear();
    if (!o.start_at_ms) {
        zkr::error_code ec;
        for (const char* sub : {"/leases", "/locks", ""}) client.remove(o.path + sub, zkr::any_version, ec);
    }
    return r.errors ? 1 : 0;
}

// ------------------------------------------------------------------ queue-depth (issue 23)
//
// A holder, then --waiters async acquisitions queued on one zkr::mutex path from --clients
// clients (round robin), in this process or split over --procs processes (this binary again,
// "queue-depth-part"); each releases as soon as it is granted. As RecipeBench's queue-depth:
// queue_s, chain_s, per_handoff_us = chain / N, the first and last tenth's mean gap between
// grants; and rss_per_waiter_kb (resident memory while the queue stands, less before it, / N),
// server_requests_per_handoff (mntr zk_packets_received over the chain / N).

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

long current_rss_kb() {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/// This process's share of a deep queue: its clients, its waiters, their grants.
struct queue_share {
    std::vector<std::unique_ptr<zkr::client>> clients;
    std::vector<std::unique_ptr<zkr::mutex>> locks;
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::int64_t> grant_ns;
    std::vector<std::string> errors;

    queue_share(const options& o, int clients_here) {
        for (int i = 0; i < clients_here; ++i) {
            zkr::client_options co;
            co.connect = o.connect;
            co.session_timeout = 30s;
            clients.push_back(std::make_unique<zkr::client>(co));
        }
        for (auto& c : clients) {
            c->wait_connected(15s);
            locks.push_back(std::make_unique<zkr::mutex>(*c, o.path));
        }
    }
    void queue(int waiters) {
        grant_ns.reserve(static_cast<std::size_t>(waiters));
        for (int i = 0; i < waiters; ++i) {
            locks[static_cast<std::size_t>(i) % locks.size()]->async_lock([this](zkr::error_code ec, zkr::lock_hold hold) {
                auto t = now_ns();
                {
                    std::lock_guard lock(m);
                    if (ec) errors.push_back(ec.message());
                    else grant_ns.push_back(t);
                }
                cv.notify_all();
                if (!ec) hold.async_unlock([](zkr::error_code) {});
            });
        }
    }
    /// Waits until `n` are granted or failed; false past the deadline.
    bool wait_all(std::size_t n, std::chrono::seconds timeout) {
        std::unique_lock lock(m);
        return cv.wait_for(lock, timeout, [&] { return grant_ns.size() + errors.size() >= n; });
    }
};

/// A child process running part of the queue: "ready", then on "go" it queues; on "rss" it says
/// its resident memory less what it had before queueing; when all its waiters are served it
/// prints "done <errors> <grant ns>...".
int run_queue_part(const options& o) {
    queue_share share(o, o.threads);
    long before = current_rss_kb();
    std::cout << "ready" << std::endl;
    std::string line;
    if (!std::getline(std::cin, line) || line != "go") return 1;
    share.queue(o.waiters);
    if (!std::getline(std::cin, line) || line != "rss") return 1;
    std::cout << "rss " << (current_rss_kb() - before) << std::endl;
    bool all = share.wait_all(static_cast<std::size_t>(o.waiters), 3600s);
    std::lock_guard lock(share.m);
    std::cout << "done " << (all ? share.errors.size() : std::size_t(1) + share.errors.size());
    for (auto t : share.grant_ns) std::cout << ' ' << t;
    std::cout << std::endl;
    return 0;
}

struct part_process {
    pid_t pid = -1;
    std::FILE* to = nullptr;
    std::FILE* from = nullptr;
    std::string read_line() {
        std::string out;
        for (int ch; (ch = std::fgetc(from)) != EOF && ch != '\n';) out.push_back(static_cast<char>(ch));
        return out;
    }
    void say(const char* word) {
        std::fprintf(to, "%s\n", word);
        std::fflush(to);
    }
};

part_process spawn_part(const options& o, int waiters, int clients) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        std::string w = std::to_string(waiters), c = std::to_string(clients);
        execl("/proc/self/exe", "zkr_bench", "zkr", "queue-depth-part", o.connect.c_str(), o.path.c_str(), "--waiters", w.c_str(),
              "--threads", c.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    part_process p;
    p.pid = pid;
    p.to = fdopen(in[1], "w");
    p.from = fdopen(out[0], "r");
    return p;
}

int run_zkr_queue_depth(const options& o, zkr::client& client) {
    const int n = o.waiters;
    const std::string& path = o.path;
    zkr::mutex holder(client, path);
    holder.lock();
    std::vector<std::int64_t> grants;
    std::size_t errors = 0;
    long rss_delta_kb = 0;
    std::optional<long> heap_delta_kb;  // in one process: malloc's bytes in use (what is kept, not what the heap grew to)
    double queue_s = 0, chain_s = 0;
    std::int64_t packets = -1;
    auto packets_now = [&]() -> std::int64_t {
        try {
            return server_packets(o.mntr_servers);
        } catch (const std::exception&) {
            return -1;
        }
    };
    auto wait_watches = [&] {
        // Every waiter's watches are set before the chain. The server counts a watched path once
        // per connection ("wchs"), whatever the kinds; a waiter watches the node ahead and its
        // own, which its successor's connection may watch too: at least N, as RecipeBench waits.
        auto deadline = clock_type::now() + 60s;
        while (server_watches(o.connect) < std::int64_t(n) && clock_type::now() < deadline) std::this_thread::sleep_for(5ms);
    };
    if (o.procs <= 1) {
        queue_share share(o, o.clients);
        long before = current_rss_kb();
        auto heap_before = mallinfo2().uordblks;
        auto q0 = clock_type::now();
        share.queue(n);
        wait_for_children(client, path, n + 1, 1800s, "queue-depth: queueing");
        queue_s = seconds_since(q0);
        wait_watches();
        rss_delta_kb = current_rss_kb() - before;
        heap_delta_kb = (long(mallinfo2().uordblks) - long(heap_before)) / 1024;
        if (o.pause_queued > 0) {
            // For a fault injected by hand while the queue stands (a server restart: every
            // client sets all its watches again).
            std::fprintf(stderr, "zkr_bench: queued; pausing %d s\n", o.pause_queued);
            std::this_thread::sleep_for(std::chrono::seconds(o.pause_queued));
        }
        auto p0 = packets_now();
        auto c0 = now_ns();
        holder.unlock();
        if (!share.wait_all(static_cast<std::size_t>(n), 3600s)) throw std::runtime_error("queue-depth: the chain did not finish within an hour");
        auto p1 = packets_now();
        std::lock_guard lock(share.m);
        grants = share.grant_ns;
        errors = share.errors.size();
        chain_s = double(grants.empty() ? 0 : grants.back() - c0) / 1e9;
        if (p0 >= 0 && p1 >= 0) packets = p1 - p0;
        grants.insert(grants.begin(), c0);
    } else {
        std::vector<part_process> parts;
        for (int i = 0; i < o.procs; ++i) {
            int waiters = n / o.procs + (i < n % o.procs ? 1 : 0);
            int clients = std::max(1, o.clients / o.procs);
            parts.push_back(spawn_part(o, waiters, clients));
        }
        for (auto& p : parts)
            if (p.read_line() != "ready") throw std::runtime_error("queue-depth: a part did not start");
        auto q0 = clock_type::now();
        for (auto& p : parts) p.say("go");
        wait_for_children(client, path, n + 1, 1800s, "queue-depth: queueing");
        queue_s = seconds_since(q0);
        wait_watches();
        for (auto& p : parts) {
            p.say("rss");
            auto line = p.read_line();
            if (line.rfind("rss ", 0) != 0) throw std::runtime_error("queue-depth: a part said " + line);
            rss_delta_kb += std::stol(line.substr(4));
        }
        auto p0 = packets_now();
        auto c0 = now_ns();
        holder.unlock();
        for (auto& p : parts) {
            std::istringstream in(p.read_line());
            std::string word;
            std::size_t errs = 0;
            in >> word >> errs;
            if (word != "done") throw std::runtime_error("queue-depth: a part ended early");
            errors += errs;
            for (std::int64_t t; in >> t;) grants.push_back(t);
            std::fclose(p.to);
            std::fclose(p.from);
            int status = 0;
            waitpid(p.pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++errors;
        }
        auto p1 = packets_now();
        std::sort(grants.begin(), grants.end());
        chain_s = double(grants.empty() ? 0 : grants.back() - c0) / 1e9;
        if (p0 >= 0 && p1 >= 0) packets = p1 - p0;
        grants.insert(grants.begin(), c0);
    }
    // Gaps between grants (the first from the holder's release).
    std::vector<std::int64_t> gaps;
    for (std::size_t i = 1; i < grants.size(); ++i) gaps.push_back(grants[i] - grants[i - 1]);
    std::size_t handoffs = gaps.size();
    json_line j;
    j.str("driver", o.driver).str("scenario", "queue-depth").integer("waiters", n).integer("clients", o.clients).integer("procs", std::max(1, o.procs));
    j.integer("handoffs", static_cast<std::int64_t>(handoffs)).num("queue_s", queue_s).num("chain_s", chain_s);
    j.num("per_handoff_us", handoffs ? chain_s * 1e6 / double(handoffs) : 0.0);
    j.num("handoff_p50_us", percentile_us(gaps, 0.5)).num("handoff_p99_us", percentile_us(gaps, 0.99));
    std::size_t tenth = std::max<std::size_t>(1, handoffs / 10);
    auto mean = [&](std::size_t from, std::size_t to) {
        double sum = 0;
        for (auto i = from; i < to; ++i) sum += double(gaps[i]);
        return to > from ? sum / double(to - from) / 1e3 : 0.0;
    };
    if (handoffs) j.num("handoff_first_tenth_us", mean(0, std::min(tenth, handoffs))).num("handoff_last_tenth_us", mean(handoffs - std::min(tenth, handoffs), handoffs));
    j.num("rss_per_waiter_kb", double(rss_delta_kb) / double(n));
    if (heap_delta_kb) j.num("heap_per_waiter_kb", double(*heap_delta_kb) / double(n));
    else j.null("heap_per_waiter_kb");
    if (packets >= 0 && handoffs) j.num("server_requests_per_handoff", double(packets) / double(handoffs));
    else j.null("server_requests_per_handoff");
    j.integer("rss_kb", peak_rss_kb()).integer("errors", static_cast<std::int64_t>(errors));
    std::printf("%s\n", j.done().c_str());
    require_empty(client, path);
    return errors == 0 && handoffs == std::size_t(n) ? 0 : 1;
}

int run_zkr(const options& o) {
    if (o.scenario == "queue-depth-part") return run_queue_part(o);
    zkr::client_options co;
    co.connect = o.connect;
    co.session_timeout = 10s;
    zkr::client client(co);
    client.wait_connected(15s);
    const std::string& path = o.path;
    if (o.scenario == "latch-handoff") return run_zkr_latch_handoff(o, client);
    if (o.scenario == "queue-depth") return run_zkr_queue_depth(o, client);
    if (o.scenario == "latch-join") return run_zkr_latch_join(o, client);
    if (o.scenario == "sem-uncontended" || o.scenario == "sem-contended") return run_zkr_semaphore(o, client);

    if (o.scenario == "herd") {
        herd_figures f;
        zkr::mutex holder(client, path);
        holder.lock();
        std::atomic<std::int64_t> release_ns{0};
        std::atomic<int> order{0};
        std::vector<std::int64_t> handoff(static_cast<std::size_t>(o.waiters));
        std::atomic<bool> failed{false};
        std::vector<std::thread> pool;
        auto q0 = clock_type::now();
        for (int i = 0; i < o.waiters; ++i) {
            pool.emplace_back([&] {
                try {
                    zkr::mutex m(client, path);
                    m.lock();
                    auto got = now_ns();
                    handoff[static_cast<std::size_t>(order++)] = got - release_ns.load();
                    release_ns = now_ns();
                    m.unlock();
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "zkr_bench: herd waiter: %s\n", e.what());
                    failed = true;
                }
            });
        }
        auto deadline = clock_type::now() + 300s;
        while (client.get_children(path).children.size() < static_cast<std::size_t>(o.waiters) + 1) {
            if (clock_type::now() > deadline || failed) throw std::runtime_error("the waiters did not queue");
            std::this_thread::sleep_for(20ms);
        }
        f.queue_s = std::chrono::duration<double>(clock_type::now() - q0).count();
        // The last waiters' watches are set (or 10 s passed: a recipe may set fewer).
        auto watch_deadline = clock_type::now() + 10s;
        while ((f.watches_queued = server_watches(o.connect)) < o.waiters && clock_type::now() < watch_deadline)
            std::this_thread::sleep_for(20ms);
        auto stats0 = holder.statistics();
        auto n0 = server_notifications(o.connect);
        auto c0 = now_ns();
        release_ns = c0;
        holder.unlock();
        for (auto& t : pool) t.join();
        f.chain_s = double(now_ns() - c0) / 1e9;
        if (failed) throw std::runtime_error("a herd waiter failed");
        require_empty(client, path);  // also: every delete has been applied
        f.notifications = server_notifications(o.connect) - n0;
        f.wakeups = static_cast<std::int64_t>(holder.statistics().wakeups - stats0.wakeups);
        f.handoff_ns = std::move(handoff);
        std::cout << herd_json(o, f) << std::endl;
        zkr::error_code ec;
        client.remove(path, zkr::any_version, ec);
        return 0;
    }

    // One check per lock path (distinct: each thread its own; otherwise one).
    std::vector<exclusion_check> checks(static_cast<std::size_t>(o.threads));
    std::vector<std::string> paths;
    std::function<void(int, std::mt19937_64&)> cycle;
    // Lock objects per thread (made on the thread: holds belong to threads).
    std::vector<std::unique_ptr<zkr::mutex>> mutexes(static_cast<std::size_t>(o.threads));
    std::vector<std::unique_ptr<zkr::shared_mutex>> rws(static_cast<std::size_t>(o.threads));
    std::vector<std::unique_ptr<zkr::multi_lock>> multis(static_cast<std::size_t>(o.threads));
    std::function<void(int)> prepare;
    if (o.scenario == "multi-lock") {
        // Two mutexes as one (Curator's side: InterProcessMultiLock over the same two paths).
        paths = {path + "/a", path + "/b"};
        prepare = [&](int i) { multis[static_cast<std::size_t>(i)] = std::make_unique<zkr::multi_lock>(client, paths); };
        cycle = [&](int i, std::mt19937_64&) {
            auto& m = *multis[static_cast<std::size_t>(i)];
            m.lock();
            checks[0].write_in();
            checks[0].write_out();
            m.unlock();
        };
    } else if (o.scenario == "uncontended" || o.scenario == "contended" || o.scenario == "distinct") {
        bool distinct = o.scenario == "distinct";
        for (int i = 0; i < (distinct ? o.threads : 1); ++i) paths.push_back(distinct ? path + "/t" + std::to_string(i) : path);
        prepare = [&, distinct](int i) {
            mutexes[static_cast<std::size_t>(i)] = std::make_unique<zkr::mutex>(client, paths[distinct ? static_cast<std::size_t>(i) : 0]);
        };
        cycle = [&, distinct](int i, std::mt19937_64&) {
            auto& m = *mutexes[static_cast<std::size_t>(i)];
            auto& check = checks[distinct ? static_cast<std::size_t>(i) : 0];
            m.lock();
            check.write_in();
            check.write_out();
            m.unlock();
        };
    } else if (o.scenario == "shared-reads" || o.scenario == "rw-mix") {
        paths.push_back(path);
        int writes = o.scenario == "rw-mix" ? o.write_percent : 0;
        prepare = [&](int i) { rws[static_cast<std::size_t>(i)] = std::make_unique<zkr::shared_mutex>(client, path); };
        cycle = [&, writes](int i, std::mt19937_64& rng) {
            auto& rw = *rws[static_cast<std::size_t>(i)];
            auto& check = checks[0];
            if (writes > 0 && static_cast<int>(rng() % 100) < writes) {
                rw.lock();
                check.write_in();
                check.write_out();
                rw.unlock();
            } else {
                rw.lock_shared();
                check.read_in();
                check.read_out();
                rw.unlock_shared();
            }
        };
    } else {
        usage("unknown scenario " + o.scenario);
    }
    run_result r = run_threads(o, o.threads, prepare, cycle);
    if (r.errors == 0 && !o.start_at_ms) {
        try {
            for (auto& p : paths) require_empty(client, p);
        } catch (const std::exception& e) {
            ++r.errors;
            r.first_error = e.what();
        }
    }
    std::cout << finish_timed(o, r, header(o)) << std::endl;
    if (!o.start_at_ms) {
        zkr::error_code ec;
        for (auto& p : paths) client.remove(p, zkr::any_version, ec);
        if (o.scenario == "multi-lock") client.remove(path, zkr::any_version, ec);
    }
    return r.errors ? 1 : 0;
}

// ------------------------------------------------------------------ raw C client

const char payload[] = "bench:host=localhost;pid=0000000;thread=0000000";  // about zkr's owner data size

struct raw_session {
    zhandle_t* zh = nullptr;
    std::mutex mutex;
    std::condition_variable cv;
    int state = 0;

    static void watcher(zhandle_t*, int type, int state, const char*, void* ctx) {
        if (type != ZOO_SESSION_EVENT) return;
        auto* self = static_cast<raw_session*>(ctx);
        std::lock_guard lock(self->mutex);
        self->state = state;
        self->cv.notify_all();
    }

    explicit raw_session(const std::string& connect, int resolve_delay_ms) {
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
        zh = zookeeper_init(connect.c_str(), &raw_session::watcher, 10000, nullptr, this, 0);
        if (!zh) throw std::runtime_error("zookeeper_init failed");
        // By default the C client resolves the connect string's host names again on every turn
        // of its I/O loop (a getaddrinfo, with a netlink socket, per turn); the raw drivers keep
        // that default unless told otherwise, as a naive user would.
        if (resolve_delay_ms != 0) zoo_set_servers_resolution_delay(zh, resolve_delay_ms);
        std::unique_lock lock(mutex);
        if (!cv.wait_for(lock, 15s, [&] { return state == ZOO_CONNECTED_STATE; }))
            throw std::runtime_error("raw: not connected to " + connect);
    }
    ~raw_session() {
        if (zh) zookeeper_close(zh);
    }

    void ensure_path(const std::string& path) {
        for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
            std::string prefix = slash == std::string::npos ? path : path.substr(0, slash);
            int rc = zoo_create(zh, prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
            if (rc != ZOK && rc != ZNODEEXISTS) throw std::runtime_error("raw: create " + prefix + ": " + zerror(rc));
            if (slash == std::string::npos) break;
        }
    }
    std::vector<std::string> children(const std::string& path) {
        String_vector sv{};
        int rc = zoo_get_children(zh, path.c_str(), 0, &sv);
        if (rc != ZOK) throw std::runtime_error("raw: get_children " + path + ": " + zerror(rc));
        std::vector<std::string> out(sv.data, sv.data + sv.count);
        deallocate_String_vector(&sv);
        return out;
    }
};

/// The lowest of `children` by the 10-digit sequence suffix.
std::string lowest(char** data, int count) {
    std::string best;
    for (int i = 0; i < count; ++i) {
        std::string c = data[i];
        if (best.empty() || c.substr(c.size() - 10) < best.substr(best.size() - 10)) best = c;
    }
    return best;
}

void check_lowest(const std::string& created, const std::string& parent, const std::string& low) {
    if (created.size() <= parent.size() + 1 || created.substr(parent.size() + 1) != low)
        throw std::runtime_error("raw: " + created + " is not the lowest child (" + low + "): the path is contended");
}

struct pipelined_op {
    std::mutex mutex;
    std::condition_variable cv;
    int left = 2;
    int rc_create = ZOK, rc_list = ZOK;
    std::string created, low;

    static void on_create(int rc, const char* value, const void* data) {
        auto* self = const_cast<pipelined_op*>(static_cast<const pipelined_op*>(data));
        std::lock_guard lock(self->mutex);
        self->rc_create = rc;
        if (rc == ZOK && value) self->created = value;
        if (--self->left == 0) self->cv.notify_all();
    }
    static void on_children(int rc, const String_vector* sv, const void* data) {
        auto* self = const_cast<pipelined_op*>(static_cast<const pipelined_op*>(data));
        std::lock_guard lock(self->mutex);
        self->rc_list = rc;
        if (rc == ZOK && sv) self->low = lowest(sv->data, sv->count);
        if (--self->left == 0) self->cv.notify_all();
    }
};

std::atomic<std::uint64_t> async_delete_errors{0};
void on_delete(int rc, const void*) {
    if (rc != ZOK) ++async_delete_errors;
}

// raw-async: every cycle runs in the C client's completion thread.
struct async_run;
struct async_slot {
    async_run* run = nullptr;
    std::string parent, prefix;
    int left = 0;
    int rc_create = ZOK, rc_list = ZOK;
    std::string created, low;
    clock_type::time_point start;
    std::vector<std::int64_t> lat;
};
struct async_run {
    zhandle_t* zh = nullptr;
    window w;
    std::mutex mutex;
    std::condition_variable cv;
    int running = 0;
    std::uint64_t errors = 0;
    std::string first_error;

    void fail(async_slot&, const std::string& why) {
        std::lock_guard lock(mutex);
        ++errors;
        if (first_error.empty()) first_error = why;
        if (--running == 0) cv.notify_all();
    }
    void issue(async_slot& s) {
        s.start = clock_type::now();
        s.left = 2;
        int rc = zoo_acreate(zh, s.prefix.c_str(), payload, sizeof payload - 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                             &async_run::on_create, &s);
        if (rc != ZOK) return fail(s, std::string("raw-async: acreate: ") + zerror(rc));
        rc = zoo_aget_children(zh, s.parent.c_str(), 0, &async_run::on_children, &s);
        if (rc != ZOK) return fail(s, std::string("raw-async: aget_children: ") + zerror(rc));
    }
    void joined(async_slot& s) {
        if (--s.left > 0) return;
        if (s.rc_create != ZOK) return fail(s, std::string("raw-async: create: ") + zerror(s.rc_create));
        if (s.rc_list != ZOK) return fail(s, std::string("raw-async: get_children: ") + zerror(s.rc_list));
        try {
            check_lowest(s.created, s.parent, s.low);
        } catch (const std::exception& e) {
            return fail(s, e.what());
        }
        int rc = zoo_adelete(zh, s.created.c_str(), -1, &on_delete, nullptr);
        if (rc != ZOK) return fail(s, std::string("raw-async: adelete: ") + zerror(rc));
        auto e = clock_type::now();
        if (e >= w.t0 && e <= w.t1) s.lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(e - s.start).count());
        if (e < w.t1) return issue(s);
        std::lock_guard lock(mutex);
        if (--running == 0) cv.notify_all();
    }
    static void on_create(int rc, const char* value, const void* data) {
        auto& s = *const_cast<async_slot*>(static_cast<const async_slot*>(data));
        s.rc_create = rc;
        if (rc == ZOK && value) s.created = value;
        s.run->joined(s);
    }
    static void on_children(int rc, const String_vector* sv, const void* data) {
        auto& s = *const_cast<async_slot*>(static_cast<const async_slot*>(data));
        s.rc_list = rc;
        if (rc == ZOK && sv) s.low = lowest(sv->data, sv->count);
        s.run->joined(s);
    }
};

int run_raw(const options& o) {
    if (o.scenario != "uncontended" && o.scenario != "distinct" && o.scenario != "rtt")
        usage(o.driver + " does uncontended, distinct and rtt only");
    raw_session session(o.connect, o.resolve_delay_ms);
    zhandle_t* zh = session.zh;
    if (o.scenario == "rtt") {
        if (o.threads != 1) usage("rtt runs 1 thread");
        run_result r = run_threads(o, 1, nullptr, [&](int, std::mt19937_64&) {
            Stat stat{};
            int rc = zoo_exists(zh, "/", 0, &stat);
            if (rc != ZOK) throw std::runtime_error(std::string("rtt: exists /: ") + zerror(rc));
        });
        std::cout << finish_timed(o, r, header(o)) << std::endl;
        return r.errors ? 1 : 0;
    }
    bool distinct = o.scenario == "distinct";
    std::vector<std::string> paths;
    for (int i = 0; i < (distinct ? o.threads : 1); ++i) {
        paths.push_back(distinct ? o.path + "/t" + std::to_string(i) : o.path);
        session.ensure_path(paths.back());
    }
    auto parent_of = [&](int i) -> const std::string& { return paths[distinct ? static_cast<std::size_t>(i) : 0]; };

    run_result r;
    if (o.driver == "raw-async") {
        async_run run;
        run.zh = zh;
        std::vector<async_slot> slots(static_cast<std::size_t>(o.threads));
        run.w = make_window(o);
        run.running = o.threads;
        for (int i = 0; i < o.threads; ++i) {
            auto& s = slots[static_cast<std::size_t>(i)];
            s.run = &run;
            s.parent = parent_of(i);
            s.prefix = s.parent + "/lock-";
        }
        // Once issued, a slot is touched only by its own callbacks (the C client's completion thread).
        for (auto& s : slots) run.issue(s);
        std::this_thread::sleep_until(run.w.t0);
        double cpu0 = cpu_seconds();
        std::this_thread::sleep_until(run.w.t1);
        double cpu1 = cpu_seconds();
        {
            std::unique_lock lock(run.mutex);
            if (!run.cv.wait_for(lock, 30s, [&] { return run.running == 0; })) throw std::runtime_error("raw-async: cycles did not end");
        }
        for (auto& s : slots) r.latencies_ns.insert(r.latencies_ns.end(), s.lat.begin(), s.lat.end());
        r.cpu_s = cpu1 - cpu0;
        r.errors = run.errors;
        r.first_error = run.first_error;
    } else {
        bool pipelined = o.driver == "raw-pipelined";
        auto cycle = [&](int i, std::mt19937_64&) {
            const std::string& parent = parent_of(i);
            std::string prefix = parent + "/lock-";
            if (!pipelined) {
                char created[1024];
                int rc = zoo_create(zh, prefix.c_str(), payload, sizeof payload - 1, &ZOO_OPEN_ACL_UNSAFE,
                                    ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created);
                if (rc != ZOK) throw std::runtime_error(std::string("raw-sync: create: ") + zerror(rc));
                String_vector sv{};
                rc = zoo_get_children(zh, parent.c_str(), 0, &sv);
                if (rc != ZOK) throw std::runtime_error(std::string("raw-sync: get_children: ") + zerror(rc));
                std::string low = lowest(sv.data, sv.count);
                deallocate_String_vector(&sv);
                check_lowest(created, parent, low);
                rc = zoo_delete(zh, created, -1);
                if (rc != ZOK) throw std::runtime_error(std::string("raw-sync: delete: ") + zerror(rc));
                return;
            }
            pipelined_op op;
            int rc = zoo_acreate(zh, prefix.c_str(), payload, sizeof payload - 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                                 &pipelined_op::on_create, &op);
            if (rc != ZOK) throw std::runtime_error(std::string("raw-pipelined: acreate: ") + zerror(rc));
            rc = zoo_aget_children(zh, parent.c_str(), 0, &pipelined_op::on_children, &op);
            if (rc != ZOK) {
                // The create's completion still refers to `op`: wait for it before unwinding.
                std::unique_lock lock(op.mutex);
                op.cv.wait(lock, [&] { return op.left == 1; });
                throw std::runtime_error(std::string("raw-pipelined: aget_children: ") + zerror(rc));
            }
            std::unique_lock lock(op.mutex);
            op.cv.wait(lock, [&] { return op.left == 0; });
            if (op.rc_create != ZOK) throw std::runtime_error(std::string("raw-pipelined: create: ") + zerror(op.rc_create));
            if (op.rc_list != ZOK) throw std::runtime_error(std::string("raw-pipelined: get_children: ") + zerror(op.rc_list));
            check_lowest(op.created, parent, op.low);
            rc = zoo_adelete(zh, op.created.c_str(), -1, &on_delete, nullptr);
            if (rc != ZOK) throw std::runtime_error(std::string("raw-pipelined: adelete: ") + zerror(rc));
        };
        r = run_threads(o, o.threads, nullptr, cycle);
    }
    // Every delete applied (a listing is answered after them) and none failed.
    if (r.errors == 0) {
        try {
            for (auto& p : paths) {
                auto left = session.children(p);
                if (!left.empty()) throw std::runtime_error(std::to_string(left.size()) + " node(s) left under " + p);
            }
            if (async_delete_errors) throw std::runtime_error(std::to_string(async_delete_errors.load()) + " delete(s) failed");
        } catch (const std::exception& e) {
            ++r.errors;
            r.first_error = e.what();
        }
    }
    std::cout << finish_timed(o, r, header(o)) << std::endl;
    for (auto& p : paths) zoo_delete(zh, p.c_str(), -1);
    if (distinct) zoo_delete(zh, o.path.c_str(), -1);
    return r.errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    options o = parse(argc, argv);
    try {
        if (o.driver == "zkr") return run_zkr(o);
        if (o.driver == "raw-sync" || o.driver == "raw-pipelined" || o.driver == "raw-async") return run_raw(o);
        usage("unknown driver " + o.driver);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zkr_bench: %s %s: %s\n", o.driver.c_str(), o.scenario.c_str(), e.what());
        return 1;
    }
}
