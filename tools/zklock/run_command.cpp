// zklock run: take the lock (or with --max a semaphore lease), run the command, release it when
// it exits (like flock(1); with --max like consul lock -n).
#include "command_process.hpp"
#include "commands.hpp"
#include "duration.hpp"
#include "event_loop.hpp"
#include "run_hold.hpp"
#include "session.hpp"
#include "signals.hpp"

#include <zkr/lock_hold.hpp>
#include <zkr/semaphore.hpp>
#include <zkr/shared_mutex.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <vector>

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

// Waits for the hold until `deadline` (none: as long as it takes). `start(handler)` starts zkr's
// async acquisition, which completes with a Value that `make` turns into the hold. A signal or
// the deadline cancels the acquisition: zkr removes our node and its watch.
template <class Value, class Start, class Make>
run_hold acquire(event_loop& loop, const std::string& waiting, const run_options& o, std::optional<steady_time> deadline,
                 Start start, Make make) {
    asio::cancellation_signal cancel;
    auto acquired = std::make_shared<outcome<Value>>();
    start(asio::bind_cancellation_slot(cancel.slot(), loop.completion(acquired)));

    auto woke = loop.run_until([&] { return acquired->done; }, deadline);
    std::optional<received_signal> interrupted;
    if (woke == event_loop::wake::signal) interrupted = loop.take_signal();
    if (woke != event_loop::wake::done) {
        cancel.emit(asio::cancellation_type::terminal);
        // A second signal ends this wait too: closing the session removes the node anyway.
        loop.run_until([&] { return acquired->done; }, steady_clock::now() + settle_time);
    }
    if (interrupted) {
        // The hold may have come just before the cancellation: it is released on return.
        throw failure(signal_exit_status(interrupted->number), waiting + ": interrupted by " + signal_name(interrupted->number));
    }
    if (acquired->done && !acquired->error) return make(std::move(acquired->value));  // came just in time
    if (woke == event_loop::wake::deadline)
        throw failure(exit_code::timed_out, "timed out after " + format_duration(*o.timeout) + " " + waiting);
    fail_with(acquired->error, waiting);
}

run_hold acquire_lock(event_loop& loop, zkr::lock_view& lock, const run_options& o, std::optional<steady_time> deadline) {
    return acquire<zkr::lock_hold>(
        loop, "waiting for the " + std::string(side(o)) + " lock on " + o.path, o, deadline,
        [&lock](auto handler) { lock.async_lock(std::move(handler)); },
        [](zkr::lock_hold hold) { return run_hold(std::move(hold)); });
}

run_hold acquire_lease(event_loop& loop, zkr::semaphore& semaphore, const run_options& o, std::optional<steady_time> deadline) {
    return acquire<std::vector<zkr::lease>>(
        loop, "waiting for a lease of " + o.path + " (--max " + std::to_string(*o.max_leases) + ")", o, deadline,
        [&semaphore](auto handler) { semaphore.async_acquire(1, std::move(handler)); },
        [](std::vector<zkr::lease> leases) { return run_hold(std::move(leases.front())); });
}

// A signal that came while the main thread blocked in a try: acted on right after.
void check_interrupted(zkr::client& client, event_loop& loop, run_hold& hold, const std::string& trying) {
    loop.context().poll();
    if (auto interrupted = loop.take_signal()) {
        hold.release(client, loop, steady_clock::now() + settle_time);
        throw failure(signal_exit_status(interrupted->number), trying + ": interrupted by " + signal_name(interrupted->number));
    }
}

// --timeout 0: one round, as flock -n. The main thread blocks for it (a few round trips);
// a signal that comes meanwhile is acted on right after.
run_hold try_lock_once(zkr::client& client, event_loop& loop, zkr::lock_view& lock, const run_options& o) {
    std::string trying = "taking the " + std::string(side(o)) + " lock on " + o.path;
    zkr::error_code ec;
    bool taken = lock.try_lock(ec);
    if (!taken && ec) fail_with(ec, trying);
    if (!taken)
        throw failure(exit_code::timed_out,
                      "the " + std::string(side(o)) + " lock on " + o.path + " is held by another (--timeout 0: no waiting)");
    run_hold hold(lock);
    check_interrupted(client, loop, hold, trying);
    return hold;
}

