#include "atomic_fsm.hpp"

#include "toolkit/big_endian.hpp"
#include "zkr/error.hpp"
#include "zkr/path.hpp"

#include <limits>

namespace zkr::detail {

namespace {
// The op of a failed transaction that failed (the others say runtime_inconsistency or ok);
// npos when none did (a transport error: no results at all).
std::size_t failed_op(const std::vector<multi_op_result>& results) {
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i].error && results[i].error != errc::runtime_inconsistency) return i;
    }
    return std::string::npos;
}

// The writer record's data: the pre and post values of the change it was last bumped with.
std::string record(std::int64_t pre, std::int64_t post) {
    return encode_big_endian<std::int64_t>(pre) + encode_big_endian<std::int64_t>(post);
}

// Two's-complement wrapping without signed overflow.
std::int64_t plus(std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
}  // namespace

atomic_fsm::atomic_fsm(std::string path, int width, counter_change change, int max_attempts, int promote_attempts,
                       counter_memory memory, std::function<std::string()> make_uuid, const char* who)
    : path_(std::move(path)),
      width_(width),
      change_(change),
      promote_attempts_(promote_attempts),
      memory_(std::move(memory)),
      make_uuid_(std::move(make_uuid)),
      who_(who),
      limit_(max_attempts) {}

std::int64_t atomic_fsm::wrap(std::int64_t v) const noexcept {
    return width_ == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v))) : v;
}

std::string atomic_fsm::encode(std::int64_t v) const {
    return width_ == 4 ? encode_big_endian<std::int32_t>(static_cast<std::int32_t>(wrap(v))) : encode_big_endian<std::int64_t>(v);
}

std::optional<std::int64_t> atomic_fsm::next_value(std::int64_t current) const {
    switch (change_.what) {
    case counter_change::kind::read: return std::nullopt;
    case counter_change::kind::add: return plus(current, change_.a);
    case counter_change::kind::compare_and_set:
        if (current != change_.a) return std::nullopt;
        return change_.b;
    case counter_change::kind::set: return change_.a;
    case counter_change::kind::reserve:
        // The generator's next end (post + 1) must fit: a block past the largest id is not taken.
        if (current >= std::numeric_limits<std::int64_t>::max() - change_.a) return std::nullopt;
        return current + change_.a;
    }
    return std::nullopt;
}

atomic_fsm::action atomic_fsm::ask(request next, std::vector<std::string> deletes) {
    return action{std::move(next), std::move(deletes)};
}

atomic_fsm::action atomic_fsm::finish(bool succeeded, std::int64_t pre, std::int64_t post) {
    phase_ = phase::finished;
    return ask(counter_step::done{{}, {}, {succeeded, pre, post, attempts_}});
}

atomic_fsm::action atomic_fsm::fail(error_code ec, std::string what, std::vector<std::string> deletes) {
    phase_ = phase::finished;
    return ask(counter_step::done{ec, std::string(who_) + ": " + what, {false, 0, 0, attempts_}}, std::move(deletes));
}

bool atomic_fsm::take_read(const counter_reply& r, std::optional<action>& failure) {
    if (r.error == errc::no_node) {
        memory_.cache = counter_memory::seen{0, -1, 0, false};
        return true;
    }
    if (r.error) {
        failure = fail(r.error, "reading " + quoted_path(path_));
        return false;
    }
    const auto& d = std::get<data_result>(r.value);
    std::optional<std::int64_t> v;
    if (width_ == 4) {
        if (auto i = decode_big_endian<std::int32_t>(d.data)) v = *i;
    } else {
        v = decode_big_endian<std::int64_t>(d.data);
    }
    if (!v) {
        memory_.cache.reset();
        failure = fail(make_error_code(errc::bad_arguments), quoted_path(path_) + " holds " + std::to_string(d.data.size()) +
                                                                 " bytes, not a " + std::to_string(width_) + "-byte counter");
        return false;
    }
    memory_.cache = counter_memory::seen{*v, d.stat.version, d.stat.mzxid, d.stat.num_children > 1};
    return true;
}

atomic_fsm::action atomic_fsm::start(const counter_session& s) {
    // Fairness: the version this object kept lets it change the counter in one round trip, while
    // a writer that lost a race must read first; so while other zkr writers share the counter
    // (their records are its children), every change reads first, as theirs do, and none starves.
    // A compare-and-set reads first too: it must not fail on a value it only remembers.
    if (change_.what == counter_change::kind::read || change_.what == counter_change::kind::compare_and_set ||
        !memory_.cache || memory_.cache->shared) {
        phase_ = phase::first_read;
        return ask(counter_step::read{path_});
    }
    return loop(s, false);
}

