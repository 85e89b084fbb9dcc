// The public locks' operations, on top of the lock engine.
#include "zkr/detail/lock_ops.hpp"

#include "lock_engine.hpp"
#include "owner_data.hpp"
#include "zkr/log.hpp"
#include "zkr/mutex.hpp"
#include "zkr/shared_mutex.hpp"
#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>

#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

namespace {

lock_kind kind_of(const lock_target& t, bool write) {
    if (!t.read_write) return lock_kind::exclusive;
    return write ? lock_kind::write : lock_kind::read;
}

std::shared_ptr<hold> my_hold(const lock_target& t, bool write) {
    return t.engine->find(t.path, kind_of(t, write), std::this_thread::get_id());
}

// What an acquisition for the calling thread needs to know; throws for a refused upgrade.
acquire_options options_for(const lock_target& t, bool write, bool wait) {
    acquire_options o;
    o.lock_path = t.path;
    o.kind = kind_of(t, write);
    o.owner_data = current_owner_data();
    o.wait = wait;
    if (t.read_write) {
        auto me = std::this_thread::get_id();
        if (write && t.engine->find(t.path, lock_kind::read, me) && !t.engine->find(t.path, lock_kind::write, me)) {
            // Our own read node would block our write node forever (Curator and kazoo hang here).
            throw zkr::system_error(make_error_code(errc::upgrade_refused),
                                    "zkr::shared_mutex \"" + t.path + "\": release the read lock before taking the write lock");
        }
        if (!write) {
            // Downgrade: our own write node must not block our read node.
            if (auto w = t.engine->find(t.path, lock_kind::write, me)) o.ignore = std::string(zkr::node_name(w->node_path));
        }
    }
    return o;
}

}  // namespace

lock_target make_lock_target(client& c, std::string path, bool read_write, const char* who) {
    if (std::string problem = path_problem(path); !problem.empty())
        throw std::invalid_argument(std::string(who) + ": invalid lock path \"" + path + "\": " + problem);
    if (path == "/") throw std::invalid_argument(std::string(who) + ": the lock path must not be the root \"/\"");
    return {lock_engine::of(c.impl()), std::move(path), read_write};
}

bool acquire(const lock_target& t, bool write, bool wait, std::optional<std::chrono::steady_clock::time_point> deadline) {
    if (auto h = my_hold(t, write)) {
        if (auto ec = t.engine->reenter(*h)) throw zkr::system_error(ec, "zkr: re-entering the lock \"" + t.path + "\"");
        return true;
    }
    if (deadline && *deadline <= std::chrono::steady_clock::now()) {
        // A deadline already past is a try (the standard's try_lock_for(0)).
        wait = false;
        deadline.reset();
    }
    sync_slot<std::shared_ptr<hold>> slot;
    t.engine->acquire(options_for(t, write, wait), std::this_thread::get_id(), deadline,
                      [&slot](zkr::error_code ec, std::shared_ptr<hold> h) { slot.set(ec, std::move(h)); });
    zkr::error_code ec;
    auto [h] = slot.wait(ec);
    if (h) return true;
    if (!ec || ec == errc::timed_out) return false;
    throw zkr::system_error(ec, "zkr: acquiring the lock \"" + t.path + "\"");
}

void start_acquire(const lock_target& t, bool write, asio::any_completion_handler<void(error_code)> handler) {
    auto executor = t.engine->client().executor();
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto done = std::make_shared<completion<>>(std::move(handler), executor);
    if (auto h = my_hold(t, write)) {
        return (*done)(t.engine->reenter(*h));
    }
    acquire_options options;
    try {
        options = options_for(t, write, true);
    } catch (const zkr::system_error& e) {
        return (*done)(e.code());
    }
    auto a = t.engine->acquire(std::move(options), std::this_thread::get_id(), std::nullopt,
                               [done](zkr::error_code ec, std::shared_ptr<hold>) { (*done)(ec); });
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<lock_engine::acquisition>(a)](asio::cancellation_type) {
            lock_engine::cancel(weak.lock());
        });
    }
}

zkr::error_code release(const lock_target& t, bool write) {
    return t.engine->release(t.path, kind_of(t, write), std::this_thread::get_id());
}

int hold_count(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    return h ? t.engine->hold_count(*h) : 0;
}

lock_state state(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    return h ? t.engine->state_of(*h) : lock_state::not_held;
}

std::int64_t fencing_token(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    if (!h) throw zkr::system_error(make_error_code(errc::not_owner), "zkr: fencing token of \"" + t.path + "\"");
    return h->czxid;
}

std::string node_path(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    if (!h) throw zkr::system_error(make_error_code(errc::not_owner), "zkr: lock node of \"" + t.path + "\"");
    return h->node_path;
}

bool acquired_in_process(const lock_target& t) { return t.engine->any_hold(t.path); }

std::vector<participant> participants(const lock_target& t) { return t.engine->participants(t.path, t.read_write); }

subscription on_lost(const lock_target& t, std::function<void(const std::string&)> fn) {
    if (!fn) throw std::invalid_argument("zkr: on_lost: the handler is empty");
    return t.engine->on_lost(t.path, std::move(fn));
}

void start_wait_lost(const lock_target& t, bool write, asio::any_completion_handler<void(error_code)> handler) {
    auto executor = t.engine->client().executor();
    auto h = my_hold(t, write);
    completion<> done(std::move(handler), executor);
    if (!h) return done(make_error_code(errc::not_owner));
    t.engine->wait_lost(h, completion<>([d = std::make_shared<completion<>>(std::move(done))](zkr::error_code ec) {
        (*d)(ec);
    }));
}

lock_statistics statistics(const lock_target& t) { return t.engine->statistics(); }

}  // namespace zkr::detail

namespace zkr {

mutex::mutex(client& c, std::string path)
    : lock_view(detail::make_lock_target(c, std::move(path), false, "zkr::mutex"), true) {}

shared_mutex::shared_mutex(client& c, std::string path)
    : write_(detail::make_lock_target(c, std::move(path), true, "zkr::shared_mutex"), true),
      read_(write_.target_, false) {}

void lock_view::unlock() noexcept {
    try {
        if (auto ec = detail::release(target_, write_))
            log::write(log::level::warning, "zkr: unlock of \"" + target_.path + "\": " + ec.message());
    } catch (...) {
        // unlock() must not throw; the only throwing parts are allocations for the log line.
    }
}

void lock_view::release() {
    if (auto ec = detail::release(target_, write_))
        throw zkr::system_error(ec, "zkr: release of \"" + target_.path + "\"");
}

const char* to_string(lock_state s) noexcept {
    switch (s) {
        case lock_state::not_held: return "not_held";
        case lock_state::held: return "held";
        case lock_state::uncertain: return "uncertain";
        case lock_state::lost: return "lost";
    }
    return "?";
}

}  // namespace zkr
