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

// What run holds: an async hold (zkr::lock_hold), or with --timeout 0 the main thread's hold
// of one try_lock round (zkr has no async form of try-once).
class held_lock {
public:
    explicit held_lock(zkr::lock_hold hold) : hold_(std::move(hold)) {}
    explicit held_lock(zkr::lock_view& thread_side) : thread_side_(&thread_side) {}

    std::string node_path() const { return thread_side_ ? thread_side_->node_path() : hold_.node_path(); }
    std::int64_t fencing_token() const { return thread_side_ ? thread_side_->fencing_token() : hold_.fencing_token(); }
    zkr::lock_state state() const { return thread_side_ ? thread_side_->state() : hold_.state(); }

    template <class Handler>
    void async_wait_lost(Handler&& handler) {
        if (thread_side_) thread_side_->async_wait_lost(std::forward<Handler>(handler));
        else hold_.async_wait_lost(std::forward<Handler>(handler));
    }

    /// Releases the lock and waits (until `deadline`) for the server to have the node gone, so
    /// that the next holder can go.
    void release(zkr::client& client, event_loop& loop, steady_time deadline) {
        if (thread_side_) {
            std::string node = thread_side_->node_path();
            thread_side_->unlock();
            thread_side_ = nullptr;
            // The delete unlock() sent is ordered before anything this client sends next: once
            // this read is answered, the node is gone.
            auto read = std::make_shared<outcome<zkr::exists_result>>();
            client.async_exists(node, loop.completion(read));
            loop.run_until([&] { return read->done; }, deadline);
            return;
        }
        auto released = std::make_shared<outcome<no_value>>();
        hold_.async_unlock(loop.completion(released));
        loop.run_until([&] { return released->done; }, deadline);
    }

private:
    zkr::lock_hold hold_;
    zkr::lock_view* thread_side_ = nullptr;
};

// Waits for the lock until `deadline` (none: as long as it takes). A signal or the deadline
// cancels the acquisition: zkr removes our node and its watch.
held_lock acquire(event_loop& loop, zkr::lock_view& lock, const run_options& o, std::optional<steady_time> deadline) {
    asio::cancellation_signal cancel;
    auto acquired = std::make_shared<outcome<zkr::lock_hold>>();
    lock.async_lock(asio::bind_cancellation_slot(cancel.slot(), loop.completion(acquired)));

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
    if (acquired->done && !acquired->error) return held_lock(std::move(acquired->value));  // came just in time
    if (woke == event_loop::wake::deadline)
        throw failure(exit_code::timed_out, "timed out after " + format_duration(*o.timeout) + " " + waiting);
    fail_with(acquired->error, waiting);
}

// --timeout 0: one round, as flock -n. The main thread blocks for it (a few round trips);
// a signal that comes meanwhile is acted on right after.
held_lock try_once(zkr::client& client, event_loop& loop, zkr::lock_view& lock, const run_options& o) {
    std::string trying = "taking the " + std::string(side(o)) + " lock on " + o.path;
    zkr::error_code ec;
    bool taken = lock.try_lock(ec);
    if (!taken && ec) fail_with(ec, trying);
    if (!taken)
        throw failure(exit_code::timed_out,
                      "the " + std::string(side(o)) + " lock on " + o.path + " is held by another (--timeout 0: no waiting)");
    held_lock hold(lock);
    loop.context().poll();
    if (auto interrupted = loop.take_signal()) {
        hold.release(client, loop, steady_clock::now() + settle_time);
        throw failure(signal_exit_status(interrupted->number), trying + ": interrupted by " + signal_name(interrupted->number));
    }
    return hold;
}

// Runs the command while the hold lasts; returns once it has exited and been reaped.
// True if the lock was lost meanwhile (the command was then told with --lost-signal).
bool supervise(event_loop& loop, held_lock& hold, command_process& command, const run_options& o) {
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
                      << describe_command(o) << "' ran: sending its process group " << signal_name(o.lost_signal) << ", SIGKILL in "
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
    event_loop loop;
    auto client = connect(loop, o.connection, o.connect_timeout);

    zkr::shared_mutex lock(*client, o.path);
    zkr::lock_view& side = o.shared ? lock.read_lock() : lock.write_lock();
    // --timeout is the wait for the lock, counted once connected; 0 is no wait at all.
    std::optional<steady_time> deadline;
    if (o.timeout) deadline = steady_clock::now() + *o.timeout;
    held_lock hold = o.timeout && o.timeout->count() == 0 ? try_once(*client, loop, side, o) : acquire(loop, side, o, deadline);
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

    hold.release(*client, loop, steady_clock::now() + settle_time);
    return command.exit_status();
}

}  // namespace zklock
