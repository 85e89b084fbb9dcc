// One listing of a path in flight per client, shared by every step of the client that asks for
// a listing of that path meanwhile: ten thousand waiters of one client that queue at once cost a
// few listings, not ten thousand (each of up to ten thousand names).
//
// The ticket rule: a listing asked for while one of the same path is in flight is answered by
// the next one, sent once that one is answered — never by one sent before it was asked for,
// which could miss what the asker did just before (its create, sent first) or was told had
// changed (the watch event that made it ask). So a coalesced answer is never older than a
// listing of the asker's own would have been; it costs at most one more round trip, and only
// when another listing of the path was in flight.
//
// Threads: list() is called wherever a step is sent; answers run inline on the completion
// thread, outside the coalescer's mutex (a leaf), so an answer may ask for the next listing.
#pragma once

#include "listing.hpp"
#include "session_port.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace zkr::detail {

class listing_coalescer : public std::enable_shared_from_this<listing_coalescer> {
public:
    using answer_fn = std::function<void(error_code, const listing&)>;

    explicit listing_coalescer(session_port& port);
    void attach() {}

    /// Lists `path` (no watch) with a listing sent after this call, shared with whoever else of
    /// this client asks meanwhile; `answer` runs exactly once. On a closed client, answers
    /// errc::client_closed.
    static void list(session_port& port, const std::string& path, answer_fn answer);

    /// Listings asked for and listings sent, by this client, of any path (for tests and benches).
    struct counts {
        std::uint64_t asked = 0, sent = 0;
    };
    counts totals() const noexcept { return {asked_.load(), sent_.load()}; }
    static counts totals_of(session_port& port);

private:
    struct pending {
        std::vector<answer_fn> next;  // asked for while one was in flight: the next listing's
    };
    void ask(const std::string& path, answer_fn answer);
    void send(std::string path, std::vector<answer_fn> batch);

    std::weak_ptr<session_port> port_;
    std::mutex mutex_;  // a leaf
    std::unordered_map<std::string, pending> in_flight_;  // paths with a listing in flight
    std::atomic<std::uint64_t> asked_{0}, sent_{0};
};

}  // namespace zkr::detail
