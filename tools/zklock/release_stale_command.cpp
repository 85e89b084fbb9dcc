// zklock release-stale: an operator removes the lock nodes of one session (a holder that hangs
// with its session alive). Lists first; removes only with --yes.
#include "commands.hpp"
#include "event_loop.hpp"
#include "queue_status.hpp"
#include "session.hpp"
#include "status_format.hpp"

#include <zkr/path.hpp>

#include <iostream>

namespace zklock {

int release_stale_command(const release_stale_options& o) {
    configure_logging(o.connection);
    auto deadline = std::chrono::steady_clock::now() + o.timeout;
    event_loop loop;
    auto client = connect(loop, o.connection, o.timeout, o.timeout);
    auto snapshot = read_queue(*client, loop, o.path, deadline);

    std::vector<const queue_entry*> stale;
    for (const auto& e : snapshot.entries) {
        if (e.stat.ephemeral_owner == o.session) stale.push_back(&e);
    }
    std::string session = format_session_id(o.session);
    if (stale.empty()) {
        std::cout << o.path << ": no lock nodes of session " << session << "\n";
        return to_int(exit_code::success);
    }
    std::cout << o.path << ": " << stale.size() << " lock node" << (stale.size() == 1 ? "" : "s") << " of session "
              << session << (o.yes ? ":" : " would be removed:") << "\n";
    for (const auto* e : stale) std::cout << "  " << (e->holds ? "holds  " : "waits  ") << e->name.name << "\n";
    if (!o.yes) {
        std::cout << std::flush;
        std::cerr << "zklock: release-stale: nothing removed; run again with --yes to remove "
                  << (stale.size() == 1 ? "it" : "them") << std::endl;
        return to_int(exit_code::refused);
    }

    // Every delete at once; a node gone meanwhile (its session ended) is fine.
    std::vector<std::shared_ptr<outcome<no_value>>> removals;
    for (const auto* e : stale) {
        removals.push_back(std::make_shared<outcome<no_value>>());
        client->async_remove(zkr::join_path(o.path, e->name.name), zkr::any_version, loop.completion(removals.back()));
    }
    for (std::size_t i = 0; i < stale.size(); ++i) {
        std::string node_path = zkr::join_path(o.path, stale[i]->name.name);
        auto& removed = await(loop, removals[i], deadline, "removing " + node_path);
        if (removed.error && removed.error != zkr::errc::no_node) fail_with(removed.error, "removing " + node_path);
        std::cout << "  removed " << stale[i]->name.name << (removed.error ? " (already gone)" : "") << "\n";
    }
    std::cout << std::flush;
    return to_int(exit_code::success);
}

}  // namespace zklock
