// One process of the chaos soak: one zkr::client, several threads contending on a mutex and on a
// read/write lock, writing to the fenced resource (the soak driver's fence) while state() says
// held; beside them, a thread changing /chaos-config, a tree_cache of it and a persistent_node
// registering the worker (/chaos-members/w<ID>), and two threads incrementing the worker's counter
// (/chaos-counters/w<ID>, a zkr::atomic_long each), and one counting down latches of its own
// round after round (/chaos-latches/w<ID>-<ROUND>, a zkr::count_down_latch each: a round where
// every call answered reads 1 after three of four count-downs, and is released after the fourth,
// else "error latch ..."; "latch ok" at the end). It runs until its stdin closes, then checks its
// cache against the server and its registration ("cache ok", or an error line), and its counter
// against the increments it was told were applied ("counter ok", or an error line: one applied
// twice, or one reported applied and missing), and its zkr::metrics (the client's observer)
// against the holds it made ("metrics ok": every hold counted once as acquired and once as
// ended, nothing left held or waiting, no event dropped) and the sessions its state listener saw
// lost (each counted once as an expiry, "expired=N server=N given_up=N"). And one thread meets the other workers at
// a double barrier every 5 s (barrier_rounds: "barrier enter/in/out" lines the driver checks), a
// reusable one on one path every 5 s (reusable_rounds: "rbarrier in CZXID ROUND" lines), a
// barrier every 5 s (gate_rounds: "barrier gate-open/gate-passed" lines), and
// one draws ids from a shared id_generator path ("ids ..." lines: the driver checks them unique).
//
// Usage: zkr_chaos_worker ID CONNECT SESSION_MS THREADS FENCE_PORT SEED MEMBERS
//
// To the fence, one line per message, answered "OK" or "NO":
//   E|W|P|X RESOURCE KIND TOKEN VALID_UNTIL_NS WORKER THREAD
//   E: entered (holds), W: a write while state() says held, P: one probe write at the end of a
//   hold that state() no longer says held (the fence should refuse it if a newer holder wrote),
//   X: leaving.
//   RESOURCE: m (the mutex) or rw; KIND: x (exclusive), r (read), w (write).
// To stdout (the driver reads it):
//   "call START_NS END_NS DEADLINE_MS" for a timed call that took more than its deadline + 1 s
//   "error WHAT" for an exception from zkr, or a state() that said held at or past its own
//   valid_until() (the lease broken); the driver fails the run on any
//   "rss KB" every 5 s; "stats holds=N writes=N refused=N probes=N errors=N" when it ends.
// Whether it holds is zkr's state(), as read: the worker keeps no clock of its own on it.
#include "zkr/atomic.hpp"
#include "zkr/barrier.hpp"
#include "zkr/client.hpp"
#include "zkr/count_down_latch.hpp"
#include "zkr/double_barrier.hpp"
#include "zkr/id_generator.hpp"
#include "zkr/log.hpp"
#include "zkr/metrics.hpp"
#include "zkr/mutex.hpp"
#include "zkr/persistent_node.hpp"
#include "zkr/shared_mutex.hpp"
#include "zkr/tree_cache.hpp"
#include "zkr/ttl_node.hpp"

#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

long long ns(clock_type::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::mutex stdout_mutex;
void say(const std::string& line) {
    std::lock_guard lock(stdout_mutex);
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
}

// A blocking line connection to the fence.
class fence_connection {
public:
    explicit fence_connection(int port) {
        fd_ = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<std::uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            std::perror("zkr_chaos_worker: connect to the fence");
            std::exit(3);
        }
    }
    ~fence_connection() { close(fd_); }
    bool send(const std::string& line) {
        std::string out = line + "\n";
        if (write(fd_, out.data(), out.size()) != static_cast<ssize_t>(out.size())) return false;
        std::string reply;
        char c;
        while (read(fd_, &c, 1) == 1 && c != '\n') reply += c;
        return reply == "OK";
    }

private:
    int fd_ = -1;
};

