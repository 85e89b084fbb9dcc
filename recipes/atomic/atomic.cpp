// zkr::atomic_long, zkr::atomic_int, zkr::id_generator: thin faces of atomic_engine.
#include "zkr/atomic.hpp"

#include "atomic_engine.hpp"
#include "completion.hpp"
#include "zkr/id_generator.hpp"
#include "zkr/path.hpp"

#include <deque>
#include <functional>
#include <limits>
#include <stdexcept>

namespace zkr {

using detail::counter_change;

namespace {
template <class T>
atomic_result<T> narrow(const atomic_result<std::int64_t>& r) {
    return {r.succeeded, static_cast<T>(r.pre), static_cast<T>(r.post), r.attempts};
}
counter_change add_of(std::int64_t delta) { return {counter_change::kind::add, delta, 0}; }
counter_change cas_of(std::int64_t expected, std::int64_t value) { return {counter_change::kind::compare_and_set, expected, value}; }
constexpr counter_change read_change{counter_change::kind::read, 0, 0};

void force_set(detail::atomic_engine& e, std::int64_t value) {
    auto r = e.call({counter_change::kind::set, value, 0});
    if (!r.succeeded)
        throw zkr::system_error(make_error_code(errc::attempts_exhausted), std::string(e.who()) + ": setting " + quoted_path(e.path()) +
                                                                               ": lost to other writers " + std::to_string(r.attempts) + " times");
}
}  // namespace

namespace detail {

void start_counter_op(const std::shared_ptr<atomic_engine>& e, counter_change change, counter_handler<std::int64_t> handler) {
    auto done = std::make_shared<completion<atomic_result<std::int64_t>>>(std::move(handler), e->executor());
    e->run(change, [done](error_code ec, const std::string&, const atomic_result<std::int64_t>& r) { (*done)(ec, r); });
}

void start_counter_op(const std::shared_ptr<atomic_engine>& e, counter_change change, counter_handler<std::int32_t> handler) {
    auto done = std::make_shared<completion<atomic_result<std::int32_t>>>(std::move(handler), e->executor());
    e->run(change, [done](error_code ec, const std::string&, const atomic_result<std::int64_t>& r) {
        (*done)(ec, narrow<std::int32_t>(r));
    });
}

void start_counter_set(const std::shared_ptr<atomic_engine>& e, std::int64_t value, counter_set_handler handler) {
    auto done = std::make_shared<completion<>>(std::move(handler), e->executor());
    e->run({counter_change::kind::set, value, 0}, [done](error_code ec, const std::string&, const atomic_result<std::int64_t>& r) {
        (*done)(!ec && !r.succeeded ? make_error_code(errc::attempts_exhausted) : ec);
    });
}

boost::asio::any_io_executor counter_executor(const std::shared_ptr<atomic_engine>& e) { return e->executor(); }

}  // namespace detail

atomic_long::atomic_long(client& c, std::string path, atomic_options options)
    : counter_async_ops(std::make_shared<detail::atomic_engine>(c, std::move(path), 8, options, "zkr::atomic_long")) {}
atomic_long::~atomic_long() = default;
atomic_result<std::int64_t> atomic_long::get() { return engine_->call(read_change); }
atomic_result<std::int64_t> atomic_long::add(std::int64_t delta) { return engine_->call(add_of(delta)); }
atomic_result<std::int64_t> atomic_long::subtract(std::int64_t delta) { return engine_->call(add_of(detail::wrapping_negate(delta))); }
atomic_result<std::int64_t> atomic_long::compare_and_set(std::int64_t expected, std::int64_t value) {
    return engine_->call(cas_of(expected, value));
}
void atomic_long::force_set(std::int64_t value) { zkr::force_set(*engine_, value); }
const std::string& atomic_long::path() const noexcept { return engine_->path(); }

atomic_int::atomic_int(client& c, std::string path, atomic_options options)
    : counter_async_ops(std::make_shared<detail::atomic_engine>(c, std::move(path), 4, options, "zkr::atomic_int")) {}
atomic_int::~atomic_int() = default;
atomic_result<std::int32_t> atomic_int::get() { return narrow<std::int32_t>(engine_->call(read_change)); }
atomic_result<std::int32_t> atomic_int::add(std::int32_t delta) { return narrow<std::int32_t>(engine_->call(add_of(delta))); }
atomic_result<std::int32_t> atomic_int::subtract(std::int32_t delta) {
    return narrow<std::int32_t>(engine_->call(add_of(detail::wrapping_negate(delta))));
}
atomic_result<std::int32_t> atomic_int::compare_and_set(std::int32_t expected, std::int32_t value) {
    return narrow<std::int32_t>(engine_->call(cas_of(expected, value)));
}
void atomic_int::force_set(std::int32_t value) { zkr::force_set(*engine_, value); }
const std::string& atomic_int::path() const noexcept { return engine_->path(); }

// ---------------------------------------------------------------- id_generator

namespace {
std::int64_t checked_block(std::int64_t block_size) {
    if (block_size < 1)
        throw std::invalid_argument("zkr::id_generator: block_size must be at least 1 (it is " + std::to_string(block_size) + ")");
    return block_size;
}
}  // namespace

namespace detail {

// A generator's block and the callers waiting for the next one: one reservation at a time, its
// ids handed to the waiters in the order they asked. Kept alive by a reservation in flight, so
// that a generator may go before its async calls complete.
class id_blocks : public std::enable_shared_from_this<id_blocks> {
public:
    using take_fn = std::function<void(error_code, const std::string& what, std::int64_t id)>;

