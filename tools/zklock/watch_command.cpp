// zklock watch: the queue of one lock, shown again on every change its watches report.
#include "commands.hpp"
#include "event_loop.hpp"
#include "queue_status.hpp"
#include "session.hpp"
#include "signals.hpp"
#include "status_format.hpp"

#include <zkr/watch.hpp>

#include <ctime>
#include <iostream>

namespace zklock {
namespace {

std::string local_time_now() {
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
    return text;
}

void show(const queue_snapshot& snapshot, bool json) {
    if (json) std::cout << format_json(snapshot) << "\n";
    else std::cout << "--- " << local_time_now() << "\n" << format_text(snapshot);
    std::cout << std::flush;
}

}  // namespace

int watch_command(const watch_options& o) {
    configure_logging(o.connection);
    event_loop loop;
    auto client = connect(loop, o.connection, o.timeout, o.timeout);

    int changes = 0;
    for (;;) {
        zkr::watch changed;
        auto snapshot = read_queue(*client, loop, o.path, std::chrono::steady_clock::now() + o.timeout, &changed);
        show(snapshot, o.json);
        if (o.count && changes == *o.count) return to_int(exit_code::success);

        // Wait for the watch, however long: this is what watch is for. It ends with an error
        // when the session is lost; then read again on a new one.
        if (!changed.valid()) throw failure(exit_code::internal, "watching " + o.path + ": the read left no watch");
        auto fired = std::make_shared<outcome<zkr::watch_event>>();
        changed.async_wait(loop.completion(fired));
        while (loop.run_until([&] { return fired->done; }) == event_loop::wake::signal) {
            int number = loop.take_signal()->number;
            if (is_interruption(number)) return to_int(exit_code::success);
            // The others end it as they would have ended it unhandled, but with the session closed.
            throw failure(signal_exit_status(number), "watching " + o.path + ": interrupted by " + signal_name(number));
        }
        if (fired->error && fired->error != zkr::errc::session_expired)
            fail_with(fired->error, "watching " + o.path);
        // The session was lost, and the watch with it: start again on a session of our own.
        if (fired->error) {
            client.reset();
            client = connect(loop, o.connection, o.timeout, o.timeout);
        }
        ++changes;
    }
}

}  // namespace zklock