long rss_kb() {
    std::ifstream status("/proc/self/status");
    std::string key;
    long value = 0;
    while (status >> key) {
        if (key == "VmRSS:") {
            status >> value;
            return value;
        }
        std::getline(status, key);
    }
    return 0;
}

struct totals {
    std::atomic<long> holds{0}, writes{0}, refused{0}, probes{0}, errors{0};
};

void contend(int id, int thread, zkr::mutex& m, zkr::shared_mutex& rw, int fence_port, std::uint64_t seed,
             std::atomic<bool>& stop, totals& t) {
    fence_connection fence(fence_port);
    std::mt19937_64 random(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
    auto error = [&](const std::string& what) {
        ++t.errors;
        say("error thread " + std::to_string(thread) + ": " + what);
    };
    while (!stop) {
      try {
        int what = pick(0, 99);
        zkr::lock_view& view = what < 50 ? static_cast<zkr::lock_view&>(m) : what < 85 ? rw.read_lock() : rw.write_lock();
        std::string resource = what < 50 ? "m" : "rw";
        std::string kind = what < 50 ? "x" : what < 85 ? "r" : "w";
        auto deadline = std::chrono::milliseconds(pick(200, 2000));
        auto start = clock_type::now();
        zkr::error_code ec;
        bool got = false;
        try {
            // Connection trouble is "not acquired"; what throws is an error (and counted).
            got = view.try_lock_for(deadline, ec);
        } catch (const std::exception& e) {
            error(std::string("try_lock_for threw: ") + e.what());
        }
        auto end = clock_type::now();
        if (end - start > deadline + 1s)
            say("call " + std::to_string(ns(start)) + " " + std::to_string(ns(end)) + " " + std::to_string(deadline.count()));
        if (!got) {
            std::this_thread::sleep_for(std::chrono::milliseconds(pick(0, 20)));
            continue;
        }
        ++t.holds;
        std::int64_t token = view.fencing_token();
        auto message = [&](const char* type, clock_type::time_point valid_until) {
            return std::string(type) + " " + resource + " " + kind + " " + std::to_string(token) + " " +
                   std::to_string(ns(valid_until)) + " " + std::to_string(id) + " " + std::to_string(thread);
        };
        // Most holds are short; some are long enough to see a fault through.
        auto hold_for = pick(0, 9) < 8 ? std::chrono::milliseconds(pick(20, 150)) : std::chrono::milliseconds(pick(1000, 3000));
        auto until = clock_type::now() + hold_for;
        bool entered = false;
        while (!stop && clock_type::now() < until) {
            auto asked = clock_type::now();
            auto state = view.state();
            // The lease's end, read after state(): an answer since can only have extended it; the
            // epoch if the hold stopped being held in between.
            auto valid = view.valid_until();
            if (state != zkr::lock_state::held || valid == clock_type::time_point{}) break;
            // zkr's promise: held only before the lease's end. Told, and written all the same,
            // so the fence sees what a holder trusting state() would do.
            if (asked >= valid) error("state() said held " + std::to_string(ns(asked) - ns(valid)) + " ns past valid_until()");
            if (!entered) {
                fence.send(message("E", valid));
                entered = true;
            }
            ++t.writes;
            if (!fence.send(message("W", valid))) ++t.refused;
            std::this_thread::sleep_for(20ms);
        }
        if (entered && view.state() != zkr::lock_state::held) {
            // The hold ended under us (the process was frozen or cut off): one more write, what a
            // holder that did not check would do. The fence must turn it away if a newer holder
            // has written since.
            ++t.probes;
            fence.send(message("P", view.valid_until()));
        }
        if (entered) fence.send(message("X", clock_type::time_point{}));
        view.unlock();
      } catch (const std::exception& e) {
        error(std::string("threw: ") + e.what());
      }
    }
}

// The watch recipes under the same faults: every worker changes the nodes under /chaos-config
// (each request given at most 2 s: one lost to a fault is not waited for) while its tree_cache
// follows them.
void mutate_config(zkr::client& c, std::uint64_t seed, std::atomic<bool>& stop) {
    std::mt19937_64 random(seed);
    while (!stop) {
        std::string node = "/chaos-config/n" + std::to_string(random() % 20);
        std::string data = std::to_string(random() % 1000000);
        try {
            switch (random() % 3) {
                case 0: c.async_create(node, data, zkr::create_mode::persistent, boost::asio::use_future).wait_for(2s); break;
                case 1: c.async_set_data(node, data, zkr::any_version, boost::asio::use_future).wait_for(2s); break;
                default: c.async_remove(node, zkr::any_version, boost::asio::use_future).wait_for(2s); break;
            }
        } catch (const std::exception&) {
            // A failure to start (the client closing): the loop ends with stop.
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50 + random() % 150));
    }
}

