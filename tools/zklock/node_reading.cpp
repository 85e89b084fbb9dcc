#include "node_reading.hpp"

#include "session.hpp"

#include <memory>

namespace zklock {

std::vector<std::optional<node_reading>> read_nodes(zkr::client& client, event_loop& loop,
                                                    const std::vector<std::string>& node_paths, steady_time deadline) {
    std::vector<std::shared_ptr<outcome<zkr::data_result>>> reads;
    for (const auto& node_path : node_paths) {
        reads.push_back(std::make_shared<outcome<zkr::data_result>>());
        client.async_get_data(node_path, loop.completion(reads.back()));
    }
    std::vector<std::optional<node_reading>> out;
    for (std::size_t i = 0; i < node_paths.size(); ++i) {
        const std::string& node_path = node_paths[i];
        auto& read = await(loop, reads[i], deadline, "reading " + node_path);
        if (read.error == zkr::errc::no_node) {
            out.emplace_back();
            continue;
        }
        node_reading reading;
        if (read.error == zkr::errc::no_auth) {
            // Its ACL hides the data, not the stat: exists() needs no permission.
            reading.data_error = read.error;
            auto stat = std::make_shared<outcome<zkr::exists_result>>();
            client.async_exists(node_path, loop.completion(stat));
            auto& found = await(loop, stat, deadline, "reading " + node_path);
            if (found.error) fail_with(found.error, "reading " + node_path);
            if (!found.value.exists) {
                out.emplace_back();
                continue;
            }
            reading.stat = found.value.stat;
        } else if (read.error) {
            fail_with(read.error, "reading " + node_path);
        } else {
            reading.data = std::move(read.value.data);
            reading.stat = read.value.stat;
            reading.owner = parse_zkr_owner(reading.data);
        }
        out.push_back(std::move(reading));
    }
    return out;
}

}  // namespace zklock
