// zkr::multi_lock: the parts are ordinary lock views (the lock engine's), taken one after the
// other in canonical order; nothing of its own on the server. The async form chains the parts'
// async_lock, each completing on the client's executor.
#include "zkr/multi_lock.hpp"

#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <mutex>
#include <stdexcept>

namespace zkr {
namespace {

const char* mode_name(lock_mode m) {
    switch (m) {
        case lock_mode::exclusive: return "exclusive";
        case lock_mode::read: return "read";
        case lock_mode::write: return "write";
    }
    return "?";
}

// Worse is larger: held < uncertain < lost.
int rank(lock_state s) {
    switch (s) {
        case lock_state::held: return 0;
        case lock_state::uncertain: return 1;
        case lock_state::lost: return 2;
        case lock_state::not_held: return 3;
    }
    return 3;
}

std::vector<lock_part> canonical(std::vector<lock_part> parts) {
    if (parts.empty()) throw std::invalid_argument("zkr::multi_lock: no lock paths given");
    // One order for every caller, whatever order each gives: by path.
    std::sort(parts.begin(), parts.end(), [](const lock_part& a, const lock_part& b) { return a.path < b.path; });
    for (std::size_t i = 1; i < parts.size(); ++i) {
        if (parts[i].path == parts[i - 1].path)
            throw std::invalid_argument("zkr::multi_lock: the lock path " + quoted_path(parts[i].path) +
                                        " is given twice (" + mode_name(parts[i - 1].mode) + ", " + mode_name(parts[i].mode) + ")");
    }
    return parts;
}

op::guard guard_of(std::vector<op::guard> parts) {
    op::guard all = std::move(parts.front());
    all.what = "multi-lock of " + std::to_string(parts.size()) + " locks (" + all.what;
    for (std::size_t i = 1; i < parts.size(); ++i) {
        all.also.push_back(std::move(parts[i].path));
        all.what += ", " + parts[i].what;
    }
    all.what += ")";
    return all;
}

}  // namespace

namespace detail {

struct multi_access {
    static multi_hold make(std::vector<lock_hold> holds) {
        multi_hold m;
        m.holds_ = std::move(holds);
        return m;
    }
};

namespace {

// The async acquisition: one part after the other; cancellation cancels the part in progress
// and releases the parts taken.
struct multi_acquisition : std::enable_shared_from_this<multi_acquisition> {
    // Built around the handler: Boost 1.81's any_completion_handler move-assignment recurses
    // (it re-wraps itself), so the handler is only ever move-constructed.
    explicit multi_acquisition(multi_handler h) : handler(std::move(h)) {}
    std::vector<lock_view> parts;
    std::vector<lock_hold> taken;
    multi_handler handler;
    boost::asio::any_io_executor executor;
    std::mutex mutex;
    boost::asio::cancellation_signal part_cancel;  // emitted on the client's executor only
    bool cancelled = false;

    void next() {
        if (taken.size() == parts.size()) return finish({});
        auto& part = parts[taken.size()];
        part.async_lock(boost::asio::bind_cancellation_slot(
            part_cancel.slot(), [self = shared_from_this()](error_code ec, lock_hold h) {
                bool stop;
                {
                    std::lock_guard lock(self->mutex);
                    stop = self->cancelled;
                }
                if (ec || stop) {
                    // Whatever was taken goes at once (the part just taken too, with `h`).
                    return self->finish(ec ? ec : make_error_code(errc::cancelled));
                }
                self->taken.push_back(std::move(h));
                self->next();
            }));
    }

    void finish(error_code ec) {
        if (ec) {
            for (auto it = taken.rbegin(); it != taken.rend(); ++it) it->unlock();
            taken.clear();
        }
        auto h = std::move(handler);
        auto hold = multi_access::make(std::move(taken));
        // We run on the client's executor (the parts' completions do): hand over from here.
        boost::asio::dispatch(executor, boost::asio::append(std::move(h), ec, std::move(hold)));
    }
};

}  // namespace

void start_multi_lock(std::vector<lock_view> parts, multi_handler handler) {
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<multi_acquisition>(std::move(handler));
    op->executor = parts.front().get_executor();
    op->parts = std::move(parts);
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<multi_acquisition>(op)](boost::asio::cancellation_type type) {
            auto op = weak.lock();
            if (!op) return;
            {
                std::lock_guard lock(op->mutex);
                op->cancelled = true;
            }
            boost::asio::post(op->executor, [op, type] { op->part_cancel.emit(type); });
        });
    }
    boost::asio::post(op->executor, [op] { op->next(); });
}

}  // namespace detail

// ---------------------------------------------------------------- multi_hold

