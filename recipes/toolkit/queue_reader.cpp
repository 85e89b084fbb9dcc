#include "queue_reader.hpp"

#include "zkr/path.hpp"

#include <condition_variable>
#include <mutex>

namespace zkr::detail {

std::vector<queued_node> read_queue(session_port& port, const std::string& path, queue_kind family, const char* what) {
    sync_slot<children_result> listed;
    port.get_children(path, false, completion<children_result>(&listed));
    error_code ec;
    auto [children] = listed.wait(ec);
    if (ec == errc::no_node) return {};
    if (ec) throw zkr::system_error(ec, std::string("zkr: ") + what + ": listing \"" + path + "\"");
    auto queue = sorted_contenders(children.children, family);

    // Every read sent at once (one round trip for the lot), into storage that outlives every
    // reply: we wait for all of them, whatever each one says.
    struct batch {
        std::mutex mutex;
        std::condition_variable all_in;
        std::size_t pending = 0;
        std::vector<std::pair<error_code, std::string>> replies;
    };
    auto reads = std::make_shared<batch>();
    reads->pending = queue.size();
    reads->replies.resize(queue.size());
    for (std::size_t i = 0; i < queue.size(); ++i) {
        port.get_data(join_path(path, queue[i].name), false,
                      completion<data_result>(completion<data_result>::inline_fn([reads, i](error_code read_ec, data_result r) {
                          std::lock_guard lock(reads->mutex);
                          reads->replies[i] = {read_ec, std::move(r.data)};
                          if (--reads->pending == 0) reads->all_in.notify_all();
                      })));
    }
    {
        std::unique_lock lock(reads->mutex);
        reads->all_in.wait(lock, [&] { return reads->pending == 0; });
    }
    std::vector<queued_node> out;
    out.reserve(queue.size());
    for (std::size_t i = 0; i < queue.size(); ++i) {
        auto& [read_ec, data] = reads->replies[i];
        if (read_ec == errc::no_node) continue;  // left meanwhile
        out.push_back(queued_node{std::move(queue[i]), read_ec, std::move(data)});
    }
    return out;
}

}  // namespace zkr::detail