// Once the faults are over: the cache must come to equal a fresh read of the subtree (names,
// data, mzxid), the worker's registration must stand on its current session, and its TTL node
// must stand with its child, renewed since the faults ended. Says "cache ok" or an error line.
void check_watch_recipes(zkr::client& c, zkr::tree_cache& cache, const std::string& registration, zkr::ttl_node& alive) {
    const auto touches = alive.touches();
    const auto deadline = clock_type::now() + 12s;
    std::string why = "not checked";
    while (clock_type::now() < deadline) {
        std::this_thread::sleep_for(50ms);
        if (!c.is_connected()) {
            why = "the client is not connected";
            continue;
        }
        if (!cache.initialized()) {
            why = "the cache is not initialized";
            continue;
        }
        zkr::error_code ec;
        auto kids = c.get_children("/chaos-config", ec);
        if (ec) {
            why = "listing /chaos-config: " + ec.message();
            continue;
        }
        std::map<std::string, std::int64_t> server;
        bool read_all = true;
        for (auto& k : kids.children) {
            auto d = c.get_data("/chaos-config/" + k, ec);
            if (ec) {
                read_all = false;  // deleted meanwhile: read again
                break;
            }
            server[k] = d.stat.mzxid;
        }
        if (!read_all) continue;
        std::map<std::string, std::int64_t> cached;
        for (auto& k : cache.children("/chaos-config")) {
            if (auto n = cache.get("/chaos-config/" + k)) cached[k] = n->stat.mzxid;
        }
        if (cached != server) {
            why = "the cache holds " + std::to_string(cached.size()) + " nodes, the server " + std::to_string(server.size()) +
                  " (or their mzxids differ)";
            continue;
        }
        auto r = c.exists(registration, ec);
        if (ec || !r.exists || r.stat.ephemeral_owner != c.session_id()) {
            why = "the registration " + registration + " is not on the current session";
            continue;
        }
        if (!c.exists(alive.path(), ec).exists || ec || !c.exists(alive.path() + "/touch", ec).exists || ec ||
            alive.touches() <= touches) {
            why = "the TTL node " + alive.path() + " does not stand with its child, renewed since";
            continue;
        }
        say("cache ok nodes=" + std::to_string(server.size()));
        return;
    }
    say("error watch recipes after 12 s: " + why);
}

// The counter under the same faults: each increment is told applied (counted), or in doubt
// (outcome_unknown, or an error after which it may have been applied): counted apart.
struct counter_tally {
    std::atomic<long> applied{0}, in_doubt{0}, lost_races{0};
};

void increment_counter(zkr::client& c, const std::string& path, std::atomic<bool>& stop, counter_tally& t) {
    zkr::atomic_long counter(c, path);
    while (!stop) {
        try {
            auto r = counter.increment();
            if (r.succeeded) ++t.applied;
            else ++t.lost_races;
        } catch (const zkr::system_error& e) {
            if (e.code() == zkr::errc::client_closed) return;
            ++t.in_doubt;  // outcome_unknown, or the retry policy gave up: it may have been applied
            std::this_thread::sleep_for(100ms);
        }
    }
}

