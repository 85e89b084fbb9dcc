#include "observer_channel.hpp"

#include "zkr/log.hpp"

#include <pthread.h>

#include <thread>

namespace zkr::detail {

observer_channel::observer_channel(std::shared_ptr<zkr::observer> o, std::size_t capacity)
    : observer_(std::move(o)), ring_(capacity == 0 ? 1 : capacity) {
    for (auto& e : ring_) e.path.reserve(path_reserve);
}

std::shared_ptr<observer_channel> observer_channel::start(std::shared_ptr<zkr::observer> o, std::size_t capacity) {
    auto channel = std::make_shared<observer_channel>(std::move(o), capacity);
    std::thread([channel] {
        pthread_setname_np(pthread_self(), "zkr-observer");
        channel->run();
    }).detach();
    return channel;
}

observer_channel::~observer_channel() = default;

void observer_channel::stop() {
    std::unique_lock lock(mutex_);
    if (stopping_) return;  // waited for once already
    stopping_ = true;
    wake_.notify_all();
    if (drained_.wait_for(lock, stop_bound, [&] { return finished_; })) return;
    // A hook that blocks: its thread hands over what is left and ends whenever it returns.
    auto left = size_;
    lock.unlock();
    log::write(log::level::warning, "zkr: the observer did not return within " + std::to_string(stop_bound.count()) +
                                        " ms as its client closed; " + std::to_string(left) +
                                        " event(s) still queued reach it when it does");
}

std::uint64_t observer_channel::dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

template <class Fill>
void observer_channel::push(kind k, std::string_view path, Fill&& fill) {
    bool wake;
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || size_ == ring_.size()) {
            ++dropped_;  // neither queued nor handed over: flush() waits for neither
            ++dropped_unreported_;
            return;
        }
        event& e = ring_[(head_ + size_) % ring_.size()];
        e.k = k;
        e.path.assign(path);  // within the slot's capacity once the ring has gone round
        fill(e);
        ++size_;
        ++pushed_;
        wake = sleeping_ || size_ == ring_.size() / 2;
    }
    if (wake) wake_.notify_one();
}

void observer_channel::connection_state_changed(connection_state s, std::int64_t session) {
    push(kind::state, {}, [&](event& e) {
        e.detail = static_cast<std::uint8_t>(s);
        e.number = session;
    });
}

void observer_channel::session_expired(std::int64_t session, expiry_cause cause) {
    push(kind::expired, {}, [&](event& e) {
        e.detail = static_cast<std::uint8_t>(cause);
        e.number = session;
    });
}

void observer_channel::request_started(const request_info& r) {
    push(kind::request_started, r.path, [&](event& e) {
        e.id = r.id;
        e.sub = static_cast<std::uint8_t>(r.operation);
    });
}

void observer_channel::retry(const request_info& r, error_code cause, int attempt, std::chrono::nanoseconds backoff) {
    push(kind::retry, r.path, [&](event& e) {
        e.id = r.id;
        e.sub = static_cast<std::uint8_t>(r.operation);
        e.ec = cause;
        e.number = attempt;
        e.duration = backoff;
    });
}

void observer_channel::request_finished(const request_info& r, error_code result, std::chrono::nanoseconds duration) {
    push(kind::request_finished, r.path, [&](event& e) {
        e.id = r.id;
        e.sub = static_cast<std::uint8_t>(r.operation);
        e.ec = result;
        e.duration = duration;
    });
}

namespace {
template <class Event>
void fill_recipe(Event& e, const recipe_info& r) {
    e.id = r.id;
    e.sub = static_cast<std::uint8_t>(r.recipe);
}
}  // namespace

void observer_channel::acquire_started(const recipe_info& r) {
    push(kind::acquire_started, r.path, [&](event& e) { fill_recipe(e, r); });
}

void observer_channel::acquire_finished(const recipe_info& r, acquire_outcome o, std::chrono::nanoseconds wait) {
    push(kind::acquire_finished, r.path, [&](event& e) {
        fill_recipe(e, r);
        e.detail = static_cast<std::uint8_t>(o);
        e.duration = wait;
        e.number = static_cast<std::int64_t>(r.holds);
    });
}

void observer_channel::operation(const recipe_info& r, recipe_operation op, operation_outcome outcome,
                                 std::chrono::nanoseconds duration) {
    push(kind::operation, r.path, [&](event& e) {
        fill_recipe(e, r);
        e.detail = static_cast<std::uint8_t>(outcome);
        e.number = static_cast<std::int64_t>(op);
        e.duration = duration;
    });
}

void observer_channel::released(const recipe_info& r, std::chrono::nanoseconds held) {
    push(kind::released, r.path, [&](event& e) {
        fill_recipe(e, r);
        e.duration = held;
    });
}

