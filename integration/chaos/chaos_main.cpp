// The chaos soak: K worker processes x T threads contend on a mutex and a read/write lock on a
// 3-server ensemble while faults are injected at random (the seed is printed). Every holder writes
// to a fenced resource — the fence here — which refuses a token lower than one it has seen; each
// write says the writer's lease end (valid_until), so the fence can tell a holder that still
// believed itself the holder from a stale one.
//
// Usage: zkr_chaos [--duration S] [--workers K] [--threads T] [--session-ms MS] [--seed N]
//                  [--report FILE] [--fault-every-ms MS]
// Exit status 0 when every check holds (see the end of main), 1 otherwise, 2 for bad arguments.
// --seed N replays a run's faults: their kinds, order, durations and pauses come from N alone
// (which holder a fault hits depends on who holds at that moment, and so on timing).
#include "support/child_process.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/log.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------- the fence

struct tally {
    long faults = 0, holds = 0, writes = 0, fenced = 0, refused_while_held = 0, overlaps = 0, probes = 0;
};

class fence {
public:
    fence() {
        listener_ = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listener_, 64) != 0)
            throw std::runtime_error("fence: cannot listen");
        socklen_t len = sizeof addr;
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
        port_ = ntohs(addr.sin_port);
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    ~fence() {
        stopping_ = true;
        shutdown(listener_, SHUT_RDWR);
        close(listener_);
        acceptor_.join();
        std::lock_guard lock(mutex_);
        for (int fd : connections_) shutdown(fd, SHUT_RDWR);
        for (auto& t : readers_) t.detach();  // they end with their sockets
    }
    int port() const { return port_; }

    /// What happens from now on is counted under `label` (holds, writes, ...).
    void set_label(const std::string& label) {
        std::lock_guard lock(mutex_);
        label_ = label;
        tallies_[label];
    }
    /// One fault of `label` was injected: counted only once it really was.
    void count_fault(const std::string& label) {
        std::lock_guard lock(mutex_);
        ++tallies_[label].faults;
    }
    std::map<std::string, tally> tallies() {
        std::lock_guard lock(mutex_);
        return tallies_;
    }
    std::vector<std::string> problems() {
        std::lock_guard lock(mutex_);
        return problems_;
    }
    /// A worker that holds something now (by the fence's view), or -1.
    int some_holder(std::mt19937_64& random) {
        std::lock_guard lock(mutex_);
        std::vector<int> ids;
        long long now = now_ns();
        for (auto& [key, h] : active_) {
            if (h.valid_until > now) ids.push_back(h.worker);
        }
        if (ids.empty()) return -1;
        return ids[std::uniform_int_distribution<std::size_t>(0, ids.size() - 1)(random)];
    }

