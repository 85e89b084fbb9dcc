// A service that does its work only while it leads: zkr::leader_latch with fenced writes.
//
// Three replicas of one service (each on its own zkr::client, as three processes would be) take
// part in one election. Only the leader appends to a shared "ledger" node, and every append is ONE
// transaction guarded by the leadership:
//
//     client.multi({latch.guard(), zkr::op::set_data{ledger, ...}})
//
// The server applies the write only if the leader's election node still exists at that moment,
// so a replica that is no longer the leader cannot write, whatever it believes: it stepped down,
// its session expired during a pause (GC, a frozen VM), or someone deleted its node. Checking
// has_leadership() before writing is not enough: leadership can end between the check and the
// write.
//
// Each leader appends a few entries and steps down (close()); the next one leads with a higher
// fencing token. The one that stepped down then tries the append it had prepared, with the guard
// it had — as a leader paused across its own hand-over would — and the server refuses it
// (errc::lock_lost).
//
//   leader_service [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
// Exit status 0 when there was one leader at a time, the fencing tokens increased, every stale
// append was refused, and the ledger holds exactly the leaders' appends, in order; 1 otherwise.
#include <zkr/zkr.hpp>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

constexpr int replicas = 3;
constexpr int appends_per_term = 3;

// What the replicas saw, in this process.
struct observations {
    std::mutex mutex;
    std::condition_variable changed;
    int in_office = 0;                  // replicas working as the leader right now
    std::vector<std::int64_t> tokens;   // each term's fencing token, in the order the terms began
    std::vector<std::string> accepted;  // ledger lines the server accepted, in order
    int stale_refused = 0;              // appends after stepping down that the server refused
    int wrong = 0;

    void expect(bool ok, const std::string& what) {
        if (ok) return;
        std::lock_guard guard(mutex);
        std::cout << "WRONG: " << what << "\n";
        ++wrong;
    }
};

// Appends `line` to the ledger as one transaction guarded by `fence`: it lands only if the node
// behind the fence still exists when the server applies it. The version condition keeps an
// append from overwriting another one made since we read (never expected with one leader).
void append(zkr::client& client, const zkr::op::guard& fence, const std::string& ledger, const std::string& line,
            zkr::error_code& ec) {
    auto now = client.get_data(ledger, ec);
    if (ec) return;
    client.multi({fence, zkr::op::set_data{ledger, now.data + line, now.stat.version}}, ec);
}

// One replica: waits to lead, works while it leads, steps down, then plays the stale leader.
void replica(int me, zkr::client& client, zkr::leader_latch& latch, const std::vector<zkr::leader_latch*>& all,
             const std::string& ledger, observations& seen, std::chrono::steady_clock::time_point deadline) {
    // Every wait has a deadline: a replica that never leads is a failure, not a hang.
    if (!latch.wait_leadership(deadline - std::chrono::steady_clock::now())) {
        seen.expect(false, "replica " + std::to_string(me) + " never led");
        return;
    }
    // Take the fence and the token once, at the start of the term: they name this leadership.
    // (Both throw errc::not_owner if it was already lost again.)
    zkr::op::guard fence = latch.guard();
    std::int64_t token = latch.fencing_token();
    std::size_t term = 0;
    {
        std::lock_guard guard(seen.mutex);
        // The previous leader left office before it closed its latch, and we lead only once its
        // node is gone: so nobody else is in office, and no other latch claims leadership.
        if (seen.in_office != 0) {
            std::cout << "WRONG: replica " << me << " leads while another is in office\n";
            ++seen.wrong;
        }
        for (auto* other : all) {
            if (other != &latch && other->has_leadership()) {
                std::cout << "WRONG: replica " << me << " leads beside another latch that leads\n";
                ++seen.wrong;
            }
        }
        if (!seen.tokens.empty() && token <= seen.tokens.back()) {
            std::cout << "WRONG: fencing token " << token << " is not above the previous " << seen.tokens.back() << "\n";
            ++seen.wrong;
        }
        ++seen.in_office;
        seen.tokens.push_back(token);
        term = seen.tokens.size();
    }
    seen.changed.notify_all();
    std::cout << "replica " << me << " leads (term " << term << ", fencing token " << token << ")\n";

    // The work: appends to the ledger, each fenced by this leadership.
    for (int n = 1; n <= appends_per_term; ++n) {
        std::string line = "term " + std::to_string(term) + " token " + std::to_string(token) + " replica " +
                           std::to_string(me) + " entry " + std::to_string(n) + "\n";
        zkr::error_code ec;
        append(client, fence, ledger, line, ec);
        seen.expect(!ec, "replica " + std::to_string(me) + "'s append failed while it led: " + ec.message());
        if (ec) break;
        std::lock_guard guard(seen.mutex);
        seen.accepted.push_back(line);
    }

    // Step down: leave office first, then close the latch (its node is deleted, the next leads).
    {
        std::lock_guard guard(seen.mutex);
        --seen.in_office;
    }
    latch.close();
    seen.expect(!latch.has_leadership(), "replica " + std::to_string(me) + " still leads after close()");
    if (term == replicas) return;  // the last leader: nobody to hand over to

    // Wait (bounded) until the next leader's term has begun: our node is gone by then.
    {
        std::unique_lock guard(seen.mutex);
        if (!seen.changed.wait_until(guard, deadline, [&] { return seen.tokens.size() > term; })) {
            std::cout << "WRONG: nobody led after replica " << me << " stepped down\n";
            ++seen.wrong;
            return;
        }
    }
    // A stale leader: this replica wakes up from a pause and sends the append it had prepared,
    // with the guard of the leadership it no longer has. The server refuses it.
    zkr::error_code ec;
    append(client, fence, ledger, "STALE append by replica " + std::to_string(me) + "\n", ec);
    std::cout << "replica " << me << " (no longer leading) tries to append: "
              << (ec == zkr::errc::lock_lost ? "refused, lock_lost" : ec ? "failed: " + ec.message() : "ACCEPTED")
              << "\n";
    seen.expect(ec == zkr::errc::lock_lost,
                "the stale append by replica " + std::to_string(me) + " was not refused with lock_lost");
    if (ec == zkr::errc::lock_lost) {
        std::lock_guard guard(seen.mutex);
        ++seen.stale_refused;
    }
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

}  // namespace

