// A batch job across processes: a coordinator opens a start gate (zkr::barrier) for its workers,
// waits on a count-down latch (zkr::count_down_latch) until every chunk is done, and reads the
// job's totals from a counter (zkr::atomic_long); each work item gets an id from
// zkr::id_generator, unique across all workers however they crash or retry.
//
// Four workers (threads with a client each, as four processes would be) wait at the gate, then
// take chunks, give each item an id, add what they processed to the shared counter and count the
// chunk down. The coordinator waits for the latch and checks: every chunk counted once, every
// item counted once, no id handed out twice.
//
//   batch_job [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
// Exit status 0 when the totals are exact; 1 otherwise.
#include <zkr/zkr.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {
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
    const std::string root = "/zkr-example-batch-" + std::to_string(::getpid());
    const std::string gate_path = root + "/gate", latch_path = root + "/chunks-left";
    const std::string items_path = root + "/items-done", ids_path = root + "/item-ids";
    constexpr int workers = 4, chunks = 20, items_per_chunk = 25;

    zkr::client coordinator(options);
    coordinator.wait_connected();
    zkr::barrier gate(coordinator, gate_path);
    gate.set();  // nobody starts before the coordinator says so
    zkr::count_down_latch chunks_left(coordinator, latch_path);
    if (!chunks_left.try_set_count(chunks)) throw std::runtime_error("the latch already had a count");

    std::atomic<int> next_chunk{0};
    std::mutex ids_mutex;
    std::set<std::int64_t> ids;
    std::atomic<int> duplicate_ids{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
        threads.emplace_back([&] {
            zkr::client client(options);
            zkr::barrier start(client, gate_path);
            start.wait();
            zkr::id_generator item_ids(client, ids_path, 10);
            zkr::atomic_long items_done(client, items_path);
            zkr::count_down_latch done(client, latch_path);
            for (int chunk; (chunk = next_chunk++) < chunks;) {
                for (int i = 0; i < items_per_chunk; ++i) {
                    auto id = item_ids.next();
                    std::lock_guard lock(ids_mutex);
                    if (!ids.insert(id).second) ++duplicate_ids;
                }
                auto r = items_done.add(items_per_chunk);
                if (!r.succeeded) throw std::runtime_error("the item counter lost too many races");
                done.count_down();  // exactly once, even if its reply is lost
            }
        });
    }
    std::cout << "workers wait at the gate; chunks left: " << chunks_left.count() << "\n";
    gate.remove();  // go
    bool finished = chunks_left.wait(60s);
    for (auto& t : threads) t.join();

    int wrong = 0;
    auto expect = [&](bool ok, const std::string& what) {
        std::cout << (ok ? "ok:    " : "WRONG: ") << what << "\n";
        if (!ok) ++wrong;
    };
    expect(finished, "the latch released the coordinator");
    expect(chunks_left.count() == 0, "no chunk left");
    auto items = zkr::atomic_long(coordinator, items_path).get().post;
    expect(items == chunks * items_per_chunk, "items done: " + std::to_string(items));
    expect(duplicate_ids == 0 && ids.size() == static_cast<std::size_t>(chunks * items_per_chunk),
           std::to_string(ids.size()) + " distinct item ids");
    remove_tree(coordinator, root);
    std::cout << (wrong == 0 ? "the batch's totals are exact" : std::to_string(wrong) + " thing(s) went WRONG") << "\n";
    return wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "batch_job: " << e.what() << "\n";
    return 1;
}