atomic_fsm::action atomic_fsm::loop(const counter_session& s, bool health_checked) {
    // A session in doubt (the connection down, or a new session): read afresh first, so that a
    // try settled after a session loss is judged against what the counter held when sent.
    if (!health_checked && !memory_.writer.empty() && !s.writer_session_live) {
        phase_ = phase::health_read;
        return ask(counter_step::read{path_});
    }
    if (!memory_.cache) {
        phase_ = phase::body_read;
        return ask(counter_step::read{path_});
    }
    return body(s);
}

atomic_fsm::action atomic_fsm::body(const counter_session& s) {
    const auto seen = *memory_.cache;
    if (!next_value(seen.value)) return finish(false, seen.value, seen.value);
    if (attempts_ >= limit_) {
        if (promote_attempts_ == 0 || promoted_) return finish(false, seen.value, seen.value);
        // Curator's PromotedToLock: the lock is held until the operation ends, however it does.
        phase_ = phase::promoting;
        return ask(counter_step::promote{});
    }
    return ensure_writer(s);  // only for a change: a compare that fails makes nothing
}

atomic_fsm::action atomic_fsm::ensure_writer(const counter_session& s) {
    if (!memory_.writer.empty() && memory_.writer_session == s.id && s.id != 0) return after_writer(s);
    // Our record is a child of the counter: the counter must be there (it reads as 0 either way).
    if (!memory_.cache) {
        phase_ = phase::writer_read;
        return ask(counter_step::read{path_});
    }
    if (memory_.cache->version < 0) return make_counter();
    return make_record();
}

atomic_fsm::action atomic_fsm::make_counter() {
    // Made by someone else meanwhile is as good (node_exists): it is read again either way.
    if (auto parent = parent_path(path_); parent != "/") {
        phase_ = phase::making_parents;
        return ask(counter_step::make_parents{parent});
    }
    phase_ = phase::making_counter;
    return ask(counter_step::create{path_, encode(0), create_mode::persistent});
}

atomic_fsm::action atomic_fsm::make_record() {
    record_path_ = join_path(path_, "zkr-writer-" + make_uuid_());
    phase_ = phase::making_record;
    return ask(counter_step::create{record_path_, record(0, 0), create_mode::ephemeral});
}

atomic_fsm::action atomic_fsm::adopt_record(std::int64_t owner, const counter_session& s) {
    memory_.writer = record_path_;
    memory_.writer_session = owner;  // the session it was made on: it goes with that one
    memory_.writer_version = 0;
    return after_writer(s);
}

atomic_fsm::action atomic_fsm::after_writer(const counter_session& s) {
    if (!memory_.cache) {
        phase_ = phase::after_writer_read;
        return ask(counter_step::read{path_});
    }
    const auto seen = *memory_.cache;
    if (seen.version < 0) {  // deleted since: made again on the next turn
        memory_.writer.clear();
        return loop(s, false);
    }
    auto next = next_value(seen.value);  // the writer's making may have read it again
    if (!next) return finish(false, seen.value, seen.value);
    ++attempts_;
    sent_ = seen;
    sent_post_ = wrap(*next);
    phase_ = phase::writing;
    return ask(counter_step::write{{op::set_data{memory_.writer, record(seen.value, sent_post_), memory_.writer_version},
                                    op::set_data{path_, encode(sent_post_), seen.version}}});
}

atomic_fsm::action atomic_fsm::on_write(const counter_reply& r, const counter_session& s) {
    static const std::vector<multi_op_result> none;
    const auto* results = std::get_if<std::vector<multi_op_result>>(&r.value);
    if (!results) results = &none;
    if (!r.error) {
        memory_.writer_version = (*results)[0].stat.version;
        const auto& counter = (*results)[1].stat;
        memory_.cache = counter_memory::seen{sent_post_, counter.version, counter.mzxid, counter.num_children > 1};
        return finish(true, sent_.value, sent_post_);
    }
    auto failed = failed_op(*results);
    if (failed == 0 && r.error == errc::bad_version) {
        // Only we write our record, and every earlier try of this change failed for sure (at the
        // counter) or ended the operation: this very transaction was applied, its reply lost,
        // and resent by the session layer.
        ++memory_.writer_version;
        memory_.cache.reset();
        return finish(true, sent_.value, sent_post_);
    }
    if (failed == 0 && r.error == errc::no_node) {
        // Our record went with its session (or someone deleted it). A try sent on that session
        // may have been applied before it ended; the session's end orders it before this read,
        // so the counter's mzxid settles it unless the counter changed since.
        doubt_mzxid_ = doubt_mzxid_.value_or(sent_.mzxid);
        memory_.writer.clear();
        phase_ = phase::doubt_read;
        return ask(counter_step::read{path_});
    }
    if (failed == 1 && (r.error == errc::bad_version || r.error == errc::no_node)) {
        // Someone else wrote (or deleted it) since we read: read and try again at once. No pause:
        // a writer that paused after a loss would fall behind one that just won (which never
        // pauses) and lose again and again.
        phase_ = phase::lost_race_read;
        return ask(counter_step::read{path_});
    }
    (void)s;
    // Anything else ends the operation; the next one starts on a fresh record, so that a late
    // application of this one is never taken for the next one's (the old record's delete is sent
    // after it).
    memory_.cache.reset();
    std::vector<std::string> deletes;
    if (!memory_.writer.empty()) deletes.push_back(std::exchange(memory_.writer, std::string()));
    if (may_have_been_applied(r.error))  // given up on (retry policy, close): may have been applied
        return fail(make_error_code(errc::outcome_unknown),
                    "changing " + quoted_path(path_) +
                        (r.error == errc::client_closed ? std::string(" (the client closed before its answer)")
                                                        : " (the retry policy gave up resending it after: " + r.error.message() + ")"),
                    std::move(deletes));
    return fail(r.error, "changing " + quoted_path(path_), std::move(deletes));
}

