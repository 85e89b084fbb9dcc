// Internal: how many of zkr's own objects are alive in this process, counted as they are made
// and destroyed. LeakSanitizer cannot see an object of ours kept only by a block it was told to
// ignore (the C client's own leaks); these counts can. Tests assert that a closed client left
// none behind.
#pragma once

#include <atomic>
#include <string>

namespace zkr::detail {

struct live_counts {
    long requests = 0;      ///< requests made and not yet answered (delivered) or failed
    long watches = 0;       ///< watch states (the C client's watcher contexts)
    long completions = 0;   ///< operation results still owed to someone (handler, blocked caller, state machine)
    long holds = 0;         ///< lock holds (and recipe holds) not yet destroyed
    long operations = 0;    ///< recipe operations in flight (acquisitions and the like)
    long clients = 0;       ///< clients' session layers not yet destroyed
    long dropped_completions = 0;  ///< results owed and never delivered (destroyed uncalled): a bug, ever

    bool all_zero() const noexcept {
        return requests == 0 && watches == 0 && completions == 0 && holds == 0 && operations == 0 && clients == 0 &&
               dropped_completions == 0;
    }
    std::string describe() const;
};

/// The counters behind live_counts; one per process.
struct live_objects {
    std::atomic<long> requests{0}, watches{0}, completions{0}, holds{0}, operations{0}, clients{0},
        dropped_completions{0};
};
live_objects& live() noexcept;

/// What is alive now.
live_counts live_now() noexcept;

/// Counts one object of a kind for as long as it lives: a member of that object.
template <std::atomic<long> live_objects::*Counter>
class live_counter {
public:
    live_counter() noexcept { ++(live().*Counter); }
    live_counter(const live_counter&) noexcept { ++(live().*Counter); }
    live_counter& operator=(const live_counter&) noexcept { return *this; }
    ~live_counter() { --(live().*Counter); }
};

}  // namespace zkr::detail
