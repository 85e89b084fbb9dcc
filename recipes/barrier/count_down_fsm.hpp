// One count-down of a count_down_latch, as a sans-io state machine (the layout is
// count_down_latch.hpp's): read the count; lower it by one transaction that makes a keyed child
// "cd-<uuid>" and sets the count at the version read (and makes "released" when it reaches 0).
// The key makes a resent transaction whose first try was applied fail whole on it (node_exists
// on the key: ours, done), so a lost reply never counts twice; a lost race (bad_version) reads
// again. The machine never does I/O: the driver (count_down_latch.cpp) sends each request it
// asks for, the unit fault test sends them to a model latch with a fault at any step.
#pragma once

#include "atomic/atomic_fsm.hpp"  // counter_step, counter_reply: the counters' request vocabulary

#include <chrono>
#include <string>
#include <variant>

namespace zkr::detail {

class count_down_fsm {
public:
    using request = std::variant<counter_step::read, counter_step::create, counter_step::write, counter_step::done>;
    struct action {
        request next;
        /// Wait this long before sending `next` (past the first lost races: spreads contenders).
        std::chrono::microseconds pause{0};
    };

    /// `key`: this count-down's child ("<path>/cd-<uuid>"), the same for every try of it.
    count_down_fsm(std::string path, std::string key);

    action start();
    action on(const counter_reply& r);
    bool finished() const noexcept { return phase_ == phase::finished; }

private:
    enum class phase { idle, reading, writing, writing_zero, releasing, finished };

    action lower(std::int64_t left, std::int32_t version);
    action read_again();
    action on_write(const counter_reply& r);
    action finish();
    action fail(error_code ec, std::string what);

    std::string path_, key_, released_;
    phase phase_ = phase::idle;
    std::int32_t version_ = 0;  // the count's version the transaction was sent at
    int races_lost_ = 0;
};

}  // namespace zkr::detail
