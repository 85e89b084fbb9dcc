// zkr::count_down_latch: the count left in the latch node (8-byte big-endian), lowered by a
// versioned setData in one transaction with a keyed child "cd-<uuid>" (the key makes a resent
// transaction fail whole instead of counting twice), and "released" made by the transaction that
// reaches 0. Waiters watch "released" only.
#include "zkr/count_down_latch.hpp"

#include "completion.hpp"
#include "count_down_fsm.hpp"
#include "session_port.hpp"
#include "toolkit/big_endian.hpp"
#include "toolkit/blocking.hpp"
#include "toolkit/node_wait.hpp"
#include "toolkit/observed_operation.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/path.hpp"

#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <stdexcept>

namespace zkr::detail {

namespace {
// One count-down: the machine's requests sent as it asks, through the session; it runs on
// whichever thread completes the last request (often the C client's) and only sends the next
// one. A pause the machine asks for (past its first lost races) is a timer on the session
// thread: no thread is held, the blocking form's neither. Both forms are this driver: the async
// one posts its handler, the blocking one waits for `finish` on its own thread.
class count_down_call : public std::enable_shared_from_this<count_down_call> {
public:
    using finish_fn = std::function<void(error_code, const std::string& what)>;

    count_down_call(std::weak_ptr<session_port> port, const std::string& path, observed_operation observed, finish_fn finish)
        : port_(std::move(port)), machine_(path, join_path(path, "cd-" + blocking::member_uuid())),
          observed_(std::move(observed)), finish_(std::move(finish)) {}

    void start() {
        count_down_fsm::action a;
        {
            std::lock_guard lock(mutex_);
            a = machine_.start();
        }
        run(std::move(a));
    }

private:
    void feed(counter_reply r) {
        count_down_fsm::action a;
        {
            std::lock_guard lock(mutex_);
            a = machine_.on(r);
        }
        run(std::move(a));
    }

    template <class... Values>
    completion<Values...> reply_to() {
        return completion<Values...>(typename completion<Values...>::inline_fn([self = shared_from_this()](error_code ec, Values... v) {
            counter_reply r;
            r.error = ec;
            if constexpr (sizeof...(Values) == 1) r.value = std::move(v...);
            self->feed(std::move(r));
        }));
    }

    void run(count_down_fsm::action a) {
        if (auto* d = std::get_if<counter_step::done>(&a.next)) return end(d->error, d->what);
        auto port = port_.lock();
        // Closed before this request is sent: nothing of it can land (an earlier try of a
        // transaction the machine gave up on is the machine's to report, as outcome_unknown).
        if (!port || port->closed()) return end(make_error_code(errc::client_closed), "the client closed");
        if (a.pause.count() > 0) {
            // A fresh timer per pause, touched only here and by its handler; the runtime it runs
            // on is kept while it waits.
            auto timer = std::make_shared<boost::asio::steady_timer>(port->threads()->session, a.pause);
            auto next = std::make_shared<count_down_fsm::action>(std::move(a));
            next->pause = {};
            timer->async_wait([timer, threads = port->threads(), next, self = shared_from_this()](boost::system::error_code) {
                self->run(std::move(*next));
            });
            return;
        }
        std::visit(
            [&](const auto& s) {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, counter_step::read>) port->get_data(s.path, false, reply_to<data_result>());
                else if constexpr (std::is_same_v<S, counter_step::create>) port->create(s.path, s.data, s.mode, reply_to<create_result>());
                else if constexpr (std::is_same_v<S, counter_step::write>) port->multi(s.ops, reply_to<std::vector<multi_op_result>>());
            },
            a.next);
    }

    void end(error_code ec, const std::string& what) {
        observed_.finish(ec);
        finish_(ec, what);
    }

    std::weak_ptr<session_port> port_;
    std::mutex mutex_;  // the machine; never held while sending
    count_down_fsm machine_;
    observed_operation observed_;
    finish_fn finish_;
};

// Starts one count-down on `port` (open); `finish` runs once, on whichever thread ends it.
void start_count_down_call(const std::shared_ptr<session_port>& port, const std::string& path, count_down_call::finish_fn finish) {
    observed_operation observed(*port, recipe_kind::count_down_latch, path, recipe_operation::count_down);
    std::make_shared<count_down_call>(port->weak_port(), path, std::move(observed), std::move(finish))->start();
}

// count_down_latch::count_down(): this driver, the calling thread waiting for its end.
void blocking_count_down(const std::shared_ptr<session_port>& port, const std::string& path) {
    sync_slot<std::string> slot;
    start_count_down_call(port, path, [&slot](error_code ec, const std::string& what) { slot.set(ec, what); });
    error_code ec;
    auto [what] = slot.wait(ec);
    if (ec) throw zkr::system_error(ec, what);
}
}  // namespace

void start_count_down(const std::weak_ptr<session_port>& port, const boost::asio::any_io_executor& executor, std::string path,
                      count_down_handler handler) {
    auto done = std::make_shared<completion<>>(std::move(handler), executor);
    auto p = port.lock();
    if (!p || p->closed()) return (*done)(make_error_code(errc::client_closed));
    start_count_down_call(p, path, [done](error_code ec, const std::string&) { (*done)(ec); });
}

}  // namespace zkr::detail

