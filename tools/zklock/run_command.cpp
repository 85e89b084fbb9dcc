// zklock run: take the lock, run the command, release the lock when it exits (like flock(1)).
#include "command_process.hpp"
#include "commands.hpp"
#include "duration.hpp"
#include "event_loop.hpp"
#include "session.hpp"
#include "signals.hpp"

#include <zkr/lock_hold.hpp>
#include <zkr/shared_mutex.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <iostream>

namespace zklock {
namespace asio = boost::asio;
namespace {

using std::chrono::steady_clock;

// How long zklock waits for zkr to finish a cancelled acquisition or a release before it
// closes the session, which removes its nodes anyway.
constexpr std::chrono::seconds settle_time{5};

std::string describe_command(const run_options& o) {
    std::string text = o.command.front();
    for (std::size_t i = 1; i < o.command.size(); ++i) text += " " + o.command[i];
    return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

const char* side(const run_options& o) { return o.shared ? "shared" : "exclusive"; }

// Waits for the lock until `deadline` (none: as long as it takes). A signal or the deadline
// cancels the acquisition: zkr removes our node and its watch.
zkr::lock_hold acquire(event_loop& loop, zkr::shared_mutex& lock, const run_options& o, std::optional<steady_time> deadline) {
    asio::cancellation_signal cancel;
    auto acquired = std::make_shared<outcome<zkr::lock_hold>>();
    auto handler = asio::bind_cancellation_slot(cancel.slot(), loop.completion(acquired));
    if (o.shared) lock.async_lock_shared(std::move(handler));
    else lock.async_lock(std::move(handler));

    std::string waiting = "waiting for the " + std::string(side(o)) + " lock on " + o.path;
    auto woke = loop.run_until([&] { return acquired->done; }, deadline);
    std::optional<received_signal> interrupted;
    if (woke == event_loop::wake::signal) interrupted = loop.take_signal();
    if (woke != event_loop::wake::done) {
        cancel.emit(asio::cancellation_type::terminal);
        // A second signal ends this wait too: closing the session removes the node anyway.
        loop.run_until([&] { return acquired->done; }, steady_clock::now() + settle_time);
    }
    if (interrupted) {
        // The lock may have come just before the cancellation: the hold releases it on return.
        throw failure(signal_exit_status(interrupted->number), waiting + ": interrupted by " + signal_name(interrupted->number));
    }
    if (acquired->done && !acquired->error) return std::move(acquired->value);  // came just in time
    if (woke == event_loop::wake::deadline)
        throw failure(exit_code::timed_out, "timed out after " + format_duration(*o.timeout) + " " + waiting);
    fail_with(acquired->error, waiting);
}

// Runs the command while the hold lasts; returns once it has exited and been reaped.
// True if the lock was lost meanwhile (the command was then told with --lost-signal).
bool supervise(event_loop& loop, zkr::lock_hold& hold, command_process& command, const run_options& o) {
    auto lost = std::make_shared<outcome<no_value>>();
    hold.async_wait_lost(loop.completion(lost));
    bool lost_handled = false;
    asio::steady_timer grace(loop.context());
    std::uint64_t child_events_seen = 0;
    // Ctrl-Z stops the command's group and zklock, as it would stop a job of a shell.
    loop.on_stop_request([&command] { command.stop_with_command(); });
    // Its exit may have come before the loop first looks: reap first, then wait for SIGCHLDs.
    while (!command.try_reap()) {
        loop.run_until([&] { return (lost->done && !lost_handled) || loop.child_events() != child_events_seen; });
        child_events_seen = loop.child_events();
        // The command's group is not zklock's: what zklock gets (Ctrl-C at the terminal too, when
        // zklock's group has it), the group gets.
        while (auto s = loop.take_signal()) command.signal(s->number);
        if (lost->done && !lost_handled) {
            lost_handled = true;
            if (lost->error != zkr::errc::lock_lost) continue;  // released first: cannot be while it runs
            std::cerr << "zklock: lost the lock on " << o.path << " (its ZooKeeper session ended) while '"
                      << describe_command(o) << "' ran: sending it " << signal_name(o.lost_signal) << ", SIGKILL in "
                      << format_duration(o.grace) << std::endl;
            command.signal(o.lost_signal);
            command.signal(SIGCONT);  // a stopped command must be able to act on it
            grace.expires_after(o.grace);
            grace.async_wait([&command](boost::system::error_code ec) {
                if (!ec && command.running()) command.signal(SIGKILL);
            });
        }
    }
    loop.on_stop_request({});
    return lost_handled && lost->error == zkr::errc::lock_lost;
}

}  // namespace

int run_command(const run_options& o) {
    std::string program = find_program(o.command.front());  // before any wait: a typo costs nothing
    configure_logging(o.connection);
    auto started = steady_clock::now();
    event_loop loop;
    auto client = connect(loop, o.connection, o.timeout ? std::min(*o.timeout, o.connect_timeout) : o.connect_timeout);

    zkr::shared_mutex lock(*client, o.path);
    std::optional<steady_time> deadline;
    if (o.timeout) deadline = started + *o.timeout;
    zkr::lock_hold hold = acquire(loop, lock, o, deadline);
    if (o.connection.verbose)
        std::cerr << "zklock: holding " << hold.node_path() << " (fencing token " << hold.fencing_token() << ")" << std::endl;
    if (hold.state() == zkr::lock_state::lost)
        throw failure(exit_code::lock_lost, "lost the lock on " + o.path + " before '" + describe_command(o) + "' started");

    command_process command({.program = program,
                             .argv = o.command,
                             .environment = {{"ZKLOCK_PATH", o.path},
                                             {"ZKLOCK_NODE", hold.node_path()},
                                             {"ZKLOCK_FENCING_TOKEN", std::to_string(hold.fencing_token())}},
                             .end_signal = o.lost_signal,
                             .grace = o.grace,
                             .description = describe_command(o),
                             .lock_path = o.path});
    bool lost = supervise(loop, hold, command, o);
    command.dismiss_watchdog();
    if (lost)
        throw failure(exit_code::lock_lost,
                      "the lock on " + o.path + " was lost while '" + describe_command(o) + "' ran; it " + command.describe_exit());

    // Release, and wait (bounded) until the server has the node gone, so the next holder can go.
    auto released = std::make_shared<outcome<no_value>>();
    hold.async_unlock(loop.completion(released));
    loop.run_until([&] { return released->done; }, steady_clock::now() + settle_time);
    return command.exit_status();
}

}  // namespace zklock