    id_blocks(std::shared_ptr<atomic_engine> counter, std::int64_t block_size)
        : counter_(std::move(counter)), block_size_(block_size) {}

    /// `done` runs once, with the next id or why there is none: on this thread when the block
    /// has one, else on the thread that ends the reservation (it must not block).
    void take(take_fn done) {
        {
            std::unique_lock lock(mutex_);
            if (next_ < end_) {
                auto id = next_++;
                lock.unlock();
                return done({}, {}, id);
            }
            waiting_.push_back(std::move(done));
            if (reserving_) return;
            reserving_ = true;
        }
        reserve();
    }

    std::int64_t reserved() const {
        std::lock_guard lock(mutex_);
        return end_ - next_;
    }
    const std::shared_ptr<atomic_engine>& counter() const noexcept { return counter_; }

private:
    void reserve() {
        // One exactly-once add reserves (pre, post]: nobody else is ever handed those ids. A
        // block that would pass the largest id is not reserved at all.
        counter_->run({counter_change::kind::reserve, block_size_, 0},
                      [self = shared_from_this()](error_code ec, const std::string& what, const atomic_result<std::int64_t>& r) {
                          self->reserved(ec, what, r);
                      });
    }

    void reserved(error_code ec, std::string what, const atomic_result<std::int64_t>& r) {
        if (!ec && !r.succeeded) {
            if (r.pre >= std::numeric_limits<std::int64_t>::max() - block_size_) {
                ec = make_error_code(errc::bad_arguments);
                what = "zkr::id_generator::next: " + quoted_path(counter_->path()) + " has run out of ids (it holds " +
                       std::to_string(r.pre) + ")";
            } else {
                ec = make_error_code(errc::attempts_exhausted);
                what = "zkr::id_generator::next: reserving a block of " + quoted_path(counter_->path()) + " lost to other writers " +
                       std::to_string(r.attempts) + " times";
            }
        }
        std::vector<std::pair<take_fn, std::int64_t>> served;
        bool again = false;
        {
            std::lock_guard lock(mutex_);
            if (!ec) {
                next_ = r.pre + 1;
                end_ = r.post + 1;
            }
            // A failed reservation fails every caller waiting for it (each would have tried it).
            while (!waiting_.empty() && (ec || next_ < end_)) {
                served.emplace_back(std::move(waiting_.front()), ec ? 0 : next_++);
                waiting_.pop_front();
            }
            again = reserving_ = !waiting_.empty();
        }
        for (auto& [done, id] : served) done(ec, what, id);
        if (again) reserve();
    }

    std::shared_ptr<atomic_engine> counter_;
    const std::int64_t block_size_;
    mutable std::mutex mutex_;  // a leaf
    std::int64_t next_ = 0, end_ = 0;  // [next_, end_) is ours
    bool reserving_ = false;
    std::deque<take_fn> waiting_;
};

void start_next_id(const std::shared_ptr<id_blocks>& blocks, id_handler handler) {
    auto done = std::make_shared<completion<std::int64_t>>(std::move(handler), blocks->counter()->executor());
    blocks->take([done](error_code ec, const std::string&, std::int64_t id) { (*done)(ec, id); });
}

boost::asio::any_io_executor id_executor(const std::shared_ptr<id_blocks>& blocks) { return blocks->counter()->executor(); }

}  // namespace detail

id_generator::id_generator(client& c, std::string path, std::int64_t block_size)
    : blocks_(std::make_shared<detail::id_blocks>(
          std::make_shared<detail::atomic_engine>(c, std::move(path), 8, atomic_options{}, "zkr::id_generator"),
          checked_block(block_size))) {}

id_generator::~id_generator() = default;

const std::string& id_generator::path() const noexcept { return blocks_->counter()->path(); }

std::int64_t id_generator::next() {
    detail::sync_slot<std::string, std::int64_t> slot;
    blocks_->take([&slot](error_code ec, const std::string& what, std::int64_t id) { slot.set(ec, what, id); });
    error_code ec;
    auto [what, id] = slot.wait(ec);
    if (ec) throw zkr::system_error(ec, what.empty() ? "zkr::id_generator::next " + quoted_path(path()) : what);
    return id;
}

std::int64_t id_generator::reserved() const { return blocks_->reserved(); }

}  // namespace zkr
