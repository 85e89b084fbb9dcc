#include "retry_timer.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <mutex>

namespace zkr::detail {
namespace asio = boost::asio;

struct retry_timer::state {
    std::shared_ptr<runtime> threads;
    std::mutex mutex;  // a leaf
    bool cancelled = false;
    std::shared_ptr<asio::steady_timer> timer;  // the one armed last; made and cancelled on the session thread
};

retry_timer::retry_timer(std::shared_ptr<runtime> threads) : state_(std::make_shared<state>()) {
    state_->threads = std::move(threads);
}

void retry_timer::arm(std::chrono::milliseconds delay, std::function<void()> fn) {
    asio::post(state_->threads->session, [s = state_, delay, fn = std::move(fn)]() mutable {
        auto timer = std::make_shared<asio::steady_timer>(s->threads->session);
        {
            std::lock_guard lock(s->mutex);
            if (s->cancelled) return;
            s->timer = timer;
        }
        timer->expires_after(delay);
        timer->async_wait([s, fn = std::move(fn)](boost::system::error_code ec) {
            {
                std::lock_guard lock(s->mutex);
                if (ec || s->cancelled) return;
            }
            fn();
        });
    });
}

void retry_timer::cancel() {
    std::shared_ptr<asio::steady_timer> timer;
    {
        std::lock_guard lock(state_->mutex);
        state_->cancelled = true;
        timer = std::move(state_->timer);
    }
    if (timer) asio::post(state_->threads->session, [timer] { timer->cancel(); });
}

}  // namespace zkr::detail
