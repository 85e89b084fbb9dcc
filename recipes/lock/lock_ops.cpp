// The public locks' operations, on top of the lock engine.
#include "zkr/detail/lock_ops.hpp"

#include "lock_engine.hpp"
#include "toolkit/owner_data.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/lock_hold.hpp"
#include "zkr/log.hpp"
#include "zkr/mutex.hpp"
#include "zkr/path.hpp"
#include "zkr/shared_mutex.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/system_executor.hpp>

#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

struct hold_access {
    static lock_hold make(std::shared_ptr<lock_engine> e, std::shared_ptr<lock_claim> h) {
        return lock_hold(std::move(e), std::move(h));
    }
};

namespace {

queue_kind kind_of(const lock_target& t, bool write) {
    if (!t.read_write) return queue_kind::exclusive;
    return write ? queue_kind::write : queue_kind::read;
}

recipe_kind recipe_of(const lock_target& t, bool write) {
    if (!t.read_write) return recipe_kind::mutex;
    return write ? recipe_kind::write_lock : recipe_kind::read_lock;
}

std::shared_ptr<lock_claim> my_hold(const lock_target& t, bool write) {
    return t.engine->find(t.path, kind_of(t, write), current_thread_owner());
}

// What an acquisition needs to know; a refused upgrade comes back in `refused`.
queue_options options_for(const lock_target& t, bool write, bool wait, bool async, error_code& refused) {
    queue_options o;
    o.path = t.path;
    o.kind = kind_of(t, write);
    o.data = current_owner_data(async);
    o.wait = wait;
    if (t.read_write && !async) {
        auto me = current_thread_owner();
        auto read = t.engine->find(t.path, queue_kind::read, me);
        auto own_write = t.engine->find(t.path, queue_kind::write, me);
        bool write_live = own_write && t.engine->state_of(*own_write) != lock_state::lost;
        if (write && read && !own_write && t.engine->state_of(*read) != lock_state::lost) {
            // Our own read node would block our write node forever (Curator and kazoo hang here).
            refused = make_error_code(errc::upgrade_refused);
        }
        if (!write && write_live) {
            // Downgrade: our own write node must not block our read node — a live one only, and
            // the machine checks once more that it is of the session our read node is made on.
            o.own_write_node = std::string(zkr::node_name(own_write->node_path));
            o.own_write_session = own_write->session;
        }
    }
    return o;
}

[[noreturn]] void throw_for(const lock_target& t, error_code ec, const char* what) {
    throw zkr::system_error(ec, std::string("zkr: ") + what + " " + quoted_path(t.path));
}

}  // namespace

lock_target make_lock_target(client& c, std::string path, bool read_write, const char* who) {
    check_recipe_path(c, path, who, "lock path");
    return {lock_engine::of(*port_of(c)), std::move(path), read_write};
}

bool acquire(const lock_target& t, bool write, bool wait, std::optional<std::chrono::steady_clock::time_point> deadline,
             error_code* ec_out) {
    auto fail = [&](error_code ec) {
        if (!ec_out) throw_for(t, ec, "acquiring the lock");
        *ec_out = ec;
        return false;
    };
    if (ec_out) ec_out->clear();
    if (auto h = my_hold(t, write)) {
        if (auto ec = t.engine->reenter(*h)) return fail(ec);
        return true;
    }
    auto c = t.engine->client();
    if (!c || c->closed()) return fail(make_error_code(errc::client_closed));
    bool timed = deadline.has_value() || !wait;
    if (deadline && *deadline <= std::chrono::steady_clock::now()) {
        // A deadline already past is a try (the standard's try_lock_for(0)).
        wait = false;
        deadline.reset();
    }
    if (!wait) {
        // A try does not wait out an outage: a client that had a connection and has none now
        // answers "not acquired" at once. (A new client's first connection is waited for.)
        if (c->session_count() > 0 && !c->is_connected()) {
            if (ec_out) *ec_out = make_error_code(errc::connection_loss);
            return false;
        }
        deadline = std::chrono::steady_clock::now() + c->session_timeout();  // and it is bounded
    }
    error_code refused;
    auto options = options_for(t, write, wait, false, refused);
    if (refused) {
        if (ec_out) return fail(refused);
        throw zkr::system_error(refused, "zkr::shared_mutex " + quoted_path(t.path) +
                                             "\": release the read lock before taking the write lock");
    }
    sync_slot<std::shared_ptr<lock_claim>> slot;
    t.engine->acquire(std::move(options), current_thread_owner(), false, deadline,
                      [&slot](error_code ec, std::shared_ptr<lock_claim> h) { slot.set(ec, std::move(h)); },
                      recipe_of(t, write));
    error_code ec;
    auto [h] = slot.wait(ec);
    if (h) return true;
    if (!ec) return false;  // a try found the lock taken
    if (timed && is_connection_trouble(ec)) {
        if (ec_out) *ec_out = ec;
        return false;
    }
    return fail(ec);
}

void start_acquire(const lock_target& t, bool write, hold_handler handler) {
    auto c = t.engine->client();
    if (!c || c->closed()) {
        // The client's executor may be gone with it: the handler's own, else the system's.
        return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::client_closed), lock_hold{});
    }
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto done = std::make_shared<completion<lock_hold>>(std::move(handler), t.engine->executor());
    error_code refused;
    auto options = options_for(t, write, true, true, refused);
    auto engine = t.engine;
    auto a = t.engine->acquire(std::move(options), new_async_owner(), true, std::nullopt,
                               [done, engine](error_code ec, std::shared_ptr<lock_claim> h) {
                                   (*done)(ec, h ? hold_access::make(engine, std::move(h)) : lock_hold{});
                               },
                               recipe_of(t, write));
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<lock_engine::runner>(a)](asio::cancellation_type) { lock_engine::cancel(weak.lock()); });
    }
}