atomic_fsm::action atomic_fsm::on(const counter_reply& r, const counter_session& s) {
    std::optional<action> failure;
    switch (phase_) {
    case phase::first_read:
        if (!take_read(r, failure)) return *failure;
        if (change_.what == counter_change::kind::read) return finish(true, memory_.cache->value, memory_.cache->value);
        return loop(s, false);
    case phase::health_read:
        if (!take_read(r, failure)) return *failure;
        if (s.id != memory_.writer_session) memory_.writer.clear();
        return loop(s, true);
    case phase::body_read:
    case phase::lost_race_read:
    case phase::promoted_read:
        if (!take_read(r, failure)) return *failure;
        return loop(s, phase_ == phase::body_read);
    case phase::promoting:
        if (r.error) return fail(r.error, "taking the promoted lock of " + quoted_path(path_));
        if (!r.lock_taken) return finish(false, memory_.cache ? memory_.cache->value : 0, memory_.cache ? memory_.cache->value : 0);
        promoted_ = true;
        limit_ = attempts_ + promote_attempts_;
        phase_ = phase::promoted_read;  // under the lock: what the last writer left
        return ask(counter_step::read{path_});
    case phase::writer_read:
        if (!take_read(r, failure)) return *failure;
        if (memory_.cache->version >= 0) return make_record();
        return make_counter();
    case phase::making_parents:
        if (r.error) return fail(r.error, "creating the parents of " + quoted_path(path_));
        phase_ = phase::making_counter;
        return ask(counter_step::create{path_, encode(0), create_mode::persistent});
    case phase::making_counter:
        if (r.error && r.error != errc::node_exists) return fail(r.error, "creating " + quoted_path(path_));
        phase_ = phase::counter_reread;
        return ask(counter_step::read{path_});
    case phase::counter_reread:
        if (!take_read(r, failure)) return *failure;
        return make_record();
    case phase::making_record:
        if (r.error == errc::node_exists) {  // resent after a lost reply: ours (the uuid is)
            phase_ = phase::checking_record;
            return ask(counter_step::exists{record_path_});
        }
        if (r.error == errc::no_node && writer_tries_ < 3) {  // the counter was deleted meanwhile
            ++writer_tries_;
            memory_.cache.reset();
            return ensure_writer(s);
        }
        // A create given up on may have been applied: our record must not outlive the call.
        if (r.error) return fail(r.error, "creating " + quoted_path(record_path_), {record_path_});
        return adopt_record(std::get<create_result>(r.value).stat.ephemeral_owner, s);
    case phase::checking_record:
        if (r.error) return fail(r.error, "creating " + quoted_path(record_path_), {record_path_});
        return adopt_record(std::get<exists_result>(r.value).stat.ephemeral_owner, s);
    case phase::after_writer_read:
        if (!take_read(r, failure)) return *failure;
        return after_writer(s);
    case phase::writing: return on_write(r, s);
    case phase::doubt_read:
        if (!take_read(r, failure)) {
            // Our try may have been applied; nothing could settle it.
            if (r.error && r.error != errc::bad_arguments)
                return fail(make_error_code(errc::outcome_unknown), "changing " + quoted_path(path_) +
                                                                        " (its session was lost before the answer, and reading the counter then failed: " +
                                                                        r.error.message() + ")");
            return *failure;
        }
        if (memory_.cache->mzxid == *doubt_mzxid_) {
            doubt_mzxid_.reset();
            return loop(s, false);  // nothing of ours was applied
        }
        return fail(make_error_code(errc::outcome_unknown), "changing " + quoted_path(path_) + " (its session was lost before the answer)");
    case phase::idle:
    case phase::finished: break;
    }
    return fail(make_error_code(errc::runtime_inconsistency), "a reply in no step (a bug of zkr's)");
}

}  // namespace zkr::detail