private:
    struct holder {
        std::string resource, kind;
        long long token = 0, valid_until = 0;
        int worker = 0, thread = 0;
    };

    void accept_loop() {
        while (!stopping_) {
            int fd = accept(listener_, nullptr, nullptr);
            if (fd < 0) {
                if (stopping_) return;
                continue;
            }
            std::lock_guard lock(mutex_);
            connections_.push_back(fd);
            readers_.emplace_back([this, fd] { serve(fd); });
        }
    }

    void serve(int fd) {
        std::string buffer;
        char chunk[512];
        for (;;) {
            ssize_t n = read(fd, chunk, sizeof chunk);
            if (n <= 0) break;
            buffer.append(chunk, static_cast<std::size_t>(n));
            std::size_t nl;
            while ((nl = buffer.find('\n')) != std::string::npos) {
                std::string line = buffer.substr(0, nl);
                buffer.erase(0, nl + 1);
                std::string reply = handle(line) ? "OK\n" : "NO\n";
                if (write(fd, reply.data(), reply.size()) < 0) break;
            }
        }
        close(fd);
    }

    static bool conflicts(const holder& a, const holder& b) {
        if (a.resource != b.resource) return false;
        if (a.resource == "m") return true;
        return a.kind == "w" || b.kind == "w";
    }

    // Called with a message; true: accepted.
    bool handle(const std::string& line) {
        std::istringstream in(line);
        std::string type;
        holder h;
        in >> type >> h.resource >> h.kind >> h.token >> h.valid_until >> h.worker >> h.thread;
        long long now = now_ns();
        std::lock_guard lock(mutex_);
        auto& t = tallies_[label_];
        std::string key = std::to_string(h.worker) + "/" + std::to_string(h.thread) + "/" + h.resource + "/" + h.kind;
        if (type == "X") {
            active_.erase(key);
            return true;
        }
        if (type == "E" || type == "W") {
            // Two holders that both believed, within their leases, that they held: an overlap.
            for (auto& [other_key, o] : active_) {
                if (other_key == key || !conflicts(o, h) || o.valid_until <= now) continue;
                if (o.token == h.token) continue;
                std::string pair = std::to_string(std::min(o.token, h.token)) + "/" + std::to_string(std::max(o.token, h.token));
                if (overlap_pairs_.insert(pair).second) {
                    ++t.overlaps;
                    problems_.push_back("overlap: " + key + " (token " + std::to_string(h.token) + ") and " + other_key +
                                        " (token " + std::to_string(o.token) + ")");
                }
            }
            active_[key] = h;
            if (type == "E") {
                ++t.holds;
                return true;
            }
        }
        // A write, or the probe of a holder that found its hold lost.
        bool accepted;
        auto& seen = max_seen_[h.resource];
        if (h.kind == "r") {
            accepted = h.token >= max_write_[h.resource];
        } else {
            accepted = h.token >= seen;
        }
        if (accepted) {
            seen = std::max(seen, h.token);
            if (h.kind != "r") max_write_[h.resource] = std::max(max_write_[h.resource], h.token);
        }
        if (type == "P") {
            ++t.probes;
            if (!accepted) ++t.fenced;
            return accepted;
        }
        ++t.writes;
        if (!accepted) {
            if (now <= h.valid_until) {
                ++t.refused_while_held;
                problems_.push_back("refused while held: " + key + " token " + std::to_string(h.token) + " < " +
                                    std::to_string(h.kind == "r" ? max_write_[h.resource] : seen));
            } else {
                ++t.fenced;  // it checked state() in time but its write came after its lease: fenced off
            }
        }
        return accepted;
    }

    int listener_ = -1, port_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread acceptor_;
    std::mutex mutex_;
    std::vector<int> connections_;
    std::vector<std::thread> readers_;
    std::string label_ = "no fault";
    std::map<std::string, tally> tallies_;
    std::map<std::string, holder> active_;
    std::map<std::string, long long> max_seen_, max_write_;
    std::set<std::string> overlap_pairs_;
    std::vector<std::string> problems_;
};

// ---------------------------------------------------------------- workers

struct worker {
    int id = 0;
    std::vector<std::unique_ptr<zkr::testkit::proxy>> proxies;
    std::unique_ptr<zkr::test::child_process> process;
    std::thread reader;
    std::mutex mutex;
    std::vector<std::pair<long long, long long>> frozen;  // [from, to] ns
    std::vector<std::string> overrun_lines;
    std::vector<std::pair<long long, long>> rss;  // (ns, kB)
    std::string stats;
    bool cache_checked = false;  // it said "cache ok": its tree_cache equalled the server's tree
    bool counter_checked = false;  // it said "counter ok": no increment applied twice or missing
    bool latch_checked = false;    // it said "latch ok": every round's count exact, each released
    bool metrics_checked = false;  // it said "metrics ok": its observer counted every hold, once
    // The figures of its metrics line ("expired=N server=N given_up=N ..."): each session its
    // state listener saw lost counted once as an expiry, by cause.
    std::map<std::string, long> metrics_figures;
    int expiring_faults = 0;  // faults past the session timeout it suffered (frozen, partitioned)
    std::vector<std::string> errors;  // "error ..." lines: exceptions and broken promises it saw
    // Its double-barrier lines: (kind "enter" / "in" / "out", slot) -> monotonic ns.
    std::map<std::pair<std::string, long long>, long long> barrier;
    // The reusable barrier's rounds it passed, in order: (the path's czxid, the round). Had the
    // path been reaped and made anew (a container), its rounds would start again from 0.
    std::vector<std::pair<long long, long long>> reusable_rounds;
    std::vector<long long> ids;  // every id it was handed, in order
    std::vector<long long> claimed_blocks;  // its claims of id blocks the servers acknowledged
    bool killed = false;
    std::atomic<bool> done{false};
};

const std::set<std::string> options = {"--duration", "--workers", "--threads", "--session-ms",
                                       "--fault-every-ms", "--seed", "--report"};

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (argv[i] == name) return argv[i + 1];
    }
    return fallback;
}

// Every argument is a known option with a value: a mistyped one must not run a different soak.
bool arguments_ok(int argc, char** argv) {
    if (argc % 2 != 1) return false;
    for (int i = 1; i < argc; i += 2) {
        if (!options.count(argv[i])) return false;
    }
    return true;
}

constexpr int min_duration_for_memory_s = 35;

}  // namespace