bool unlock(const lock_target& t, bool write) noexcept {
    try {
        if (auto ec = t.engine->release(t.path, kind_of(t, write), current_thread_owner())) {
            t.engine->count_unowned_unlock();
            log::write(log::level::error, "zkr: unlock of " + quoted_path(t.path) + " by a thread that holds nothing there: " +
                                              ec.message() + " (ignored; a bug of the caller's)");
            return false;
        }
    } catch (...) {
        // unlock() must not throw; the only throwing parts are allocations for the log line.
    }
    return true;
}

error_code release(const lock_target& t, bool write) {
    return t.engine->release(t.path, kind_of(t, write), current_thread_owner());
}

int hold_count(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    return h ? t.engine->hold_count(*h) : 0;
}

lock_state state(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    return h ? t.engine->state_of(*h) : lock_state::not_held;
}

std::chrono::steady_clock::time_point valid_until(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    return h ? t.engine->valid_until(*h) : std::chrono::steady_clock::time_point{};
}

std::int64_t fencing_token(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    if (!h) throw_for(t, make_error_code(errc::not_owner), "fencing token of");
    return h->czxid;
}

namespace {
op::guard guard_for(const lock_claim& h) {
    const char* side = h.kind == queue_kind::read ? "read lock " : h.kind == queue_kind::write ? "write lock " : "lock ";
    return op::guard{h.node_path, side + h.group};
}
}  // namespace

op::guard guard(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    if (!h) throw_for(t, make_error_code(errc::not_owner), "guard of");
    return guard_for(*h);
}

op::guard hold_guard(const hold& h) { return guard_for(static_cast<const lock_claim&>(h)); }

std::string node_path(const lock_target& t, bool write) {
    auto h = my_hold(t, write);
    if (!h) throw_for(t, make_error_code(errc::not_owner), "lock node of");
    return h->node_path;
}

bool acquired_in_process(const lock_target& t) { return t.engine->any_hold(t.path); }

std::vector<participant> participants(const lock_target& t) { return t.engine->participants(t.path, t.read_write); }

subscription on_lost(const lock_target& t, std::function<void(const std::string&)> fn) {
    if (!fn) throw std::invalid_argument("zkr: on_lost: the handler is empty");
    return t.engine->on_lost(t.path, std::move(fn));
}

void start_wait_lost(const lock_target& t, bool write, void_lock_handler handler) {
    auto h = my_hold(t, write);
    if (!h) return post_handler(std::move(handler), t.engine->executor(), make_error_code(errc::not_owner));
    auto slot = asio::get_associated_cancellation_slot(handler);
    t.engine->wait_lost(h, completion<>(std::move(handler), t.engine->executor()), slot);
}

lock_statistics statistics(const lock_target& t) { return t.engine->statistics(); }

asio::any_io_executor executor(const lock_target& t) { return t.engine->executor(); }

// ---------------------------------------------------------------- lock_hold

void release_hold(const std::shared_ptr<lock_engine>& e, const std::shared_ptr<hold>& h) noexcept {
    try {
        e->release_all(std::static_pointer_cast<lock_claim>(h), std::nullopt);
    } catch (...) {
        // Only allocations can throw here; the node then goes with its session.
    }
}

void start_release_hold(const std::shared_ptr<lock_engine>& e, const std::shared_ptr<hold>& h, void_lock_handler handler) {
    if (!e || !h) return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::not_owner));
    e->release_all(std::static_pointer_cast<lock_claim>(h), completion<>(std::move(handler), e->executor()));
}

void start_hold_wait_lost(const std::shared_ptr<lock_engine>& e, const std::shared_ptr<hold>& h, void_lock_handler handler) {
    if (!e || !h) return post_handler(std::move(handler), asio::system_executor(), make_error_code(errc::not_owner));
    auto slot = asio::get_associated_cancellation_slot(handler);
    e->wait_lost(h, completion<>(std::move(handler), e->executor()), slot);
}

lock_state hold_state(const lock_engine& e, const hold& h) { return e.state_of(h); }
std::chrono::steady_clock::time_point hold_valid_until(const lock_engine& e, const hold& h) { return e.valid_until(h); }
std::int64_t hold_fencing_token(const hold& h) noexcept { return h.czxid; }
const std::string& hold_node_path(const hold& h) noexcept { return h.node_path; }
const std::string& hold_lock_path(const hold& h) noexcept { return h.group; }
bool hold_is_shared(const hold& h) noexcept { return static_cast<const lock_claim&>(h).kind == queue_kind::read; }
asio::any_io_executor engine_executor(const lock_engine& e) { return e.executor(); }

}  // namespace zkr::detail

namespace zkr {

mutex::mutex(client& c, std::string path)
    : lock_view(detail::make_lock_target(c, std::move(path), false, "zkr::mutex"), true) {}

shared_mutex::shared_mutex(client& c, std::string path)
    : write_(detail::make_lock_target(c, std::move(path), true, "zkr::shared_mutex"), true),
      read_(write_.target_, false) {}

void lock_view::release() {
    if (auto ec = detail::release(target_, write_)) throw zkr::system_error(ec, "zkr: release of \"" + target_.path + "\"");
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
