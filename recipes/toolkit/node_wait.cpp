// The async node waits (zkr/detail/node_wait.hpp): read exists() with a watch; if the node is not
// yet as wanted, wait on the watch inline and read again when it ends (a change, or the session's
// end: the next session's read decides). Every step runs on whichever thread answers, and only
// sends the next request: nothing blocks, and the user's handler is posted to its executor.
#include "zkr/detail/node_wait.hpp"

#include "session_port.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>

#include <mutex>
#include <optional>

namespace zkr::detail {
namespace asio = boost::asio;

namespace {

class node_wait : public std::enable_shared_from_this<node_wait> {
public:
    node_wait(std::weak_ptr<session_port> port, std::string path, bool until_exists, completion<> done)
        : port_(std::move(port)), path_(std::move(path)), until_exists_(until_exists), done_(std::move(done)) {}

    void read() {
        auto port = port_.lock();
        if (!port || port->closed()) return finish(make_error_code(errc::client_closed));
        auto self = shared_from_this();  // kept by the request until it answers
        port->exists(path_, true, completion<exists_result>(completion<exists_result>::inline_fn(
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
        (*done)(ec);  // posted to the handler's executor
    }

    std::weak_ptr<session_port> port_;
    std::string path_;
    bool until_exists_;
    std::mutex mutex_;
    std::optional<completion<>> done_;
    std::shared_ptr<watch_state> watch_;
    bool finished_ = false, cancelled_ = false;
};

}  // namespace

void start_node_wait(const std::weak_ptr<session_port>& port, const asio::any_io_executor& executor, std::string path,
                     bool until_exists, node_wait_handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<node_wait>(port, std::move(path), until_exists, completion<>(std::move(handler), executor));
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<node_wait>(op)](asio::cancellation_type) {
            if (auto o = weak.lock()) o->cancel();
        });
    }
    op->read();
}

}  // namespace zkr::detail