// Once the faults are over: applied <= the counter <= applied + in doubt. More is a change applied
// twice; less, one reported applied that is not there.
void check_counter(zkr::client& c, const std::string& path, const counter_tally& t) {
    const auto deadline = clock_type::now() + 12s;
    std::string why = "not checked";
    while (clock_type::now() < deadline) {
        try {
            auto value = zkr::atomic_long(c, path).get().post;
            long low = t.applied, high = t.applied + t.in_doubt;
            if (value < low || value > high) {
                say("error counter " + path + " holds " + std::to_string(value) + ", increments applied " + std::to_string(low) +
                    ", in doubt " + std::to_string(t.in_doubt.load()));
                return;
            }
            say("counter ok value=" + std::to_string(value) + " applied=" + std::to_string(low) +
                " in_doubt=" + std::to_string(t.in_doubt.load()) + " lost_races=" + std::to_string(t.lost_races.load()));
            return;
        } catch (const std::exception& e) {
            why = e.what();
            std::this_thread::sleep_for(100ms);
        }
    }
    say("error counter after 12 s: " + why);
}

// The count-down latch under the same faults. A round: a latch of the worker's own is given a
// count of 4 and counted down 4 times. Where every call answered, its count reads 1 after three
// (0 would be a count-down applied twice, 2 one reported and not applied) and it is released
// after the fourth. A call that threw (outcome_unknown, or the retry policy gave up) leaves the
// round in doubt: it is only cleaned up. Reads are retried for up to 15 s (a fault may cut them).
struct latch_tally {
    std::atomic<long> rounds{0}, in_doubt{0}, wrong{0};
};

void count_down_rounds(zkr::client& c, int id, std::atomic<bool>& stop, latch_tally& t) {
    constexpr std::int64_t count = 4;
    for (long round = 0; !stop; ++round) {
        zkr::count_down_latch latch(c, "/chaos-latches/w" + std::to_string(id) + "-" + std::to_string(round));
        // Retries `read` until it answers, the worker is told to stop, or 15 s passed: nullopt then.
        auto settled = [&](auto read) -> std::optional<decltype(read())> {
            auto deadline = clock_type::now() + 15s;
            while (!stop && clock_type::now() < deadline) {
                try {
                    return read();
                } catch (const zkr::system_error& e) {
                    if (e.code() == zkr::errc::client_closed) return std::nullopt;
                    std::this_thread::sleep_for(100ms);
                }
            }
            return std::nullopt;
        };
        bool doubt = false;
        try {
            if (!latch.try_set_count(count)) doubt = true;  // a latch left by an earlier worker of this id
            for (std::int64_t i = 0; i < count - 1 && !doubt; ++i) latch.count_down();
        } catch (const zkr::system_error& e) {
            if (e.code() == zkr::errc::client_closed) return;
            doubt = true;
        }
        if (!doubt) {
            auto left = settled([&] { return latch.count(); });
            if (!left) break;  // told to stop: the round is not counted
            if (*left != 1) {
                ++t.wrong;
                say("error latch " + latch.path() + " reads " + std::to_string(*left) + " after " + std::to_string(count - 1) +
                    " of " + std::to_string(count) + " count-downs that answered");
            }
            try {
                latch.count_down();
            } catch (const zkr::system_error& e) {
                if (e.code() == zkr::errc::client_closed) return;
                doubt = true;
            }
            if (!doubt) {
                // Released by the transaction that answered: the wait must end true once the
                // server can be read. A one-second wait may end false while the ensemble is away
                // (a timed call returns by its deadline: a quorum loss made it so once), so it is
                // asked again for up to 15 s.
                std::optional<bool> released;
                for (auto until = clock_type::now() + 15s; !stop && clock_type::now() < until;) {
                    released = settled([&] { return latch.wait(1s); });
                    if (!released || *released) break;
                }
                if (!released || stop) break;  // told to stop: the round is not counted
                auto after = settled([&] { return latch.count(); });
                if (!after) break;
                if (!*released || *after != 0) {
                    ++t.wrong;
                    say("error latch " + latch.path() + (*released ? "" : " not released") + " reads " + std::to_string(*after) +
                        " after its last count-down answered");
                }
                ++t.rounds;
            }
        }
        if (doubt) ++t.in_doubt;
        settled([&] { latch.remove(); return true; });
    }
}

