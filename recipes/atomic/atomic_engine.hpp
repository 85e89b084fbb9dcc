// The counters' engine (atomic_long, atomic_int, id_generator): Curator's optimistic loop
// (read, write at the version read, again on a lost race) made exactly once by a writer record,
// an ephemeral child of the counter that only this object writes, bumped in the same
// transaction as the counter at the version this object last left it. See atomic.hpp.
#pragma once

#include "session_port.hpp"
#include "zkr/atomic.hpp"
#include "zkr/mutex.hpp"

#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace zkr::detail {

class atomic_engine {
public:
    /// `width`: 8 (long) or 4 (int) bytes. Sends nothing.
    atomic_engine(client& c, std::string path, int width, atomic_options options, const char* who);
    ~atomic_engine();

    /// Values are held as 64-bit integers; for width 4 they are wrapped to 32 bits.
    atomic_result<std::int64_t> get();
    /// `change(current)` gives the value to write, or nullopt for none (a compare that failed).
    atomic_result<std::int64_t> update(const std::function<std::optional<std::int64_t>(std::int64_t)>& change, bool fresh_read_first);
    void force_set(std::int64_t value);
    const std::string& path() const noexcept { return path_; }
    std::int64_t wrap(std::int64_t v) const noexcept;

private:
    struct seen {
        std::int64_t value = 0;
        std::int32_t version = -1;  // -1: no node
        std::int64_t mzxid = 0;
        bool shared = false;  // other writers' records beside ours: read before each change
    };
    std::shared_ptr<session_port> port() const;
    seen read(session_port& p);
    std::int64_t decode(const std::string& data) const;
    std::string encode(std::int64_t v) const;
    void ensure_writer(session_port& p);
    [[noreturn]] void fail(error_code ec, const std::string& what) const;

    std::weak_ptr<session_port> port_;
    std::string path_;
    int width_;
    atomic_options options_;
    const char* who_;

    // One operation at a time on this counter among every object of this client: two objects of
    // one process never race each other (the one with a fresh version would win every time and
    // starve the other). Held across the operation's requests, never on the client's threads.
    std::shared_ptr<std::mutex> path_mutex_;
    std::mutex mutex_;  // this object's state, under path_mutex_
    std::optional<seen> cache_;
    std::unique_ptr<zkr::mutex> promoted_;  // options_.promote_to_lock's lock (made with the object)
    std::string writer_;                 // our record's path ("" until made)
    std::int64_t writer_session_ = 0;    // the session it was made on (ephemeral: goes with it)
    std::int32_t writer_version_ = 0;    // its data version as we last left it
};

}  // namespace zkr::detail
