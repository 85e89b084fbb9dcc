#include "hold_monitor.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

namespace zkr::detail {
namespace asio = boost::asio;

hold_monitor::hold_monitor(session_port& port, std::shared_ptr<hold_registry> holds, std::function<lock_state()> on_change)
    : port_(port.weak_port()),
      threads_(port.threads()),
      holds_(std::move(holds)),
      on_change_(std::move(on_change)),
      lease_timer_(threads_->session) {}

void hold_monitor::attach(session_port& port) {
    std::weak_ptr<hold_monitor> weak = weak_from_this();
    session_subscription_ = port.on_session_event([weak](const session_event&) {
        if (auto self = weak.lock()) self->changed();
    });
}

void hold_monitor::monitor(std::shared_ptr<hold> h) {
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return;
        hold_ = std::move(h);
    }
    changed();
}

void hold_monitor::stop() {
    {
        std::lock_guard lock(mutex_);
        stopped_ = true;
        hold_.reset();
    }
    session_subscription_.reset();
    asio::post(threads_->session, [self = shared_from_this()] { self->lease_timer_.cancel(); });
}

lock_state hold_monitor::state() const {
    std::shared_ptr<hold> h;
    {
        std::lock_guard lock(mutex_);
        h = hold_;
    }
    return h ? holds_->state_of(*h) : lock_state::not_held;
}

void hold_monitor::changed() {
    std::shared_ptr<hold> h;
    {
        std::lock_guard lock(mutex_);
        if (stopped_) return;
        h = hold_;
    }
    const auto acted_on = on_change_();
    if (!h) return;
    // While it is uncertain — as the recipe read it, or as it is now — look again every tenth of
    // a session timeout (its lease may come back with no event); while it is held, when its lease
    // ends. (The recipe may have read nothing: a term not yet public reads not_held.)
    const auto now = holds_->state_of(*h);
    if (acted_on == lock_state::uncertain || now == lock_state::uncertain) {
        auto port = port_.lock();
        auto every = port ? std::max(port->session_timeout() / 10, std::chrono::milliseconds(20)) : std::chrono::milliseconds(100);
        arm(std::chrono::steady_clock::now() + every);
    } else if (now == lock_state::held) {
        arm(holds_->valid_until(*h));
    }
}

void hold_monitor::arm(std::chrono::steady_clock::time_point until) {
    asio::post(threads_->session, [weak = weak_from_this(), until] {
        auto self = weak.lock();
        if (!self) return;
        self->lease_timer_.expires_at(until + std::chrono::milliseconds(1));
        self->lease_timer_.async_wait([weak](error_code ec) {
            if (auto self = weak.lock(); self && !ec) self->changed();
        });
    });
}

}  // namespace zkr::detail