int main(int argc, char** argv) try {
    const char* env = std::getenv("ZK_CONNECT");
    const std::string connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    // A root of this run's own: nodes left by an earlier run that crashed cannot get in the way.
    const std::string root = "/examples/leader-service-" + std::to_string(getpid());
    const std::string ledger = root + "/ledger";

    zkr::client admin(options_for(connect));
    admin.wait_connected(15s);
    admin.create_parents(root);
    admin.create(ledger, "");

    // One client per replica: each replica's leadership rides on its own session.
    std::vector<std::unique_ptr<zkr::client>> clients;
    std::vector<std::unique_ptr<zkr::leader_latch>> latches;
    std::vector<zkr::leader_latch*> all;
    for (int i = 1; i <= replicas; ++i) {
        clients.push_back(std::make_unique<zkr::client>(options_for(connect)));
        clients.back()->wait_connected(15s);
        latches.push_back(std::make_unique<zkr::leader_latch>(*clients.back(), root + "/election", "replica-" + std::to_string(i)));
        all.push_back(latches.back().get());
    }

    observations seen;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    std::vector<std::thread> threads;
    for (int i = 0; i < replicas; ++i) {
        latches[i]->start();
        threads.emplace_back([&, i] {
            try {
                replica(i + 1, *clients[i], *latches[i], all, ledger, seen, deadline);
            } catch (const std::exception& e) {
                seen.expect(false, "replica " + std::to_string(i + 1) + " failed: " + e.what());
            }
        });
    }
    for (auto& t : threads) t.join();

    // The ledger must hold exactly what the leaders appended and the server accepted, in order:
    // no stale append, none lost.
    std::string expected;
    for (const auto& line : seen.accepted) expected += line;
    const std::string actual = admin.get_data(ledger).data;
    std::cout << "ledger:\n" << actual;
    seen.expect(actual == expected, "the ledger is not exactly the leaders' appends");
    seen.expect(seen.tokens.size() == replicas, "not every replica led once");
    seen.expect(seen.accepted.size() == replicas * appends_per_term, "not every append of the leaders landed");
    seen.expect(seen.stale_refused == replicas - 1, "not every stale append was refused");

    latches.clear();  // before their clients
    remove_tree(admin, root);
    const bool right = seen.wrong == 0;
    std::cout << (right ? "one leader at a time, tokens increasing, stale appends refused, ledger exact"
                        : std::to_string(seen.wrong) + " thing(s) went WRONG")
              << "\n";
    return right ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "leader_service: " << e.what() << "\n";
    return 1;
}