// The double barrier across the workers: one round per 5 s slot of the wall clock (which every
// worker shares, the ones that join after a kill too), at /chaos-barriers/s<SLOT> for as many
// members as the soak has workers. At its slot's start each worker says "barrier enter SLOT NS"
// and enters for up to 3 s; "barrier in SLOT NS" once it passed, then it leaves for up to 1.5 s
// ("barrier out SLOT NS" once everyone had left). NS is the monotonic clock, which the driver
// shares: it checks that no worker was in before every member had said "enter" (nobody through
// early: CURATOR-318, GH-1290). A fault makes a round time out or fail; that is no error.
void barrier_rounds(zkr::client& c, int members, std::atomic<bool>& stop, std::atomic<long>& passed) {
    constexpr long long slot_ms = 5000;
    while (!stop) {
        auto wall_ms = [] {
            return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        };
        const long long slot = wall_ms() / slot_ms + 1;
        while (!stop && wall_ms() < slot * slot_ms) std::this_thread::sleep_for(20ms);  // the slot's start
        if (stop) return;
        const std::string name = std::to_string(slot);
        try {
            zkr::double_barrier round(c, "/chaos-barriers/s" + name, members);
            say("barrier enter " + name + " " + std::to_string(ns(clock_type::now())));
            if (!round.enter_for(3s)) continue;
            say("barrier in " + name + " " + std::to_string(ns(clock_type::now())));
            ++passed;
            if (round.leave_for(1500ms)) say("barrier out " + name + " " + std::to_string(ns(clock_type::now())));
        } catch (const zkr::system_error& e) {
            if (e.code() == zkr::errc::client_closed) return;
        }
    }
}