// --timeout 0 with --max: one round (zkr has no async form of try-once either).
run_hold try_lease_once(zkr::client& client, event_loop& loop, zkr::semaphore& semaphore, const run_options& o) {
    std::string trying = "taking a lease of " + o.path;
    auto lease = semaphore.try_acquire();
    if (!lease) {
        // zkr reports connection trouble as "no lease" too: tell the two apart as the lock does.
        if (!client.is_connected())
            throw failure(exit_code::unavailable, trying + ": the connection to the ensemble was lost");
        throw failure(exit_code::timed_out, "no lease of " + o.path + " is free (--max " + std::to_string(*o.max_leases) +
                                                ": all held, or another run is taking one; --timeout 0: no waiting)");
    }
    run_hold hold(std::move(*lease));
    check_interrupted(client, loop, hold, trying);
    return hold;
}

// Runs the command while the hold lasts; returns once it has exited and been reaped.
// True if the lock was lost meanwhile (the command was then told with --lost-signal).
bool supervise(event_loop& loop, run_hold& hold, command_process& command, const run_options& o) {
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
            std::cerr << "zklock: lost the " << hold.kind() << " on " << o.path
                      << " (its ZooKeeper session ended, or its node was deleted) while '" << describe_command(o)
                      << "' ran: sending its process group " << signal_name(o.lost_signal) << ", SIGKILL in "
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

// "0.012 s": a wait or hold time for --verbose.
std::string seconds_text(steady_clock::duration d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f s", std::chrono::duration<double>(d).count());
    return buf;
}

}  // namespace

int run_command(const run_options& o) {
    std::string program = find_program(o.command.front());  // before any wait: a typo costs nothing
    configure_logging(o.connection);
    event_loop loop;
    auto client = connect(loop, o.connection, o.connect_timeout);

    // --timeout is the wait for the lock or lease, counted once connected; 0 is no wait at all.
    std::optional<steady_time> deadline;
    if (o.timeout) deadline = steady_clock::now() + *o.timeout;
    bool once = o.timeout && o.timeout->count() == 0;
    // Both declared before the hold: it releases through them.
    std::optional<zkr::shared_mutex> lock;
    std::optional<zkr::semaphore> semaphore;
    auto wait_started = steady_clock::now();
    auto hold = [&] {
        if (o.max_leases) {
            semaphore.emplace(*client, o.path, *o.max_leases);
            return once ? try_lease_once(*client, loop, *semaphore, o) : acquire_lease(loop, *semaphore, o, deadline);
        }
        lock.emplace(*client, o.path);
        zkr::lock_view& side = o.shared ? lock->read_lock() : lock->write_lock();
        return once ? try_lock_once(*client, loop, side, o) : acquire_lock(loop, side, o, deadline);
    }();
    std::string lost_before =
        "lost the " + std::string(hold.kind()) + " on " + o.path + " before '" + describe_command(o) + "' started";
    std::int64_t token = 0;
    try {
        token = hold.fencing_token();
    } catch (const zkr::system_error& e) {
        // A lease's czxid is read after its making: a lease gone meanwhile has none.
        if (e.code() == zkr::errc::lock_lost) throw failure(exit_code::lock_lost, lost_before);
        throw;
    }
    auto held_since = steady_clock::now();
    if (o.connection.verbose)
        std::cerr << "zklock: holding " << hold.node_path() << " (fencing token " << token << ") after waiting "
                  << seconds_text(held_since - wait_started) << std::endl;
    if (hold.state() == zkr::lock_state::lost) throw failure(exit_code::lock_lost, lost_before);

    command_process command({.program = program,
                             .argv = o.command,
                             .environment = {{"ZKLOCK_PATH", o.path},
                                             {"ZKLOCK_NODE", hold.node_path()},
                                             {"ZKLOCK_FENCING_TOKEN", std::to_string(token)}},
                             .end_signal = o.lost_signal,
                             .grace = o.grace,
                             .description = describe_command(o),
                             .lock_path = o.path});
    bool lost = supervise(loop, hold, command, o);
    command.dismiss_watchdog();
    if (lost)
        throw failure(exit_code::lock_lost, "the " + std::string(hold.kind()) + " on " + o.path + " was lost while '" +
                                                describe_command(o) + "' ran; it " + command.describe_exit());

    std::string node = hold.node_path();
    hold.release(*client, loop, steady_clock::now() + settle_time);
    if (o.connection.verbose)
        std::cerr << "zklock: released " << node << " after holding it " << seconds_text(steady_clock::now() - held_since)
                  << std::endl;
    return command.exit_status();
}

}  // namespace zklock