void multi_hold::unlock() noexcept {
    for (auto it = holds_.rbegin(); it != holds_.rend(); ++it) it->unlock();
    holds_.clear();
}

lock_state multi_hold::state() const {
    if (holds_.empty()) return lock_state::not_held;
    lock_state worst = lock_state::held;
    for (const auto& h : holds_) {
        auto s = h.state();
        if (rank(s) > rank(worst)) worst = s;
    }
    return worst;
}

op::guard multi_hold::guard() const {
    if (holds_.empty()) throw zkr::system_error(make_error_code(errc::not_owner), "zkr::multi_hold: empty");
    std::vector<op::guard> parts;
    for (const auto& h : holds_) parts.push_back(h.guard());
    return guard_of(std::move(parts));
}

// ---------------------------------------------------------------- multi_lock

namespace {
std::vector<lock_part> mutexes_on(std::vector<std::string> paths) {
    std::vector<lock_part> parts;
    for (auto& p : paths) parts.push_back(lock_part{std::move(p), lock_mode::exclusive});
    return parts;
}
}  // namespace

multi_lock::multi_lock(client& c, std::vector<std::string> paths) : multi_lock(c, mutexes_on(std::move(paths))) {}

multi_lock::multi_lock(client& c, std::vector<lock_part> parts) : parts_(canonical(std::move(parts))) {
    for (const auto& part : parts_) {
        if (part.mode == lock_mode::exclusive) {
            mutexes_.push_back(std::make_unique<mutex>(c, part.path));
            views_.push_back(mutexes_.back().get());
        } else {
            shared_.push_back(std::make_unique<shared_mutex>(c, part.path));
            views_.push_back(part.mode == lock_mode::read ? &shared_.back()->read_lock() : &shared_.back()->write_lock());
        }
    }
}

multi_lock::~multi_lock() = default;

std::vector<lock_view> multi_lock::copies() const {
    std::vector<lock_view> out;
    for (auto* v : views_) out.push_back(*v);
    return out;
}

void multi_lock::lock() {
    take_all([](lock_view& part) {
        part.lock();  // throws on failure: what was taken is released
        return true;
    });
}

void multi_lock::held() { ++*generation_; }

bool multi_lock::try_lock() {
    return take_all([](lock_view& part) { return part.try_lock(); });
}

bool multi_lock::try_lock_until(std::chrono::steady_clock::time_point deadline) {
    // One deadline for all the parts.
    return take_all([deadline](lock_view& part) { return part.try_lock_until(deadline); });
}

bool multi_lock::take_all(const std::function<bool(lock_view&)>& take) {
    std::size_t taken = 0;
    try {
        for (; taken < views_.size(); ++taken) {
            if (!take(*views_[taken])) break;
        }
    } catch (...) {
        while (taken > 0) views_[--taken]->unlock();
        throw;
    }
    if (taken == views_.size()) {
        held();
        return true;
    }
    // Released at once: the deletes are sent, nothing is waited for.
    while (taken > 0) views_[--taken]->unlock();
    return false;
}

void multi_lock::unlock() noexcept {
    for (auto it = views_.rbegin(); it != views_.rend(); ++it) {
        if ((*it)->is_held_by_current_thread()) (*it)->unlock();
    }
}

lock_state multi_lock::state() const {
    lock_state worst = lock_state::held;
    for (auto* v : views_) {
        auto s = v->state();
        if (rank(s) > rank(worst)) worst = s;
    }
    return worst;
}

op::guard multi_lock::guard() const {
    std::vector<op::guard> parts;
    for (auto* v : views_) parts.push_back(v->guard());
    return guard_of(std::move(parts));
}

subscription multi_lock::on_lost(std::function<void()> fn) {
    if (!fn) throw std::invalid_argument("zkr::multi_lock::on_lost: the handler is empty");
    // Once per hold: the first part to go reports it; the others of that hold are the same news.
    struct once_per_hold {
        std::shared_ptr<std::atomic<std::uint64_t>> generation;
        std::atomic<std::uint64_t> reported{0};
        std::function<void()> fn;
    };
    auto shared = std::make_shared<once_per_hold>();
    shared->generation = generation_;
    shared->fn = std::move(fn);
    std::vector<subscription> subs;
    for (auto* v : views_) {
        subs.push_back(v->on_lost([shared](const std::string&) {
            auto now = shared->generation->load();
            if (shared->reported.exchange(now) != now) shared->fn();
        }));
    }
    auto all = std::make_shared<std::vector<subscription>>(std::move(subs));
    return subscription([all] { all->clear(); });
}

}  // namespace zkr