// The reusable double barrier: one member object per worker on one path,
// /chaos-barriers/reusable (zkr's reusable layout), entered for up to 3 s 2.5 s into every 5 s
// slot and left for up to 1.5 s. Once through, a worker says "rbarrier in CZXID V" with the round
// V it passed (from its node's path) and the path's czxid (its incarnation). The driver checks
// that no worker passes a round twice or an older round after a newer one, and that no round is
// passed by more workers than its members: a closed round is joined by nobody, so a member back
// from leaving round V waits in a later one. A fault makes a round time out or fail (no error):
// the object is made anew after a failure.
void reusable_rounds(zkr::client& c, int members, std::atomic<bool>& stop) {
    constexpr long long slot_ms = 5000;
    auto wall_ms = [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
    auto make = [&] {
        return std::make_unique<zkr::double_barrier>(c, "/chaos-barriers/reusable", members, zkr::double_barrier_options{.reusable = true});
    };
    auto round = make();
    bool path_made = false;
    while (!stop) {
        // The next mid-slot mark still ahead. (Counted from the slot's start, it skipped one
        // after an enter that timed out past the slot's end: members back from a timeout then
        // entered a slot apart from those who had passed, and met no more.)
        const long long at = ((wall_ms() - slot_ms / 2) / slot_ms + 1) * slot_ms + slot_ms / 2;
        while (!stop && wall_ms() < at) std::this_thread::sleep_for(20ms);
        if (stop) return;
        try {
            // Persistent, so that its rounds run on from one incarnation (a container would be
            // reaped whenever a round has emptied): tried until it succeeds once. Meanwhile the
            // barrier makes it a container, which this then finds there.
            if (!path_made) {
                zkr::error_code ec;
                c.create_parents("/chaos-barriers/reusable", zkr::create_mode::persistent, ec);
                path_made = !ec;
            }
            if (!round->enter_for(3s)) continue;
            const std::string& node = round->node_path();  // "<path>/round-<V>/<uuid>"
            auto from = node.find("/round-"), to = node.rfind('/');
            if (from == std::string::npos || to <= from + 7) {
                say("error a reusable barrier member passed with node path \"" + node + "\"");
                return;
            }
            // Were the path a container, reaped once a round has emptied, it would be made anew
            // with its version (the round) from 0 again. Its czxid, stable while our node is
            // under it, tells its incarnations apart.
            // (Gone, it can be only if our session ended since, with our node: then the pass
            // cannot be placed, and is not said.)
            auto path = c.exists("/chaos-barriers/reusable");
            if (path.exists) say("rbarrier in " + std::to_string(path.stat.czxid) + " " + node.substr(from + 7, to - from - 7));
            round->leave_for(1500ms);
        } catch (const zkr::system_error& e) {
            if (e.code() == zkr::errc::client_closed) return;
            round = make();  // whatever state the failure left it in: a new member
        }
    }
}

// A zkr::barrier every 5 s (the same wall-clock slots): every worker sets the slot's gate
// /chaos-gates/s<SLOT> and waits for it up to 3 s, but the slot's opener (the worker whose id is
// the slot modulo the members), which says "barrier gate-open SLOT NS" 1.5 s in and then removes
// it. Those who pass say "barrier gate-passed SLOT NS": the driver checks nobody passed a gate
// before its first opening (a gate nobody opened, a killed opener's, is passed by nobody).
void gate_rounds(zkr::client& c, int id, int members, std::atomic<bool>& stop) {
    constexpr long long slot_ms = 5000;
    auto wall_ms = [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
    while (!stop) {
        const long long slot = wall_ms() / slot_ms + 1;
        while (!stop && wall_ms() < slot * slot_ms) std::this_thread::sleep_for(20ms);  // the slot's start
        if (stop) return;
        const std::string name = std::to_string(slot);
        try {
            zkr::barrier gate(c, "/chaos-gates/s" + name);
            gate.set();
            if (id % members == slot % members) {
                while (!stop && wall_ms() < slot * slot_ms + 1500) std::this_thread::sleep_for(20ms);
                say("barrier gate-open " + name + " " + std::to_string(ns(clock_type::now())));
                gate.remove();
            } else if (gate.wait(3s)) {
                say("barrier gate-passed " + name + " " + std::to_string(ns(clock_type::now())));
            }
        } catch (const zkr::system_error& e) {
            if (e.code() == zkr::errc::client_closed) return;
        }
    }
}

// Ids drawn from /chaos-ids by every worker, in blocks of 20 (a reservation every 100 ms or so,
// under the faults): each id it was handed goes to the driver ("ids ID ID ..." lines of up to 40),
// which checks them unique across every worker, the killed ones too, and increasing in each. A
// call that threw leaves the generator and takes a new one (an unused block is skipped for good).
//
// Each block it is handed is also claimed on the servers, independently of the generator: a
// persistent /chaos-blocks/K (K = (first id - 1) / 20: every write of /chaos-ids adds 20 from 0,
// so blocks are aligned) holding this worker's id. A claim that finds another worker's id is a
// block handed out twice, seen where it happened ("error block ..."); "block K" lines tell the
// driver which claims the servers acknowledged, and a claim acknowledged but gone at the end
// would be a write the ensemble lost, not a block zkr handed out twice.
void claim_block(zkr::client& c, int id, long long block) {
    const std::string node = "/chaos-blocks/" + std::to_string(block), mine = std::to_string(id);
    zkr::error_code ec;
    c.create(node, mine, zkr::create_mode::persistent, ec);
    if (ec == zkr::errc::node_exists) {  // someone's: ours if a lost reply made it resend
        auto d = c.get_data(node, ec);
        if (!ec && d.data != mine) {
            say("error block " + std::to_string(block) + " (ids " + std::to_string(block * 20 + 1) + "-" +
                std::to_string(block * 20 + 20) + ") handed out here was claimed by worker " + d.data + " first");
            return;
        }
    }
    if (!ec) say("block " + std::to_string(block));
    // Else not known (a fault): no claim is reported, and the driver checks none.
}

void draw_ids(zkr::client& c, int id, std::atomic<bool>& stop) {
    std::string line;
    int in_line = 0;
    auto flush = [&] {
        if (in_line > 0) say("ids" + line);
        line.clear();
        in_line = 0;
    };
    while (!stop) {
        try {
            zkr::id_generator ids(c, "/chaos-ids", 20);
            while (!stop) {
                auto next = ids.next();
                line += " " + std::to_string(next);
                if ((next - 1) % 20 == 0) claim_block(c, id, (next - 1) / 20);
                if (++in_line == 40) flush();
                std::this_thread::sleep_for(5ms);
            }
        } catch (const zkr::system_error& e) {
            if (e.code() == zkr::errc::client_closed) break;
            // Where a generator ended, and why (the driver prints it: a duplicate's neighbour).
            flush();
            say("idgen ended: " + std::string(e.what()));
            std::this_thread::sleep_for(100ms);  // paces the next generator; nothing waits on it
        }
    }
    flush();
}

// Once every thread is done: the metrics say what the threads did, through every fault, and
// count one session expiry for each session the client's own state listener saw lost (there is
// no authentication here, the one loss that is not an expiry), whether the server said so first
// or the client gave the session up first.
void check_metrics(zkr::client& c, const zkr::metrics& metrics, long holds, const std::atomic<long>& sessions_lost) {
    if (!c.flush_observer(std::chrono::seconds(10))) {
        say("error metrics: the observer did not catch up within 10 s");
        return;
    }
    // The listener runs on the handler thread, the observer on its own: a loss just before the
    // end may reach one first. Waited for, 5 s at most.
    auto agreed = [&] {
        auto s = metrics.snapshot();
        return s.value("zkr_session_expirations_total") == static_cast<double>(sessions_lost.load()) &&
               s.value("zkr_connection_state_changes_total", {{"state", "lost"}}) == static_cast<double>(sessions_lost.load());
    };
    for (auto until = clock_type::now() + 5s; !agreed() && clock_type::now() < until;) {
        std::this_thread::sleep_for(10ms);
        c.flush_observer(std::chrono::seconds(1));
    }
    auto s = metrics.snapshot();
    auto acquired = s.value("zkr_lock_acquire_seconds_count", {{"outcome", "acquired"}});
    auto ended = s.value("zkr_lock_hold_seconds_count");
    auto held = s.value("zkr_lock_held"), waiting = s.value("zkr_lock_waiters");
    auto dropped = s.value("zkr_observer_events_dropped_total");
    auto lost = s.value("zkr_lock_lost_total");
    auto expired = s.value("zkr_session_expirations_total");
    auto expired_server = s.value("zkr_session_expirations_total", {{"cause", "server"}});
    auto expired_given_up = s.value("zkr_session_expirations_total", {{"cause", "given_up"}});
    auto sessions_lost_counted = s.value("zkr_connection_state_changes_total", {{"state", "lost"}});
    long seen = sessions_lost.load();
    std::string figures = "acquired=" + std::to_string(static_cast<long>(acquired)) + " holds=" + std::to_string(holds) +
                          " ended=" + std::to_string(static_cast<long>(ended)) + " lost=" + std::to_string(static_cast<long>(lost)) +
                          " held=" + std::to_string(static_cast<long>(held)) + " waiting=" + std::to_string(static_cast<long>(waiting)) +
                          " dropped=" + std::to_string(static_cast<long>(dropped)) +
                          " expired=" + std::to_string(static_cast<long>(expired)) +
                          " server=" + std::to_string(static_cast<long>(expired_server)) +
                          " given_up=" + std::to_string(static_cast<long>(expired_given_up)) +
                          " sessions_lost=" + std::to_string(static_cast<long>(sessions_lost_counted)) +
                          " sessions_lost_seen=" + std::to_string(seen);
    bool ok = acquired == static_cast<double>(holds) && ended == acquired && held == 0 && waiting == 0 && dropped == 0 &&
              expired == static_cast<double>(seen) && sessions_lost_counted == static_cast<double>(seen) &&
              expired_server + expired_given_up == expired;
    say(ok ? "metrics ok " + figures : "error metrics " + figures);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 8) {
        std::fprintf(stderr, "usage: %s ID CONNECT SESSION_MS THREADS FENCE_PORT SEED MEMBERS\n", argv[0]);
        return 2;
    }
    int id = std::atoi(argv[1]);
    zkr::client_options o;
    o.connect = argv[2];
    o.session_timeout = std::chrono::milliseconds(std::atoi(argv[3]));
    int threads = std::atoi(argv[4]);
    int fence_port = std::atoi(argv[5]);
    std::uint64_t seed = std::strtoull(argv[6], nullptr, 10);
    int members = std::atoi(argv[7]);  // the soak's workers: the double barrier's member count

    zkr::log::set_threshold(zkr::log::level::error);  // the driver's output stays readable
    auto metrics = std::make_shared<zkr::metrics>();
    o.observer = metrics;
    zkr::client c(o);
    // What the client tells its users of its sessions: each one lost, against the metrics' expiries.
    std::atomic<long> sessions_lost{0};
    auto lost_listener = c.on_state_change([&](zkr::connection_state s) {
        if (s == zkr::connection_state::lost) ++sessions_lost;
    });
    c.wait_connected(std::chrono::seconds(30));
    zkr::mutex m(c, "/chaos/m");
    zkr::shared_mutex rw(c, "/chaos/rw");
    c.create_parents("/chaos-config");
    c.create_parents("/chaos-blocks", zkr::create_mode::persistent);
    zkr::tree_cache cache(c, "/chaos-config");
    cache.start();
    std::string registration = "/chaos-members/w" + std::to_string(id);
    zkr::persistent_node member(c, registration, zkr::create_mode::ephemeral, std::to_string(id));
    member.start();
    // Renewed every 750 ms: partitions and restarts longer than its TTL let it expire, and it
    // must come back (its container made again, its child with it).
    zkr::ttl_node alive(c, "/chaos-alive/w" + std::to_string(id), 1500ms, std::to_string(id));
    alive.start();
    say("ready");  // before any other line: the driver reads this one first
    std::atomic<bool> stop{false};
    totals t;
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i)
        workers.emplace_back([&, i] { contend(id, i, m, rw, fence_port, seed * 1000 + static_cast<std::uint64_t>(i), stop, t); });
    std::thread mutator([&] { mutate_config(c, seed * 1000 + 999, stop); });
    const std::string counter_path = "/chaos-counters/w" + std::to_string(id);
    counter_tally counted;
    std::vector<std::thread> incrementers;
    for (int i = 0; i < 2; ++i) incrementers.emplace_back([&] { increment_counter(c, counter_path, stop, counted); });
    latch_tally latches;
    std::thread latch_rounds([&] { count_down_rounds(c, id, stop, latches); });
    std::atomic<long> barrier_passes{0};
    std::thread barrier_thread([&] { barrier_rounds(c, members, stop, barrier_passes); });
    std::thread gate_thread([&] { gate_rounds(c, id, members, stop); });
    std::thread reusable_thread([&] { reusable_rounds(c, members, stop); });
    std::thread id_thread([&] { draw_ids(c, id, stop); });
    std::thread memory([&] {
        while (!stop) {
            say("rss " + std::to_string(rss_kb()));
            for (int i = 0; i < 50 && !stop; ++i) std::this_thread::sleep_for(100ms);
        }
    });
    // Told to finish by the end of stdin.
    char buffer[64];
    while (read(STDIN_FILENO, buffer, sizeof buffer) > 0) {}
    stop = true;
    for (auto& w : workers) w.join();
    mutator.join();
    for (auto& t : incrementers) t.join();
    latch_rounds.join();
    barrier_thread.join();
    gate_thread.join();
    reusable_thread.join();
    id_thread.join();
    memory.join();
    check_watch_recipes(c, cache, registration, alive);
    check_counter(c, counter_path, counted);
    if (latches.wrong == 0)
        say("latch ok rounds=" + std::to_string(latches.rounds.load()) + " in_doubt=" + std::to_string(latches.in_doubt.load()));
    check_metrics(c, *metrics, t.holds, sessions_lost);
    say("stats holds=" + std::to_string(t.holds) + " writes=" + std::to_string(t.writes) +
        " refused=" + std::to_string(t.refused) + " probes=" + std::to_string(t.probes) +
        " errors=" + std::to_string(t.errors) + " barrier_in=" + std::to_string(barrier_passes.load()));
    return 0;
}