int main(int argc, char** argv) {
    if (!arguments_ok(argc, argv)) {
        std::fprintf(stderr,
                     "usage: %s [--duration S] [--workers K] [--threads T] [--session-ms MS] [--seed N] [--report FILE] "
                     "[--fault-every-ms MS]\n",
                     argv[0]);
        return 2;
    }
    int duration_s = std::stoi(arg(argc, argv, "--duration", "60"));
    int worker_count = std::stoi(arg(argc, argv, "--workers", "3"));
    int threads = std::stoi(arg(argc, argv, "--threads", "3"));
    int session_ms = std::stoi(arg(argc, argv, "--session-ms", "2000"));
    int fault_every_ms = std::stoi(arg(argc, argv, "--fault-every-ms", "4000"));
    std::uint64_t seed = std::stoull(arg(argc, argv, "--seed", std::to_string(std::random_device{}())));
    std::string report_path = arg(argc, argv, "--report", "");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    // The memory check compares the first third of a worker's samples (one each 5 s) with the
    // last and needs six: a shorter run reported "0 kB -> 0 kB (GROWING)" and failed for it.
    if (duration_s < min_duration_for_memory_s) {
        std::fprintf(stderr, "%s: --duration %d is too short: the memory check needs at least %d s (a sample each 5 s, six of them)\n",
                     argv[0], duration_s, min_duration_for_memory_s);
        return 2;
    }
#endif
    std::printf("zkr chaos soak: %d s, %d processes x %d threads, session timeout %d ms, seed %llu\n", duration_s,
                worker_count, threads, session_ms, static_cast<unsigned long long>(seed));
    std::fflush(stdout);
    // Two streams: the faults (kinds, order, durations, pauses) draw from one, which replays
    // exactly with --seed; the choice of a holder to hit, whose draws depend on timing, from the
    // other.
    std::mt19937_64 random(seed);
    std::mt19937_64 victims(seed ^ 0x9e3779b97f4a7c15ULL);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
    zkr::log::set_threshold(zkr::log::level::error);

    auto servers = zkr::test::own_servers(3);
    servers.server_config["extendedTypesEnabled"] = "true";  // the workers' TTL nodes
    zkr::testkit::ensemble cluster(servers);
    fence the_fence;
    std::vector<std::unique_ptr<worker>> workers;
    int next_id = 0;
    auto spawn = [&] {
        auto w = std::make_unique<worker>();
        w->id = next_id++;
        std::string connect;
        for (int i = 0; i < 3; ++i) {
            w->proxies.push_back(std::make_unique<zkr::testkit::proxy>(cluster.address(i)));
            connect += (i > 0 ? "," : "") + w->proxies.back()->address();
        }
        std::ostringstream command;
        command << "exec " << ZKR_CHAOS_WORKER_BIN << " " << w->id << " " << connect << " " << session_ms << " "
                << threads << " " << the_fence.port() << " " << seed + static_cast<std::uint64_t>(w->id) << " "
                << worker_count;
        w->process = std::make_unique<zkr::test::child_process>(command.str());
        auto ready = w->process->read_line(60s);
        if (!ready || *ready != "ready") throw std::runtime_error("a worker did not start");
        worker* raw = w.get();
        w->reader = std::thread([raw] {
            while (auto line = raw->process->read_line(std::chrono::hours(24))) {
                std::lock_guard lock(raw->mutex);
                if (line->rfind("call ", 0) == 0) raw->overrun_lines.push_back(*line);
                else if (line->rfind("rss ", 0) == 0) raw->rss.emplace_back(now_ns(), std::stol(line->substr(4)));
                else if (line->rfind("stats ", 0) == 0) raw->stats = *line;
                else if (line->rfind("cache ok", 0) == 0) raw->cache_checked = true;
                else if (line->rfind("ids ", 0) == 0) {
                    std::istringstream in(line->substr(4));
                    for (long long id; in >> id;) raw->ids.push_back(id);
                }
                else if (line->rfind("block ", 0) == 0) raw->claimed_blocks.push_back(std::stoll(line->substr(6)));
                else if (line->rfind("rbarrier in ", 0) == 0) {
                    std::istringstream in(line->substr(12));
                    long long incarnation = 0, round = 0;
                    if (in >> incarnation >> round) raw->reusable_rounds.emplace_back(incarnation, round);
                    else raw->errors.push_back("error a reusable barrier line the driver cannot read: " + *line);
                }
                else if (line->rfind("barrier ", 0) == 0) {
                    std::istringstream in(line->substr(8));
                    std::string kind;
                    long long slot = 0, at = 0;
                    if (in >> kind >> slot >> at) raw->barrier[{kind, slot}] = at;
                    else raw->errors.push_back("error a barrier line the driver cannot read: " + *line);
                }
                else if (line->rfind("counter ok", 0) == 0 || line->rfind("metrics ok", 0) == 0 ||
                         line->rfind("latch ok", 0) == 0) {
                    (line->rfind("counter ok", 0) == 0  ? raw->counter_checked
                     : line->rfind("latch ok", 0) == 0 ? raw->latch_checked
                                                        : raw->metrics_checked) = true;
                    if (line->rfind("metrics ok", 0) == 0) {
                        std::istringstream in(line->substr(10));
                        for (std::string field; in >> field;) {
                            auto eq = field.find('=');
                            if (eq != std::string::npos) raw->metrics_figures[field.substr(0, eq)] = std::stol(field.substr(eq + 1));
                        }
                    }
                    std::fprintf(stderr, "worker %d: %s\n", raw->id, line->c_str());
                }
                else {
                    if (line->rfind("error ", 0) == 0) raw->errors.push_back(*line);
                    std::fprintf(stderr, "worker %d: %s\n", raw->id, line->c_str());
                }
            }
            raw->done = true;
        });
        workers.push_back(std::move(w));
    };
    for (int i = 0; i < worker_count; ++i) spawn();

    // Worker 0 is never killed: it lives the whole run, so its memory tells whether the client leaks.
    auto live_worker = [&](int preferred, bool to_kill) -> worker* {
        for (auto& w : workers) {
            if (w->id == preferred && !w->killed && !(to_kill && w->id == 0)) return w.get();
        }
        std::vector<worker*> live;
        for (auto& w : workers) {
            if (!w->killed && !(to_kill && w->id == 0)) live.push_back(w.get());
        }
        return live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(victims)];
    };

    // Every kind of fault in turn, in an order shuffled by the seed.
    const std::vector<std::string> kinds = {"leader kill -9", "leader SIGSTOP", "quorum lost < T", "holder frozen > T",
                                            "holder partitioned > T", "holder killed"};
    std::vector<std::string> order;
    long injection_failures = 0;
    auto start = clock_type::now();
    auto end = start + std::chrono::seconds(duration_s);
    std::this_thread::sleep_for(3s);  // some holds with no fault first
    while (clock_type::now() + 5s < end) {
        if (order.empty()) {
            order = kinds;
            std::shuffle(order.begin(), order.end(), random);
        }
        std::string kind = order.back();
        order.pop_back();
        the_fence.set_label(kind);
        bool injected = false;
        std::printf("%6.1f s  %s\n", std::chrono::duration<double>(clock_type::now() - start).count(), kind.c_str());
        std::fflush(stdout);
        auto T = std::chrono::milliseconds(session_ms);
        try {
            if (kind == "leader kill -9") {
                int leader = cluster.wait_for_leader(20s);
                cluster.kill(leader);
                std::this_thread::sleep_for(std::chrono::milliseconds(pick(500, 2000)));
                cluster.start(leader);
            } else if (kind == "leader SIGSTOP") {
                int leader = cluster.wait_for_leader(20s);
                cluster.freeze(leader);
                std::this_thread::sleep_for(std::chrono::milliseconds(pick(session_ms / 2, session_ms * 2)));
                cluster.thaw(leader);
            } else if (kind == "quorum lost < T") {
                int a = cluster.wait_for_leader(20s), b = (a + 1) % 3;
                cluster.freeze(a);
                cluster.freeze(b);
                std::this_thread::sleep_for(T * 6 / 10);
                cluster.thaw(a);
                cluster.thaw(b);
            } else if (kind == "holder frozen > T") {
                worker* w = live_worker(the_fence.some_holder(victims), false);
                long long from = now_ns();
                if (kill(w->process->pid(), SIGSTOP) != 0) throw std::runtime_error("SIGSTOP failed");
                std::this_thread::sleep_for(T + std::chrono::milliseconds(pick(1000, 2000)));
                if (kill(w->process->pid(), SIGCONT) != 0) throw std::runtime_error("SIGCONT failed");
                std::lock_guard lock(w->mutex);
                w->frozen.emplace_back(from, now_ns());
                ++w->expiring_faults;
            } else if (kind == "holder partitioned > T") {
                worker* w = live_worker(the_fence.some_holder(victims), false);
                for (auto& p : w->proxies) p->partition(true);
                std::this_thread::sleep_for(T + std::chrono::milliseconds(pick(1000, 3000)));
                for (auto& p : w->proxies) p->partition(false);
                std::lock_guard lock(w->mutex);
                ++w->expiring_faults;
            } else if (kind == "holder killed") {
                worker* w = live_worker(the_fence.some_holder(victims), true);
                w->killed = true;
                if (kill(w->process->pid(), SIGKILL) != 0) throw std::runtime_error("SIGKILL failed");
                std::this_thread::sleep_for(1s);
                spawn();
            }
            injected = true;
        } catch (const std::exception& e) {
            // Not counted as injected: the run did not do what its report would say. It fails.
            ++injection_failures;
            std::fprintf(stderr, "fault %s could not be injected: %s\n", kind.c_str(), e.what());
            the_fence.set_label("no fault");
        }
        if (injected) the_fence.count_fault(kind);
        auto pause = std::chrono::milliseconds(pick(fault_every_ms / 2, fault_every_ms * 3 / 2));
        if (clock_type::now() + pause + 5s < end) std::this_thread::sleep_for(pause);
        else break;
    }
    the_fence.set_label("no fault");
    std::this_thread::sleep_for(3s);  // the ensemble and every worker settle

    // Everyone is told to finish, and must, with status 0 (under ASan, LeakSanitizer checks each
    // worker as it exits: a leak is a non-zero status).
    int hung = 0, failed_exits = 0;
    for (auto& w : workers) {
        if (!w->killed) w->process->close_input();
    }
    for (auto& w : workers) {
        if (w->killed) {
            w->process->wait(5s);
        } else if (int status = w->process->wait(20s); status == -1) {
            ++hung;
            std::fprintf(stderr, "worker %d did not finish when told (or was killed by a signal)\n", w->id);
        } else if (status != 0) {
            ++failed_exits;
            std::fprintf(stderr, "worker %d exited with status %d\n", w->id, status);
        }
        if (w->reader.joinable()) w->reader.join();
    }

    // Nothing left once the sessions end (killed workers' sessions expire on their own). A check
    // that cannot be made (no connection, a listing that fails) fails the run: it must not pass
    // for want of an answer.
    std::size_t nodes_left = 0;
    long check_errors = 0;
    try {
        zkr::client_options o;
        o.connect = cluster.connect_string();
        zkr::client observer(o);
        observer.wait_connected(30s);
        zkr::test::eventually(
            [&] {
                nodes_left = zkr::test::queue_length(observer, "/chaos/m") + zkr::test::queue_length(observer, "/chaos/rw") +
                             zkr::test::queue_length(observer, "/chaos-members");
                return nodes_left == 0;
            },
            std::chrono::milliseconds(3 * session_ms + 5000));
    } catch (const std::exception& e) {
        ++check_errors;
        std::fprintf(stderr, "the check for lock nodes left could not be made: %s\n", e.what());
    }
    // Every claim of an id block the servers acknowledged is still there, with its claimer: one
    // gone means the ensemble lost an acknowledged write (ids handed out twice would then be the
    // servers', not the generator's).
    long claims_checked = 0, claims_lost = 0;
    try {
        zkr::client_options o;
        o.connect = cluster.connect_string();
        zkr::client observer(o);
        observer.wait_connected(30s);
        // A write first: its reply comes once the server applied every write acknowledged before.
        observer.create("/chaos-blocks-read", "", zkr::create_mode::ephemeral);
        std::set<std::string> present;
        for (auto& child : observer.get_children("/chaos-blocks").children) present.insert(child);
        for (auto& w : workers) {
            for (long long block : w->claimed_blocks) {
                ++claims_checked;
                std::string child = std::to_string(block), holder;
                zkr::error_code ec;
                if (present.count(child)) holder = observer.get_data("/chaos-blocks/" + child, ec).data;
                if (holder != std::to_string(w->id) && ++claims_lost <= 4)
                    std::fprintf(stderr, "ids: block %lld, claimed by worker %d and acknowledged, %s\n", block, w->id,
                                 holder.empty() ? "is gone from the servers (a write the ensemble lost)"
                                                : ("holds worker " + holder + " (a write the ensemble lost)").c_str());
            }
        }
    } catch (const std::exception& e) {
        ++check_errors;
        std::fprintf(stderr, "the check of the id blocks' claims could not be made: %s\n", e.what());
    }
    long worker_errors = 0;
    for (auto& w : workers) worker_errors += static_cast<long>(w->errors.size());
    // Every worker that finished made its cache check (a failed one is an error line above).
    long caches_checked = 0;
    for (auto& w : workers) {
        if (w->killed) continue;
        if (w->cache_checked) ++caches_checked;
        else if (w->errors.empty()) {
            ++check_errors;
            std::fprintf(stderr, "worker %d made no cache check\n", w->id);
        }
        if (!w->counter_checked && w->errors.empty()) {
            ++check_errors;
            std::fprintf(stderr, "worker %d made no counter check\n", w->id);
        }
        if (!w->latch_checked && w->errors.empty()) {
            ++check_errors;
            std::fprintf(stderr, "worker %d made no latch check\n", w->id);
        }
        if (!w->metrics_checked && w->errors.empty()) {
            ++check_errors;
            std::fprintf(stderr, "worker %d made no metrics check\n", w->id);
        }
    }

    // Session expiries, as the workers' observers counted them: each worker's metrics check
    // matched them against the sessions its own state listener saw lost ("metrics ok" only then).
    // Reported beside the faults past the session timeout that hit those workers (each one
    // expires a session it finds live; other faults may expire more).
    long expiries = 0, expiries_server = 0, expiries_given_up = 0, expiring_faults = 0;
    for (auto& w : workers) {
        if (w->killed || !w->metrics_checked) continue;
        expiries += w->metrics_figures["expired"];
        expiries_server += w->metrics_figures["server"];
        expiries_given_up += w->metrics_figures["given_up"];
        expiring_faults += w->expiring_faults;
    }

    // The double barrier: nobody in before every member had entered. A round some worker passed
    // at T needs `worker_count` workers that said "enter" for its slot before T (the killed ones'
    // lines count: their nodes stood until their sessions ended).
    long barrier_rounds_passed = 0, barrier_early = 0;
    {
        std::map<long long, long long> first_in;               // slot -> earliest "in"
        std::map<long long, std::vector<long long>> entries;   // slot -> every "enter"
        for (auto& w : workers) {
            for (auto& [key, at] : w->barrier) {
                if (key.first == "enter") entries[key.second].push_back(at);
                if (key.first == "in" && (!first_in.count(key.second) || at < first_in[key.second])) first_in[key.second] = at;
            }
        }
        for (auto& [slot, at] : first_in) {
            ++barrier_rounds_passed;
            long before = std::count_if(entries[slot].begin(), entries[slot].end(), [&](long long e) { return e <= at; });
            if (before < worker_count) {
                ++barrier_early;
                std::fprintf(stderr, "double barrier round %lld: a worker was in with %ld of %d entered\n", slot, before, worker_count);
            }
        }
    }

    // The barrier: nobody through a slot's gate before its first opening (the opener says so
    // before it removes the gate; with no opening, nobody passes).
    long gates_passed = 0, gates_early = 0;
    {
        std::map<long long, long long> first_open;                // slot -> earliest "gate-open"
        std::map<long long, std::vector<long long>> passes;       // slot -> every "gate-passed"
        for (auto& w : workers) {
            for (auto& [key, at] : w->barrier) {
                if (key.first == "gate-open" && (!first_open.count(key.second) || at < first_open[key.second])) first_open[key.second] = at;
                if (key.first == "gate-passed") passes[key.second].push_back(at);
            }
        }
        for (auto& [slot, ats] : passes) {
            ++gates_passed;
            auto open = first_open.find(slot);
            for (long long at : ats) {
                if (open == first_open.end() || at < open->second) {
                    ++gates_early;
                    std::fprintf(stderr, "barrier gate %lld: a worker passed before it was opened\n", slot);
                }
            }
        }
    }

    // The reusable barrier: each worker's rounds, ordered by the path's incarnation and then the
    // round, strictly increase (none passed twice, none older after a newer), and no round is
    // passed by more workers than its members (each pass is a node of the round's group, and at
    // most as many members live at once). A worker that joins after a kill has a record of its own.
    long reusable_passes = 0, reusable_repeated = 0, reusable_crowded = 0;
    std::size_t reusable_rounds_passed = 0, reusable_incarnations = 0;
    {
        std::map<std::pair<long long, long long>, int> passed_by;  // round -> workers through it
        for (auto& w : workers) {
            for (std::size_t i = 0; i < w->reusable_rounds.size(); ++i) {
                ++reusable_passes;
                ++passed_by[w->reusable_rounds[i]];
                if (i > 0 && w->reusable_rounds[i] <= w->reusable_rounds[i - 1]) {
                    ++reusable_repeated;
                    std::fprintf(stderr, "reusable barrier: worker %d passed round %lld (path czxid %lld) after round %lld (path czxid %lld)\n",
                                 w->id, w->reusable_rounds[i].second, w->reusable_rounds[i].first,
                                 w->reusable_rounds[i - 1].second, w->reusable_rounds[i - 1].first);
                }
            }
        }
        reusable_rounds_passed = passed_by.size();
        std::set<long long> incarnations;
        for (auto& [round, n] : passed_by) {
            incarnations.insert(round.first);
            if (n > worker_count) {
                ++reusable_crowded;
                std::fprintf(stderr, "reusable barrier: round %lld (path czxid %lld) passed by %d workers, for %d members\n",
                             round.second, round.first, n, worker_count);
            }
        }
        reusable_incarnations = incarnations.size();
    }

    // Ids: unique across every worker (the killed ones too), and increasing in each.
    std::size_t ids_drawn = 0;
    long ids_reused = 0, ids_out_of_order = 0;
    {
        // Each id's first holder (worker, index), to name both holders of one handed out twice.
        std::map<long long, std::pair<int, std::size_t>> seen;
        std::vector<std::string> examples;
        for (auto& w : workers) {
            for (std::size_t i = 0; i < w->ids.size(); ++i) {
                auto [it, fresh] = seen.emplace(w->ids[i], std::pair{w->id, i});
                if (!fresh) {
                    ++ids_reused;
                    if (examples.size() < 4)
                        examples.push_back("id " + std::to_string(w->ids[i]) + ": worker " + std::to_string(it->second.first) +
                                           " (its id #" + std::to_string(it->second.second) + ") and worker " +
                                           std::to_string(w->id) + " (its id #" + std::to_string(i) + " of " +
                                           std::to_string(w->ids.size()) + ")");
                }
                if (i > 0 && w->ids[i] <= w->ids[i - 1]) {
                    ++ids_out_of_order;
                    if (examples.size() < 8)
                        examples.push_back("worker " + std::to_string(w->id) + ": id #" + std::to_string(i) + " = " +
                                           std::to_string(w->ids[i]) + " after " + std::to_string(w->ids[i - 1]));
                }
            }
            ids_drawn += w->ids.size();
        }
        if (ids_reused || ids_out_of_order) {
            std::fprintf(stderr, "ids: %ld handed out twice, %ld not above the one before\n", ids_reused, ids_out_of_order);
            for (auto& e : examples) std::fprintf(stderr, "ids:   %s\n", e.c_str());
            // Whether the servers disagreed about their data (ZooKeeper's digest check).
            for (int i = 0; i < cluster.size(); ++i) {
                try {
                    auto m = cluster.monitor(i);
                    std::fprintf(stderr, "ids:   server %d: zk_digest_mismatches_count %s, log %s\n", i,
                                 m.count("zk_digest_mismatches_count") ? m["zk_digest_mismatches_count"].c_str() : "(not reported)",
                                 cluster.server_log(i).c_str());
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "ids:   server %d: mntr failed: %s\n", i, e.what());
                }
            }
        }
    }

    // Timed calls past their deadline + 1 s, not counting time their process was frozen.
    long overruns = 0;
    for (auto& w : workers) {
        for (auto& line : w->overrun_lines) {
            std::istringstream in(line);
            std::string word;
            long long from = 0, to = 0, deadline_ms = 0;
            in >> word >> from >> to >> deadline_ms;
            long long frozen = 0;
            for (auto [a, b] : w->frozen) frozen += std::max(0LL, std::min(to, b) - std::max(from, a));
            long long took_ms = (to - from - frozen) / 1'000'000;
            if (took_ms > deadline_ms + 1000) {
                ++overruns;
                std::fprintf(stderr, "worker %d: a try_lock_for(%lld ms) took %lld ms\n", w->id, deadline_ms, took_ms);
            }
        }
    }

    // Memory: the workers that lived the whole run (worker 0 at least), first third against last.
    long rss_first = 0, rss_last = 0;
    for (auto& w : workers) {
        if (w->killed || w->id >= worker_count || w->rss.size() < 6) continue;
        std::size_t third = w->rss.size() / 3;
        long first = 0, last = 0;
        for (std::size_t i = 1; i <= third; ++i) first = std::max(first, w->rss[i].second);  // skip start-up
        for (std::size_t i = w->rss.size() - third; i < w->rss.size(); ++i) last = std::max(last, w->rss[i].second);
        rss_first = std::max(rss_first, first);
        rss_last = std::max(rss_last, last);
    }
    bool memory_flat = rss_first > 0 && rss_last <= rss_first + std::max(rss_first / 10, 2048L);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // RSS measures the sanitizer too: ASan's quarantine keeps freed memory (up to 256 MB) so that
    // a use after free is caught, TSan's shadow and history grow with the memory touched. Judged
    // in the normal build; under ASan, LeakSanitizer checks every worker as it exits (above).
    const bool memory_judged = false;
