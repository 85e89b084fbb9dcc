// zklock status: the queue of one lock, or the leases of one semaphore, once.
#include "commands.hpp"
#include "event_loop.hpp"
#include "queue_status.hpp"
#include "semaphore_status.hpp"
#include "session.hpp"
#include "status_format.hpp"

#include <iostream>

namespace zklock {

int status_command(const status_options& o) {
    configure_logging(o.connection);
    // One deadline for everything, connecting included.
    auto deadline = std::chrono::steady_clock::now() + o.timeout;
    event_loop loop;
    auto client = connect(loop, o.connection, o.timeout, o.timeout);
    if (is_semaphore_path(*client, loop, o.path, deadline)) {
        auto leases = read_semaphore(*client, loop, o.path, o.max_leases, deadline);
        std::cout << (o.json ? format_json(leases) + "\n" : format_text(leases)) << std::flush;
        return to_int(exit_code::success);
    }
    auto snapshot = read_queue(*client, loop, o.path, deadline);
    std::cout << (o.json ? format_json(snapshot) + "\n" : format_text(snapshot)) << std::flush;
    return to_int(exit_code::success);
}

}  // namespace zklock
