#include "watch_registry.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/system_executor.hpp>

namespace zkr::detail {
namespace asio = boost::asio;

void watch_state::finish(error_code ec, event_type type) {
    std::optional<watch_handler> handler;
    asio::any_io_executor work;
    sync_slot<watch_event>* slot = nullptr;
    std::function<void(error_code, const watch_event&)> inline_fn;
    watch_event ev;
    {
        std::lock_guard lock(mutex);
        if (done) return;
        done = true;
        error = ec;
        fired = type;
        ev = event_locked();
        if (user) {
            handler = std::exchange(user->waiter, std::nullopt);
            work = std::exchange(user->waiter_work, {});
            slot = std::exchange(user->sync_waiter, nullptr);
        }
        inline_fn = std::exchange(inline_waiter, {});
    }
    if (inline_fn) inline_fn(ec, ev);
    if (handler) post_handler(std::move(*handler), work, ec, std::move(ev));
    else if (slot) slot->set(ec, std::move(ev));
}

void watch_state::wait_inline(std::function<void(error_code, const watch_event&)> fn) {
    std::unique_lock lock(mutex);
    if (done) {
        error_code ec = error;
        watch_event ev = event_locked();
        lock.unlock();
        fn(ec, ev);
        return;
    }
    inline_waiter = std::move(fn);
}

void watch_state::clear_inline() {
    std::function<void(error_code, const watch_event&)> dropped;
    std::lock_guard lock(mutex);
    dropped = std::exchange(inline_waiter, {});
}

void watch_state::cancel_wait() {
    std::optional<watch_handler> handler;
    asio::any_io_executor work;
    {
        std::lock_guard lock(mutex);
        if (!user) return;
        handler = std::exchange(user->waiter, std::nullopt);
        work = std::exchange(user->waiter_work, {});
    }
    if (handler) post_handler(std::move(*handler), work, make_error_code(errc::cancelled), watch_event{});
}

namespace {

std::uint64_t watch_key(watch_kind kind, const std::string& path) {
    return std::hash<std::string>{}(path) * 31 + static_cast<std::uint64_t>(kind);
}

// A SetWatches request: header (xid, type), the relative zxid, three lists' lengths.
constexpr std::size_t set_watches_fixed = 8 + 8 + 3 * 4;

}  // namespace

std::shared_ptr<watch_state> watch_registry::add(std::shared_ptr<const watch_owner> owner, std::string path,
                                                 watch_kind kind, std::size_t max_request, std::size_t chroot) {
    auto key = watch_key(kind, path);
    std::size_t bytes = 4 + chroot + path.size();
    {
        std::lock_guard lock(mutex_);
        chroot_ = chroot;
        auto it = distinct_.find(key);
        if (it == distinct_.end() && set_watches_fixed + watched_bytes_ + bytes > max_request) return nullptr;
    }
    auto ws = std::make_shared<watch_state>();
    ws->owner = std::move(owner);
    ws->path = std::move(path);
    ws->kind = kind;
    std::lock_guard lock(mutex_);
    if (distinct_[key]++ == 0) watched_bytes_ += bytes;
    watches_.emplace(ws.get(), ws);
    return ws;
}

void watch_registry::uncount_locked(const watch_state& ws) {
    auto it = distinct_.find(watch_key(ws.kind, ws.path));
    if (it == distinct_.end()) return;
    if (--it->second == 0) {
        watched_bytes_ -= 4 + chroot_ + ws.path.size();
        distinct_.erase(it);
    }
}

std::size_t watch_registry::set_watches_size() {
    std::lock_guard lock(mutex_);
    return set_watches_fixed + watched_bytes_;
}

void watch_registry::forget(watch_state* ws) {
    std::shared_ptr<watch_state> released;  // destroyed outside the lock
    std::lock_guard lock(mutex_);
    if (auto it = watches_.find(ws); it != watches_.end()) {
        uncount_locked(*it->second);
        released = std::move(it->second);
        watches_.erase(it);
    }
}

std::vector<std::shared_ptr<watch_state>> watch_registry::sharing(const watch_state& ws) {
    std::vector<std::shared_ptr<watch_state>> out;
    std::lock_guard lock(mutex_);
    for (auto& [ptr, other] : watches_) {
        if (ptr != &ws && other->armed && other->kind == ws.kind && other->generation == ws.generation &&
            other->path == ws.path)
            out.push_back(other);
    }
    return out;
}

void watch_registry::end_sharing(const watch_state& ws, event_type type) {
    for (auto& other : sharing(ws)) {
        other->finish({}, type);
        forget(other.get());
    }
}

void watch_registry::end_stale(std::uint64_t current, bool all, error_code ec) {
    std::vector<std::shared_ptr<watch_state>> ended;
    {
        std::lock_guard lock(mutex_);
        for (auto it = watches_.begin(); it != watches_.end();) {
            // Watches not yet armed belong to a read in flight, which cleans up after itself.
            if (it->second->armed && (all || it->second->generation != current)) {
                uncount_locked(*it->second);
                ended.push_back(it->second);
                retired_.emplace(it->second->generation, std::move(it->second));
                it = watches_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& ws : ended) ws->finish(ec, event_type::changed);
}

void watch_registry::retire(watch_state* ws) {
    std::lock_guard lock(mutex_);
    if (auto it = watches_.find(ws); it != watches_.end()) {
        uncount_locked(*it->second);
        retired_.emplace(ws->generation, std::move(it->second));
        watches_.erase(it);
    }
}

void watch_registry::release_handle(std::uint64_t generation, error_code ec) {
    std::vector<std::shared_ptr<watch_state>> released;  // ended and destroyed outside the lock
    std::vector<std::shared_ptr<watch_state>> ended;
    {
        std::lock_guard lock(mutex_);
        auto [first, last] = retired_.equal_range(generation);
        for (auto it = first; it != last; ++it) released.push_back(std::move(it->second));
        retired_.erase(first, last);
        for (auto it = watches_.begin(); it != watches_.end();) {
            if (it->second->armed && it->second->generation == generation) {
                uncount_locked(*it->second);
                ended.push_back(std::move(it->second));
                it = watches_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& ws : ended) ws->finish(ec, event_type::changed);
}

std::size_t watch_registry::retired() {
    std::lock_guard lock(mutex_);
    return retired_.size();
}

void start_watch_wait(const std::shared_ptr<watch_state>& state, watch_handler handler) {
    if (!state) {
        return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::bad_arguments),
                            watch_event{});
    }
    std::unique_lock lock(state->mutex);
    asio::any_io_executor work = asio::prefer(state->owner->executor, asio::execution::outstanding_work.tracked);
    if (state->done) {
        zkr::error_code ec = state->error;
        watch_event ev = state->event_locked();
        lock.unlock();
        return post_handler(std::move(handler), work, ec, std::move(ev));
    }
    if (state->user_waits_locked()) {
        lock.unlock();  // one wait at a time
        return post_handler(std::move(handler), work, make_error_code(errc::bad_arguments), watch_event{});
    }
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<watch_state>(state)](asio::cancellation_type) {
            if (auto s = weak.lock()) s->cancel_wait();
        });
    }
    if (!state->user) state->user = std::make_unique<watch_user_wait>();
    state->user->waiter.emplace(std::move(handler));
    state->user->waiter_work = std::move(work);
}

asio::any_io_executor watch_executor(const std::shared_ptr<watch_state>& state) {
    return state ? state->owner->executor : asio::any_io_executor{};
}

std::size_t watch_registry::size() {
    std::lock_guard lock(mutex_);
    return watches_.size();
}

}  // namespace zkr::detail