#else
    const bool memory_judged = true;
#endif

    // The report.
    auto tallies = the_fence.tallies();
    tally total;
    std::ostringstream report;
    report << "Seed " << seed << "; " << duration_s << " s; " << worker_count << " processes x " << threads
           << " threads; session timeout " << session_ms << " ms; 3-server ensemble.\n\n";
    report << "| fault | injected | holds | writes | fenced off | refused while held | overlaps |\n";
    report << "|---|--:|--:|--:|--:|--:|--:|\n";
    for (auto& [label, t] : tallies) {
        report << "| " << label << " | " << (label == "no fault" ? 0 : t.faults) << " | " << t.holds << " | " << t.writes
               << " | " << t.fenced << " | " << t.refused_while_held << " | " << t.overlaps << " |\n";
        total.holds += t.holds;
        total.writes += t.writes;
        total.fenced += t.fenced;
        total.refused_while_held += t.refused_while_held;
        total.overlaps += t.overlaps;
        total.probes += t.probes;
        if (label != "no fault") total.faults += t.faults;
    }
    report << "| **all** | " << total.faults << " | " << total.holds << " | " << total.writes << " | " << total.fenced
           << " | " << total.refused_while_held << " | " << total.overlaps << " |\n\n";
    report << "- writes refused while the writer's state() said held (within its lease): " << total.refused_while_held << "\n";
    report << "- overlapping holds among holders whose state() said held: " << total.overlaps << "\n";
    report << "- stale writes fenced off (probes after a loss, writes past the lease): " << total.fenced << " (of "
           << total.probes << " probes)\n";
    report << "- timed calls past their deadline + 1 s: " << overruns << "\n";
    report << "- processes that did not finish when told: " << hung << "\n";
    report << "- processes that finished with a non-zero status: " << failed_exits << "\n";
    report << "- lock nodes and registrations left once sessions ended: " << nodes_left << "\n";
    report << "- tree caches equal to the server's tree at the end (with the worker's registration on its session and its TTL node renewed): "
           << caches_checked << "\n";
    report << "- ids drawn: " << ids_drawn << "; handed out twice: " << ids_reused << "; not above the worker's one before: "
           << ids_out_of_order << "\n";
    report << "- id blocks claimed on the servers (acknowledged): " << claims_checked << "; gone or another's at the end: " << claims_lost
           << "\n";
    report << "- double-barrier rounds some worker passed: " << barrier_rounds_passed
           << "; of them, passed before every member had entered: " << barrier_early << "\n";
    report << "- reusable double-barrier rounds passed: " << reusable_rounds_passed << " (" << reusable_passes
           << " passes, on " << reusable_incarnations
           << " incarnation(s) of its path); a round passed twice by a worker, or after a newer one: " << reusable_repeated
           << "; rounds passed by more workers than members: " << reusable_crowded << "\n";
    report << "- barrier gates some worker passed: " << gates_passed << "; passes before the gate was opened: " << gates_early << "\n";
    report << "- session expiries the finishing workers' observers counted, each a session their state listeners saw lost: "
           << expiries << " (the server said so first: " << expiries_server << "; given up first: " << expiries_given_up
           << "), for " << expiring_faults << " faults past the session timeout that hit them\n";
    report << "- errors the workers saw (exceptions from zkr, state() held past valid_until()): " << worker_errors << "\n";
    report << "- faults that could not be injected: " << injection_failures << "\n";
    report << "- checks that could not be made: " << check_errors << "\n";
    report << "- client memory (VmRSS, max of the first and the last third of the run): " << rss_first << " kB -> "
           << rss_last << " kB ("
           << (!memory_judged ? "not judged under a sanitizer, whose own memory it includes" : memory_flat ? "flat" : "GROWING")
           << ")\n";
    for (auto& p : the_fence.problems()) report << "- problem: " << p << "\n";
    std::cout << "\n" << report.str() << std::flush;
    if (!report_path.empty()) std::ofstream(report_path) << report.str();

    bool ok = total.refused_while_held == 0 && total.overlaps == 0 && overruns == 0 && hung == 0 && failed_exits == 0 &&
              nodes_left == 0 && (memory_flat || !memory_judged) && worker_errors == 0 && injection_failures == 0 && check_errors == 0 && total.holds > 0 &&
              barrier_early == 0 && gates_early == 0 && reusable_repeated == 0 && reusable_crowded == 0 && ids_reused == 0 && ids_out_of_order == 0 && ids_drawn > 0 &&
              claims_lost == 0 && claims_checked > 0 &&
              total.faults > 0;
    std::cout << (ok ? "PASS" : "FAIL") << " (seed " << seed << "; replay: zkr_chaos --seed " << seed << " --duration "
              << duration_s << " --workers " << worker_count << " --threads " << threads << " --session-ms " << session_ms
              << " --fault-every-ms " << fault_every_ms << ")" << std::endl;
    return ok ? 0 : 1;
}
