// zkr::atomic_long, zkr::atomic_int, zkr::id_generator: thin faces of atomic_engine.
#include "zkr/atomic.hpp"

#include "atomic_engine.hpp"
#include "zkr/id_generator.hpp"
#include "zkr/path.hpp"

#include <limits>
#include <stdexcept>

namespace zkr {

namespace {
template <class T>
atomic_result<T> narrow(const atomic_result<std::int64_t>& r) {
    return {r.succeeded, static_cast<T>(r.pre), static_cast<T>(r.post), r.attempts};
}
// Two's-complement wrapping without signed overflow.
std::int64_t plus(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t minus(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
}  // namespace

atomic_long::atomic_long(client& c, std::string path, atomic_options options)
    : engine_(std::make_shared<detail::atomic_engine>(c, std::move(path), 8, options, "zkr::atomic_long")) {}
atomic_long::~atomic_long() = default;
atomic_result<std::int64_t> atomic_long::get() { return engine_->get(); }
atomic_result<std::int64_t> atomic_long::add(std::int64_t delta) {
    return engine_->update([delta](std::int64_t v) { return plus(v, delta); }, false);
}
atomic_result<std::int64_t> atomic_long::subtract(std::int64_t delta) {
    return engine_->update([delta](std::int64_t v) { return minus(v, delta); }, false);
}
atomic_result<std::int64_t> atomic_long::compare_and_set(std::int64_t expected, std::int64_t value) {
    return engine_->update([=](std::int64_t v) -> std::optional<std::int64_t> {
        if (v != expected) return std::nullopt;
        return value;
    }, true);
}
void atomic_long::force_set(std::int64_t value) { engine_->force_set(value); }
const std::string& atomic_long::path() const noexcept { return engine_->path(); }

atomic_int::atomic_int(client& c, std::string path, atomic_options options)
    : engine_(std::make_shared<detail::atomic_engine>(c, std::move(path), 4, options, "zkr::atomic_int")) {}
atomic_int::~atomic_int() = default;
atomic_result<std::int32_t> atomic_int::get() { return narrow<std::int32_t>(engine_->get()); }
atomic_result<std::int32_t> atomic_int::add(std::int32_t delta) {
    return narrow<std::int32_t>(engine_->update([delta](std::int64_t v) { return plus(v, delta); }, false));
}
atomic_result<std::int32_t> atomic_int::subtract(std::int32_t delta) {
    return narrow<std::int32_t>(engine_->update([delta](std::int64_t v) { return minus(v, delta); }, false));
}
atomic_result<std::int32_t> atomic_int::compare_and_set(std::int32_t expected, std::int32_t value) {
    return narrow<std::int32_t>(engine_->update([=](std::int64_t v) -> std::optional<std::int64_t> {
        if (v != expected) return std::nullopt;
        return value;
    }, true));
}
void atomic_int::force_set(std::int32_t value) { engine_->force_set(value); }
const std::string& atomic_int::path() const noexcept { return engine_->path(); }

// ---------------------------------------------------------------- id_generator

namespace {
std::int64_t checked_block(std::int64_t block_size) {
    if (block_size < 1)
        throw std::invalid_argument("zkr::id_generator: block_size must be at least 1 (it is " + std::to_string(block_size) + ")");
    return block_size;
}
}  // namespace

id_generator::id_generator(client& c, std::string path, std::int64_t block_size)
    : counter_(std::make_shared<detail::atomic_engine>(c, std::move(path), 8, atomic_options{}, "zkr::id_generator")),
      block_size_(checked_block(block_size)) {}

const std::string& id_generator::path() const noexcept { return counter_->path(); }

std::int64_t id_generator::next() {
    std::lock_guard lock(mutex_);
    if (next_ == end_) {
        // One exactly-once add reserves (pre, post]: nobody else is ever handed those ids. A
        // block that would pass the largest id is not reserved at all.
        const std::int64_t block = block_size_;
        bool overflow = false;
        auto r = counter_->update(
            [block, &overflow](std::int64_t v) -> std::optional<std::int64_t> {
                overflow = v >= std::numeric_limits<std::int64_t>::max() - block;  // end_ = post + 1 must fit
                if (overflow) return std::nullopt;
                return v + block;
            },
            false);
        if (overflow)
            throw zkr::system_error(make_error_code(errc::bad_arguments),
                                    "zkr::id_generator::next: " + quoted_path(path()) + " has run out of ids (it holds " +
                                        std::to_string(r.pre) + ")");
        if (!r.succeeded)
            throw zkr::system_error(make_error_code(errc::attempts_exhausted),
                                    "zkr::id_generator::next: reserving a block of " + quoted_path(path()) + " lost to other writers " +
                                        std::to_string(r.attempts) + " times");
        next_ = r.pre + 1;
        end_ = r.post + 1;
    }
    return next_++;
}

std::int64_t id_generator::reserved() const {
    std::lock_guard lock(mutex_);
    return end_ - next_;
}

}  // namespace zkr