void observer_channel::lost(const recipe_info& r, loss_reason why, std::chrono::nanoseconds held) {
    push(kind::lost, r.path, [&](event& e) {
        fill_recipe(e, r);
        e.detail = static_cast<std::uint8_t>(why);
        e.duration = held;
    });
}

void observer_channel::leadership(const recipe_info& r, bool leader) {
    push(kind::leadership, r.path, [&](event& e) {
        fill_recipe(e, r);
        e.detail = leader ? 1 : 0;
    });
}

void observer_channel::queue_depth(const recipe_info& r, std::size_t depth) {
    push(kind::queue_depth, r.path, [&](event& e) {
        fill_recipe(e, r);
        e.number = static_cast<std::int64_t>(depth);
    });
}

bool observer_channel::flush(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    auto target = pushed_;
    return drained_.wait_for(lock, timeout, [&] { return handed_ >= target; });
}

void observer_channel::run() {
    std::vector<event> batch(256);
    for (auto& e : batch) e.path.reserve(path_reserve);
    bool linger = false;  // the last take emptied the ring: gather what follows before waking again
    for (;;) {
        std::size_t n = 0;
        std::uint64_t dropped_now = 0;
        {
            std::unique_lock lock(mutex_);
            // Under load, one wake-up per linger period rather than one per event (a futex wake and
            // a context switch each): senders do not notify while we linger, unless the ring is
            // half full.
            if (linger) wake_.wait_for(lock, linger_period, [&] { return stopping_ || size_ >= ring_.size() / 2; });
            if (size_ == 0 && dropped_unreported_ == 0) {
                if (stopping_) {
                    finished_ = true;
                    drained_.notify_all();
                    return;
                }
                sleeping_ = true;
                wake_.wait(lock, [&] { return size_ > 0 || dropped_unreported_ > 0 || stopping_; });
                sleeping_ = false;
            }
            // Swapped, not copied: the slot keeps a path buffer to write into next time.
            while (size_ > 0 && n < batch.size()) {
                std::swap(batch[n++], ring_[head_]);
                head_ = (head_ + 1) % ring_.size();
                --size_;
            }
            linger = size_ == 0;
            dropped_now = std::exchange(dropped_unreported_, 0);
        }
        for (std::size_t i = 0; i < n; ++i) deliver(batch[i]);
        if (dropped_now > 0) {
            if (!std::exchange(drop_reported_, true))
                log::write(log::level::warning, "zkr: observer events dropped: the observer is too slow (its hooks must be quick; "
                                                "counted in on_events_dropped, reported once)");
            try {
                observer_->on_events_dropped(dropped_now);
            } catch (...) {
            }
        }
        {
            std::lock_guard lock(mutex_);
            handed_ += n;
        }
        drained_.notify_all();
    }
}

void observer_channel::deliver(const event& e) {
    try {
        auto& o = *observer_;
        request_info req{e.id, static_cast<zkr::operation>(e.sub), e.path};
        recipe_info rec{e.id, static_cast<recipe_kind>(e.sub), e.path,
                        e.k == kind::acquire_finished ? static_cast<std::size_t>(e.number) : 0};
        switch (e.k) {
            case kind::state: o.on_connection_state(static_cast<connection_state>(e.detail), e.number); break;
            case kind::expired: o.on_session_expiry(e.number, static_cast<expiry_cause>(e.detail)); break;
            case kind::request_started: o.on_request_started(req); break;
            case kind::retry: o.on_retry(req, e.ec, static_cast<int>(e.number), e.duration); break;
            case kind::request_finished: o.on_request_finished(req, e.ec, e.duration); break;
            case kind::acquire_started: o.on_acquire_started(rec); break;
            case kind::acquire_finished: o.on_acquire_finished(rec, static_cast<acquire_outcome>(e.detail), e.duration); break;
            case kind::released: o.on_released(rec, e.duration); break;
            case kind::lost: o.on_lost(rec, static_cast<loss_reason>(e.detail), e.duration); break;
            case kind::leadership: o.on_leadership(rec, e.detail != 0); break;
            case kind::queue_depth: o.on_queue_depth(rec, static_cast<std::size_t>(e.number)); break;
            case kind::operation:
                o.on_operation(rec, static_cast<recipe_operation>(e.number), static_cast<operation_outcome>(e.detail), e.duration);
                break;
        }
    } catch (const std::exception& ex) {
        if (!std::exchange(throw_reported_, true))
            log::write(log::level::error, std::string("zkr: an observer hook threw (ignored; reported once): ") + ex.what());
    } catch (...) {
        if (!std::exchange(throw_reported_, true))
            log::write(log::level::error, "zkr: an observer hook threw (ignored; reported once)");
    }
}

}  // namespace zkr::detail
