// One operation of a counter (atomic_long, atomic_int, id_generator), as a sans-io state machine:
// Curator's optimistic loop (read, write at the version read, again on a lost race) made exactly
// once by a writer record, an ephemeral child of the counter that only this object writes,
// bumped in the same transaction as the counter at the version this object last left it (see
// atomic.hpp). The machine never does I/O: atomic_engine sends each request it asks for and
// feeds the reply back; the unit fault test sends them to a model counter with a fault at any
// step. Between operations the object's knowledge (the value and version last seen, its record)
// lives in counter_memory, handed to each machine and taken back when it is done.
#pragma once

#include "zkr/atomic.hpp"
#include "zkr/types.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace zkr::detail {

/// What one object knows of its counter between operations.
struct counter_memory {
    struct seen {
        std::int64_t value = 0;
        std::int32_t version = -1;  // -1: no node
        std::int64_t mzxid = 0;
        bool shared = false;  // other writers' records beside ours: read before each change
    };
    std::optional<seen> cache;
    std::string writer;               // our record's path ("" until made)
    std::int64_t writer_session = 0;  // the session it was made on (ephemeral: goes with it)
    std::int32_t writer_version = 0;  // its data version as we last left it
};

/// The requests the machine asks for, and what comes back.
namespace counter_step {
struct read { std::string path; };                  ///< get_data, no watch
struct make_parents { std::string path; };          ///< `path` and its ancestors, as containers
struct create {
    std::string path;
    std::string data;
    create_mode mode = create_mode::persistent;
};
struct exists { std::string path; };                ///< no watch
struct write { std::vector<multi_op> ops; };        ///< one transaction
struct promote {};                                  ///< take the promoted lock (its timeout is the engine's)
struct done {
    error_code error;       ///< none: `result` says
    std::string what;       ///< the failure, for an exception's message
    atomic_result<std::int64_t> result;
};
}  // namespace counter_step

struct counter_reply {
    error_code error;
    std::variant<std::monostate, data_result, create_result, exists_result, std::vector<multi_op_result>> value;
    bool lock_taken = false;  ///< for promote: false (and no error) when not had in time
};

/// What the session is when a reply is fed: its id, and whether the session our record was made
/// on is still ours beyond doubt (connected, not expired).
struct counter_session {
    std::int64_t id = 0;
    bool writer_session_live = false;
};

class atomic_fsm {
public:
    using request = std::variant<counter_step::read, counter_step::make_parents, counter_step::create, counter_step::exists,
                                 counter_step::write, counter_step::promote, counter_step::done>;
    struct action {
        request next;
        std::vector<std::string> deletes;  ///< our old records: guaranteed deletes, sent first
    };

    /// `width`: 8 or 4 bytes. `promote_attempts`: the promoted lock's writes (0: no promotion).
    /// `make_uuid` names each record made.
    atomic_fsm(std::string path, int width, counter_change change, int max_attempts, int promote_attempts,
               counter_memory memory, std::function<std::string()> make_uuid, const char* who);

    action start(const counter_session& s);
    action on(const counter_reply& r, const counter_session& s);

    /// The object's knowledge after the operation (take it back once done).
    counter_memory& memory() noexcept { return memory_; }
    const counter_memory& memory() const noexcept { return memory_; }
    bool lock_held() const noexcept { return promoted_; }

    std::int64_t wrap(std::int64_t v) const noexcept;
    std::string encode(std::int64_t v) const;

private:
    enum class phase {
        idle,
        first_read,      // the read before the loop
        health_read,     // the read after the session was in doubt
        body_read,       // no value known at the loop's body
        promoting,
        promoted_read,   // under the lock: what the last writer left
        writer_read,     // is the counter there before our record is made under it?
        making_parents,
        making_counter,
        counter_reread,
        making_record,
        checking_record,
        after_writer_read,
        writing,
        doubt_read,      // our record went: was our last try applied?
        lost_race_read,
        finished
    };

    action loop(const counter_session& s, bool health_checked);
    action body(const counter_session& s);
    action ensure_writer(const counter_session& s);
    action make_counter();
    action make_record();
    action adopt_record(std::int64_t owner, const counter_session& s);
    action after_writer(const counter_session& s);
    action on_write(const counter_reply& r, const counter_session& s);
    // A read's reply into the cache: false (and `failure` set) when it failed.
    bool take_read(const counter_reply& r, std::optional<action>& failure);
    std::optional<std::int64_t> next_value(std::int64_t current) const;
    action ask(request next, std::vector<std::string> deletes = {});
    action finish(bool succeeded, std::int64_t pre, std::int64_t post);
    action fail(error_code ec, std::string what, std::vector<std::string> deletes = {});

    std::string path_;
    int width_;
    counter_change change_;
    int promote_attempts_;
    counter_memory memory_;
    std::function<std::string()> make_uuid_;
    const char* who_;

    phase phase_ = phase::idle;
    int attempts_ = 0;
    int limit_;
    bool promoted_ = false;
    int writer_tries_ = 0;
    std::string record_path_;        // the record being made
    std::optional<std::int64_t> doubt_mzxid_;
    counter_memory::seen sent_;      // what the last write was based on
    std::int64_t sent_post_ = 0;
};

}  // namespace zkr::detail
