// zkr::shared_count: one persistent node holding a 4-byte big-endian int (Curator's SharedCount),
// read with a data watch that is set again each time it fires, and read again after every new
// session or reconnection. One read at a time; an event during a read asks for one more.
#include "zkr/shared_count.hpp"

#include "count_impl.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/log.hpp"
#include "zkr/path.hpp"

#include <boost/asio/post.hpp>

#include <stdexcept>

namespace zkr::detail {
namespace asio = boost::asio;

std::string encode_count(std::int32_t value) {
    auto u = static_cast<std::uint32_t>(value);
    return {static_cast<char>(u >> 24), static_cast<char>(u >> 16), static_cast<char>(u >> 8), static_cast<char>(u)};
}

std::optional<std::int32_t> decode_count(std::string_view data) {
    if (data.size() != 4) return std::nullopt;
    std::uint32_t u = 0;
    for (unsigned char c : data) u = (u << 8) | c;
    return static_cast<std::int32_t>(u);
}

count_impl::count_impl(session_port& port, std::string path)
    : port_(port.weak_port()), strand_(asio::make_strand(port.executor())), path_(std::move(path)) {}

void count_impl::start(session_port& port, std::int32_t seed) {
    // Made with the seed if missing (its parents as containers, as Curator does), then read.
    sync_slot<> parents;
    port.create_parents(parent_path(path_), create_mode::container, completion<>(&parents));
    error_code ec;
    parents.wait(ec);
    if (ec) throw zkr::system_error(ec, "zkr::shared_count: creating the parents of " + quoted_path(path_));
    sync_slot<create_result> made;
    port.create(path_, encode_count(seed), create_mode::persistent, completion<create_result>(&made));
    made.wait(ec);
    if (ec && ec != errc::node_exists) throw zkr::system_error(ec, "zkr::shared_count: creating " + quoted_path(path_));
    sync_slot<data_result> first;
    port.get_data(path_, false, completion<data_result>(&first));
    auto [r] = first.wait(ec);
    if (ec) throw zkr::system_error(ec, "zkr::shared_count: reading " + quoted_path(path_));
    auto value = decode_count(r.data);
    if (!value)
        throw zkr::system_error(make_error_code(errc::bad_arguments),
                                "zkr::shared_count: " + quoted_path(path_) + " does not hold a 4-byte count (" +
                                    std::to_string(r.data.size()) + " bytes)");
    {
        std::lock_guard lock(mutex_);
        value_ = *value;
        version_ = r.stat.version;
    }
    std::weak_ptr<count_impl> weak = weak_from_this();
    session_subscription_ = port.on_session_event([weak](const session_event& ev) {
        if (ev.state == connection_state::connected || ev.state == connection_state::reconnected) {
            if (auto self = weak.lock()) self->read();
        }
    });
    read();
}

std::int32_t count_impl::get() const {
    std::lock_guard lock(mutex_);
    return value_;
}

versioned_count count_impl::snapshot() const {
    std::lock_guard lock(mutex_);
    return versioned_count{value_, version_};
}

std::int32_t count_impl::version() const {
    std::lock_guard lock(mutex_);
    return version_;
}

void count_impl::read() {
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        if (reading_) {
            read_again_ = true;
            return;
        }
        reading_ = true;
        read_again_ = false;
    }
    auto port = port_.lock();
    if (!port) return;
    std::weak_ptr<count_impl> weak = weak_from_this();
    port->get_data(path_, true, completion<data_result>(completion<data_result>::inline_fn([weak](error_code ec, data_result r) {
                       if (auto self = weak.lock()) self->on_read(ec, std::move(r));
                   })));
}

void count_impl::on_read(error_code ec, data_result r) {
    if (!ec) {
        if (auto value = decode_count(r.data)) update(*value, r.stat.version);
        else log::write(log::level::warning, "zkr::shared_count " + quoted_path(path_) + ": the node does not hold a 4-byte count");
        if (auto ws = watch_access::state(r.watch)) {
            ws->wait_inline([weak = weak_from_this()](error_code wec, const watch_event&) {
                auto self = weak.lock();
                if (!self || wec == errc::client_closed || wec == errc::session_expired) return;  // a session event reads again
                self->read();
            });
        }
    }
    bool again;
    {
        std::lock_guard lock(mutex_);
        reading_ = false;
        again = read_again_;
    }
    if (again) read();
}

