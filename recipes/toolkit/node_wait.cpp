// The node waits: read exists() with a watch; if the node is not yet as wanted, wait on the watch
// inline and read again when it ends (a change, or the session's end: the next session's read
// decides). Every step runs on whichever thread answers, and only sends the next request: nothing
// blocks. The async form (zkr/detail/node_wait.hpp) posts the user's handler to its executor; the
// blocking form (node_wait.hpp) runs the same machine and waits for it on the caller's thread,
// cancelling it at the caller's deadline.
#include "zkr/detail/node_wait.hpp"
#include "node_wait.hpp"

#include "completion.hpp"
#include "observed_operation.hpp"
#include "session_port.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>

#include <mutex>
#include <optional>

namespace zkr::detail {
namespace asio = boost::asio;

namespace {

class node_wait : public std::enable_shared_from_this<node_wait> {
public:
    /// `once`: read once, without a watch, and end with errc::timed_out if the node is not as
    /// wanted (a poll).
    node_wait(std::weak_ptr<session_port> port, std::string path, bool until_exists, bool once, observed_operation observed,
              completion<> done)
        : port_(std::move(port)), path_(std::move(path)), until_exists_(until_exists), once_(once), done_(std::move(done)) {
        observed_.emplace(std::move(observed));
    }

    /// The caller's deadline passed: the cancel() that follows is a time-out, to the observer.
    void deadline_passed() { deadline_passed_ = true; }

    void read() {
        auto port = port_.lock();
        if (!port || port->closed()) return finish(make_error_code(errc::client_closed));
        auto self = shared_from_this();  // kept by the request until it answers
        port->exists(path_, !once_, completion<exists_result>(completion<exists_result>::inline_fn(
                                        [self](error_code ec, exists_result r) { self->on_read(ec, std::move(r)); })));
    }

    void cancel() {
        std::shared_ptr<watch_state> ws;
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            cancelled_ = true;
            ws = watch_;
        }
        if (ws) ws->clear_inline();
        drop(ws);
        finish(make_error_code(errc::cancelled));
    }

private:
    void on_read(error_code ec, exists_result r) {
        auto ws = watch_access::state(r.watch);
        if (ec) {
            drop(ws);
            return finish(ec);
        }
        if (r.exists == until_exists_) {
            drop(ws);
            return finish({});
        }
        if (once_) return finish(make_error_code(errc::timed_out));
        {
            std::lock_guard lock(mutex_);
            if (finished_ || cancelled_) {
                drop(ws);
                return;
            }
            watch_ = ws;
        }
        if (!ws) return finish(make_error_code(errc::too_many_watches));
        auto self = shared_from_this();
        ws->wait_inline([self](error_code wec, const watch_event& ev) {
            if (wec == errc::client_closed) return self->finish(wec);
            if (wec == errc::watch_removed) return;  // removed by cancel()
            // The server said it happened: done, with no second read.
            if (!wec && ev.type == (self->until_exists_ ? event_type::created : event_type::deleted)) return self->finish({});
            self->read();  // changed otherwise, or ended with its session: read again
        });
    }

    void drop(const std::shared_ptr<watch_state>& ws) {
        if (!ws) return;
        if (auto port = port_.lock()) port->remove_watch(ws, completion<>(completion<>::inline_fn([](error_code) {})));
    }

    void finish(error_code ec) {
        std::optional<completion<>> done;
        {
            std::lock_guard lock(mutex_);
            if (finished_) return;
            finished_ = true;
            watch_.reset();
            done.emplace(std::move(*done_));
            done_.reset();
        }
        observed_->finish(ec == errc::cancelled && deadline_passed_ ? make_error_code(errc::timed_out) : ec);
        (*done)(ec);  // posted to the handler's executor
    }

    std::weak_ptr<session_port> port_;
    std::string path_;
    bool until_exists_, once_;
    std::optional<observed_operation> observed_;  // (not movable: made in place)
    std::atomic<bool> deadline_passed_{false};
    std::mutex mutex_;
    std::optional<completion<>> done_;
    std::shared_ptr<watch_state> watch_;
    bool finished_ = false, cancelled_ = false;
};

}  // namespace

namespace {
void start(const std::weak_ptr<session_port>& port, const asio::any_io_executor& executor, std::string path,
           bool until_exists, observed_operation observed, node_wait_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<node_wait>(port, std::move(path), until_exists, false, std::move(observed),
                                          completion<>(std::move(handler), executor));
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<node_wait>(op)](asio::cancellation_type) {
            if (auto o = weak.lock()) o->cancel();
        });
    }
    op->read();
}
}  // namespace

void start_node_wait(const std::weak_ptr<session_port>& port, const asio::any_io_executor& executor, std::string path,
                     bool until_exists, recipe_kind recipe, node_wait_handler handler) {
    observed_operation observed;
    if (auto p = port.lock()) observed = observed_operation(*p, recipe, path, recipe_operation::wait);
    start(port, executor, std::move(path), until_exists, std::move(observed), std::move(handler));
}

void start_unobserved_node_wait(const std::weak_ptr<session_port>& port, const asio::any_io_executor& executor,
                                std::string path, bool until_exists, node_wait_handler handler) {
    start(port, executor, std::move(path), until_exists, observed_operation{}, std::move(handler));
}

bool wait_node(session_port& port, std::string path, bool until_exists, std::chrono::steady_clock::time_point deadline,
               recipe_kind recipe, const std::string& observed_path, error_code& ec) {
    using clock = std::chrono::steady_clock;
    const auto now = clock::now();
    // A deadline already past is a poll: one read, answered — within a session timeout however
    // the server is, so a server that never answers cannot hold the caller.
    const bool poll = deadline <= now;
    const auto until = poll ? now + port.session_timeout() : deadline;
    sync_slot<> slot;
    auto op = std::make_shared<node_wait>(port.weak_port(), std::move(path), until_exists, poll,
                                          observed_operation(port, recipe, observed_path, recipe_operation::wait),
                                          completion<>(&slot));
    op->read();
    ec = {};
    if (!slot.wait_until(until, ec)) {
        // Ends the machine (its watch removed) unless it is ending right now; either way its one
        // completion comes at once, and the slot must outlive it.
        op->deadline_passed();
        op->cancel();
        slot.wait(ec);
    }
    if (ec == errc::cancelled || (poll && ec == errc::timed_out)) {
        ec = {};
        return false;
    }
    return !ec;
}

}  // namespace zkr::detail