namespace zkr {

namespace b = detail::blocking;

namespace {
constexpr const char* released_name = "released";

std::int64_t decode_count(const std::string& path, const std::string& data) {
    // No data is no count (a counter reads it as 0, but a latch at 0 would have been released).
    auto value = data.empty() ? std::nullopt : detail::decode_big_endian<std::int64_t>(data);
    if (!value)
        throw zkr::system_error(make_error_code(errc::bad_arguments),
                                "zkr::count_down_latch: " + quoted_path(path) + " does not hold an 8-byte count (" +
                                    std::to_string(data.size()) + " bytes)");
    return *value;
}

// The op of a failed multi that failed (the others say runtime_inconsistency or ok).
std::size_t first_failed_op(const std::vector<multi_op_result>& results) {
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i].error && results[i].error != errc::runtime_inconsistency) return i;
    }
    return results.size();
}
}  // namespace

count_down_latch::count_down_latch(client& c, std::string path) : path_(std::move(path)) {
    detail::check_recipe_path(c, path_, "zkr::count_down_latch", "latch path");
    auto p = detail::port_of(c);
    if (p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::count_down_latch on a closed client");
    port_ = p->weak_port();
    executor_ = p->executor();
    released_ = join_path(path_, released_name);
}

count_down_latch::~count_down_latch() = default;

std::shared_ptr<detail::session_port> count_down_latch::port() const {
    auto p = port_.lock();
    if (!p || p->closed())
        throw zkr::system_error(make_error_code(errc::client_closed), "zkr::count_down_latch " + quoted_path(path_));
    return p;
}

bool count_down_latch::try_set_count(std::int64_t count) {
    if (count < 0)
        throw std::invalid_argument("zkr::count_down_latch::try_set_count: the count must not be negative (it is " +
                                    std::to_string(count) + ")");
    auto held = port();
    auto& p = *held;
    // A keyed child made with the count tells a resent transaction (node_exists) whether its
    // first try was the one that set it.
    std::string key = join_path(path_, "set-" + b::member_uuid());
    for (int tries = 0;; ++tries) {
        error_code ec;
        auto parent = parent_path(path_);
        if (parent != "/") b::create_containers(p, parent, ec);
        if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::try_set_count: creating the parents of " + quoted_path(path_));
        std::vector<multi_op> ops{op::create{path_, detail::encode_big_endian<std::int64_t>(count), create_mode::persistent},
                                  op::create{key, "", create_mode::persistent}};
        if (count == 0) ops.push_back(op::create{released_, "", create_mode::persistent});
        auto results = b::multi(p, std::move(ops), ec);
        if (!ec) return true;
        if (ec == errc::node_exists && first_failed_op(results) == 0) {
            error_code kec;
            auto mine = b::exists(p, key, false, kec);
            if (kec) throw zkr::system_error(kec, "zkr::count_down_latch::try_set_count: reading " + quoted_path(key));
            return mine.exists;
        }
        if (ec == errc::no_node && first_failed_op(results) == 0 && tries < 2) continue;  // a container parent reaped meanwhile
        if (may_have_been_applied(ec))
            throw zkr::system_error(make_error_code(errc::outcome_unknown),
                                    "zkr::count_down_latch::try_set_count " + quoted_path(path_) +
                                        " (the retry policy gave up resending it after: " + ec.message() + "; " + quoted_path(key) +
                                        " says whether it was applied)");
        throw zkr::system_error(ec, "zkr::count_down_latch::try_set_count " + quoted_path(path_));
    }
}

void count_down_latch::count_down() {
    // The async form's driver, this thread waiting for its end (never the client's threads).
    detail::blocking_count_down(port(), path_);
}

bool count_down_latch::wait(std::chrono::steady_clock::time_point deadline) {
    auto held = port();
    error_code ec;
    // Released once its "released" child exists, as the server says (its creation event, or a read).
    bool released = detail::wait_node(*held, released_, true, deadline, recipe_kind::count_down_latch, path_, ec);
    if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::wait " + quoted_path(path_));
    return released;
}

std::int64_t count_down_latch::count() const {
    auto held = port();
    error_code ec;
    auto r = b::get_data(*held, path_, ec);
    if (ec == errc::no_node) return 0;
    if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::count " + quoted_path(path_));
    return std::max<std::int64_t>(0, decode_count(path_, r.data));
}

void count_down_latch::remove() {
    auto held = port();
    auto& p = *held;
    for (int attempt = 0; attempt < 100; ++attempt) {
        error_code ec;
        auto children = b::get_children(p, path_, false, ec);
        if (ec == errc::no_node) return;
        if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::remove: listing " + quoted_path(path_));
        for (const auto& child : children.children) {
            b::remove(p, join_path(path_, child), any_version, ec);
            if (ec && ec != errc::no_node) throw zkr::system_error(ec, "zkr::count_down_latch::remove " + quoted_path(join_path(path_, child)));
        }
        b::remove(p, path_, any_version, ec);
        if (!ec || ec == errc::no_node) return;
        if (ec != errc::not_empty) throw zkr::system_error(ec, "zkr::count_down_latch::remove " + quoted_path(path_));
        // A count-down came in meanwhile: delete again.
    }
    throw zkr::system_error(make_error_code(errc::not_empty), "zkr::count_down_latch::remove " + quoted_path(path_) + ": count-downs keep coming");
}

}  // namespace zkr