void count_impl::update(std::int32_t value, std::int32_t version) {
    std::vector<std::function<void(std::int32_t)>> inline_calls;
    std::vector<std::shared_ptr<listener>> calls;
    {
        std::lock_guard lock(mutex_);
        // A read may answer after a newer one (versions only grow): keep the newest.
        if (version < version_) return;
        bool changed = value != value_;
        value_ = value;
        version_ = version;
        if (!changed) return;
        for (auto& [key, fn] : internal_) inline_calls.push_back(fn);
        for (auto& [key, l] : listeners_) calls.push_back(l);
    }
    for (auto& fn : inline_calls) fn(value);
    if (calls.empty()) return;
    asio::post(strand_, [calls = std::move(calls), value, path = path_] {
        for (auto& l : calls) {
            if (!l->active) continue;
            try {
                l->fn(value);
            } catch (const std::exception& e) {
                log::write(log::level::error, "zkr::shared_count " + quoted_path(path) + ": a listener threw: " + e.what());
            }
        }
    });
}

error_code count_impl::write(std::int32_t value, std::int32_t version) {
    auto port = port_.lock();
    if (!port) return make_error_code(errc::client_closed);
    sync_slot<zkr::stat> slot;
    port->set_data(path_, encode_count(value), version, completion<zkr::stat>(&slot));
    error_code ec;
    auto [st] = slot.wait(ec);
    if (!ec) update(value, st.version);
    return ec;
}

subscription count_impl::listen(std::function<void(std::int32_t)> fn) {
    if (!fn) throw std::invalid_argument("zkr::shared_count::on_change: the listener is empty");
    auto l = std::make_shared<listener>();
    l->fn = std::move(fn);
    std::uint64_t key;
    {
        std::lock_guard lock(mutex_);
        key = ++next_key_;
        listeners_.emplace(key, l);
    }
    return subscription([weak = weak_from_this(), l, key] {
        l->active = false;
        if (auto self = weak.lock()) {
            std::lock_guard lock(self->mutex_);
            self->listeners_.erase(key);
        }
    });
}

subscription count_impl::listen_inline(std::function<void(std::int32_t)> fn) {
    std::uint64_t key;
    {
        std::lock_guard lock(mutex_);
        key = ++next_key_;
        internal_.emplace(key, std::move(fn));
    }
    return subscription([weak = weak_from_this(), key] {
        if (auto self = weak.lock()) {
            std::lock_guard lock(self->mutex_);
            self->internal_.erase(key);
        }
    });
}

void count_impl::close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
}

}  // namespace zkr::detail

namespace zkr {

shared_count::shared_count(client& c, std::string path, std::int32_t seed) {
    detail::check_recipe_path(c, path, "zkr::shared_count", "path");
    auto port = detail::port_of(c);
    if (port->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::shared_count on a closed client");
    impl_ = std::make_shared<detail::count_impl>(*port, std::move(path));
    impl_->start(*port, seed);
}

shared_count::~shared_count() { impl_->close(); }

std::int32_t shared_count::get() const { return impl_->get(); }

void shared_count::set(std::int32_t value) {
    if (auto ec = impl_->write(value, any_version)) throw zkr::system_error(ec, "zkr::shared_count::set " + quoted_path(path()));
}

bool shared_count::try_set(std::int32_t value) {
    auto ec = impl_->write(value, impl_->version());
    if (ec == errc::bad_version) {
        impl_->read();
        return false;
    }
    if (ec) throw zkr::system_error(ec, "zkr::shared_count::try_set " + quoted_path(path()));
    return true;
}

versioned_count shared_count::get_versioned() const { return impl_->snapshot(); }

bool shared_count::try_set(const versioned_count& previous, std::int32_t value) {
    if (previous.version < 0) throw std::invalid_argument("zkr::shared_count::try_set: the previous value has no version (read it with get_versioned())");
    auto ec = impl_->write(value, previous.version);
    if (ec == errc::bad_version) {
        impl_->read();
        return false;
    }
    if (ec) throw zkr::system_error(ec, "zkr::shared_count::try_set " + quoted_path(path()));
    return true;
}

subscription shared_count::on_change(std::function<void(std::int32_t)> fn) { return impl_->listen(std::move(fn)); }

const std::string& shared_count::path() const noexcept { return impl_->path(); }

}  // namespace zkr
