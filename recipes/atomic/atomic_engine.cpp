#include "atomic_engine.hpp"

#include "toolkit/big_endian.hpp"
#include "toolkit/blocking.hpp"
#include "toolkit/cleanup.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/path.hpp"

#include <map>
#include <stdexcept>

namespace zkr::detail {

namespace b = blocking;

namespace {
// The per-client table of counters' operation locks, one per path in use.
struct counter_locks {
    explicit counter_locks(session_port&) {}
    void attach() {}
    std::shared_ptr<std::mutex> of(const std::string& path) {
        std::lock_guard lock(mutex);
        auto& weak = by_path[path];
        auto held = weak.lock();
        if (!held) weak = held = std::make_shared<std::mutex>();
        for (auto it = by_path.begin(); it != by_path.end();) it = it->second.expired() ? by_path.erase(it) : std::next(it);
        return held;
    }
    std::mutex mutex;
    std::map<std::string, std::weak_ptr<std::mutex>> by_path;
};

std::size_t failed_op(const std::vector<multi_op_result>& results) {
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i].error && results[i].error != errc::runtime_inconsistency) return i;
    }
    return results.size();
}

// The writer record's data: the pre and post values of the change it was last bumped with.
std::string record(std::int64_t pre, std::int64_t post) {
    return encode_big_endian<std::int64_t>(pre) + encode_big_endian<std::int64_t>(post);
}
}  // namespace

atomic_engine::atomic_engine(client& c, std::string path, int width, atomic_options options, const char* who)
    : path_(std::move(path)), width_(width), options_(options), who_(who) {
    check_recipe_path(c, path_, who, "counter path");
    if (options.max_attempts < 1)
        throw std::invalid_argument(std::string(who) + ": atomic_options::max_attempts must be at least 1 (it is " +
                                    std::to_string(options.max_attempts) + ")");
    if (const auto& promote = options.promote_to_lock) {
        const std::string& lock = promote->lock_path;
        check_recipe_path(c, lock, who, "promoted_lock::lock_path");
        if (lock == path_ || (lock.size() > path_.size() && lock.compare(0, path_.size(), path_) == 0 && lock[path_.size()] == '/'))
            throw std::invalid_argument(std::string(who) + ": promoted_lock::lock_path " + quoted_path(lock) +
                                        " is the counter's path or under it (its nodes would be the counter's children)");
        if (promote->lock_timeout.count() < 0)
            throw std::invalid_argument(std::string(who) + ": promoted_lock::lock_timeout must not be negative (it is " +
                                        std::to_string(promote->lock_timeout.count()) + " ms)");
        if (promote->max_attempts < 1)
            throw std::invalid_argument(std::string(who) + ": promoted_lock::max_attempts must be at least 1 (it is " +
                                        std::to_string(promote->max_attempts) + ")");
    }
    auto p = port_of(c);
    if (p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), std::string(who) + " on a closed client");
    port_ = p->weak_port();
    path_mutex_ = per_client<counter_locks>(*p)->of(path_);
    if (options.promote_to_lock) promoted_ = std::make_unique<zkr::mutex>(c, options.promote_to_lock->lock_path);  // sends nothing
}

atomic_engine::~atomic_engine() {
    if (writer_.empty()) return;
    if (auto p = port_.lock(); p && !p->closed()) {
        try {
            cleanup_service::of(*p)->guaranteed_delete(writer_);
        } catch (const zkr::system_error&) {
            // closed meanwhile: the record went with the session
        }
    }
}

std::shared_ptr<session_port> atomic_engine::port() const {
    auto p = port_.lock();
    if (!p || p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), std::string(who_) + " " + quoted_path(path_));
    return p;
}

void atomic_engine::fail(error_code ec, const std::string& what) const {
    throw zkr::system_error(ec, std::string(who_) + ": " + what);
}

std::int64_t atomic_engine::wrap(std::int64_t v) const noexcept {
    return width_ == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v))) : v;
}

std::string atomic_engine::encode(std::int64_t v) const {
    return width_ == 4 ? encode_big_endian<std::int32_t>(static_cast<std::int32_t>(wrap(v))) : encode_big_endian<std::int64_t>(v);
}

std::int64_t atomic_engine::decode(const std::string& data) const {
    std::optional<std::int64_t> v;
    if (width_ == 4) {
        if (auto i = decode_big_endian<std::int32_t>(data)) v = *i;
    } else {
        v = decode_big_endian<std::int64_t>(data);
    }
    if (!v)
        fail(make_error_code(errc::bad_arguments), quoted_path(path_) + " holds " + std::to_string(data.size()) +
                                                     " bytes, not a " + std::to_string(width_) + "-byte counter");
    return *v;
}

atomic_engine::seen atomic_engine::read(session_port& p) {
    error_code ec;
    auto r = b::get_data(p, path_, ec);
    seen s;
    if (ec == errc::no_node) {
        s = seen{0, -1, 0};
    } else if (ec) {
        fail(ec, "reading " + quoted_path(path_));
    } else {
        s = seen{decode(r.data), r.stat.version, r.stat.mzxid, r.stat.num_children > 1};
    }
    cache_ = s;
    return s;
}

void atomic_engine::ensure_writer(session_port& p) {
    auto session = p.session_id();
    if (!writer_.empty() && writer_session_ == session && session != 0) return;
    // Our record is a child of the counter: the counter must be there (it reads as 0 either way).
    for (int tries = 0;; ++tries) {
        if (!cache_ || cache_->version < 0) {
            if (read(p).version < 0) {
                error_code ec;
                auto parent = parent_path(path_);
                if (parent != "/") b::create_containers(p, parent, ec);
                if (ec) fail(ec, "creating the parents of " + quoted_path(path_));
                b::create(p, path_, encode(0), create_mode::persistent, ec);
                if (ec && ec != errc::node_exists) fail(ec, "creating " + quoted_path(path_));
                read(p);
            }
        }
        std::string record_path = join_path(path_, "zkr-writer-" + b::member_uuid());
        error_code ec;
        auto made = b::create(p, record_path, record(0, 0), create_mode::ephemeral, ec);
        std::int64_t owner = made.stat.ephemeral_owner;
        if (ec == errc::node_exists) {  // resent after a lost reply: ours (the uuid is)
            auto there = b::exists(p, record_path, false, ec);
            owner = there.stat.ephemeral_owner;
        }
        if (ec == errc::no_node && tries < 3) {  // the counter was deleted meanwhile
            cache_.reset();
            continue;
        }
        if (ec) fail(ec, "creating " + quoted_path(record_path));
        writer_ = std::move(record_path);
        writer_session_ = owner;
        writer_version_ = 0;
        return;
    }
}

atomic_result<std::int64_t> atomic_engine::get() {
    std::lock_guard path_lock(*path_mutex_);
    std::lock_guard lock(mutex_);
    auto held = port();
    auto s = read(*held);
    return {true, s.value, s.value, 0};
}

void atomic_engine::force_set(std::int64_t value) {
    // Through the same exactly-once transaction as every change: an unconditional set resent
    // after its reply was lost would undo another writer's change made in between.
    auto r = update([value](std::int64_t) { return value; }, false);
    if (!r.succeeded)
        fail(make_error_code(errc::attempts_exhausted),
             "setting " + quoted_path(path_) + ": lost to other writers " + std::to_string(r.attempts) + " times");
}

atomic_result<std::int64_t> atomic_engine::update(const std::function<std::optional<std::int64_t>(std::int64_t)>& change,
                                                  bool fresh_read_first) {
    std::lock_guard path_lock(*path_mutex_);
    std::lock_guard lock(mutex_);
    auto held = port();
    auto& p = *held;
    // Fairness: the version this object kept lets it change the counter in one round trip, while
    // a writer that lost a race must read first; so while other zkr writers share the counter
    // (their records are its children), every change reads first, as theirs do, and none starves.
    if (fresh_read_first || !cache_ || cache_->shared) read(p);
    int attempts = 0;
    // The counter's mzxid when the first try that may have been applied unseen was sent: an
    // mzxid, not a version, since a counter deleted and made again starts its versions over.
    std::optional<std::int64_t> doubt_mzxid;
    int limit = options_.max_attempts;
    // Promoted (Curator's PromotedToLock): the lock is held until the call returns, however it does.
    struct lock_release {
        zkr::mutex* held = nullptr;
        ~lock_release() {
            if (!held) return;
            try {
                held->unlock();
            } catch (const zkr::system_error&) {
                // lost with its session, or the client closed: nothing is held any more
            }
        }
    } promoted;
    for (;;) {
        // A session in doubt (the connection down, or a new session): read afresh first, so that
        // a try settled after a session loss is judged against what the counter held when sent.
        if (!writer_.empty() && p.health(writer_session_) != session_health::live) {
            read(p);
            if (p.session_id() != writer_session_) writer_.clear();
        }
        seen s = cache_ ? *cache_ : read(p);
        auto next = change(s.value);
        if (!next) return {false, s.value, s.value, attempts};
        if (attempts >= limit) {
            if (!promoted_ || promoted.held) return {false, s.value, s.value, attempts};
            if (!promoted_->try_lock_for(options_.promote_to_lock->lock_timeout)) return {false, s.value, s.value, attempts};
            promoted.held = promoted_.get();
            limit = attempts + options_.promote_to_lock->max_attempts;
            read(p);  // under the lock: what the last writer left
            continue;
        }
        ensure_writer(p);  // only for a change: a compare that fails makes nothing
        s = cache_ ? *cache_ : read(p);
        if (s.version < 0) {  // deleted since: made again by ensure_writer on the next turn
            writer_.clear();
            continue;
        }
        next = change(s.value);  // ensure_writer may have read it again
        if (!next) return {false, s.value, s.value, attempts};
        ++attempts;
        std::int64_t post = wrap(*next);
        error_code ec;
        auto results = b::multi(p,
                                {op::set_data{writer_, record(s.value, post), writer_version_},
                                 op::set_data{path_, encode(post), s.version}},
                                ec);
        if (!ec) {
            writer_version_ = results[0].stat.version;
            cache_ = seen{post, results[1].stat.version, results[1].stat.mzxid, results[1].stat.num_children > 1};
            return {true, s.value, post, attempts};
        }
        auto failed = failed_op(results);
        if (failed == 0 && ec == errc::bad_version) {
            // Only we write our record, and every earlier try of this change failed for sure (at
            // the counter) or ended the call: this very transaction was applied, its reply lost,
            // and resent by the session layer.
            ++writer_version_;
            cache_.reset();
            return {true, s.value, post, attempts};
        }
        if (failed == 0 && ec == errc::no_node) {
            // Our record went with its session (or someone deleted it). A try sent on that
            // session may have been applied before it ended; the session's end orders it before
            // this read, so the counter's mzxid settles it unless the counter changed since.
            doubt_mzxid = doubt_mzxid.value_or(s.mzxid);
            writer_.clear();
            if (read(p).mzxid == *doubt_mzxid) {
                doubt_mzxid.reset();
                continue;  // nothing of ours was applied
            }
            fail(make_error_code(errc::outcome_unknown), "changing " + quoted_path(path_) + " (its session was lost before the answer)");
        }
        if (failed == 1 && (ec == errc::bad_version || ec == errc::no_node)) {
            // Someone else wrote (or deleted it) since we read: read and try again at once. No pause:
            // a writer that paused after a loss would fall behind one that just won (which never
            // pauses) and lose again and again (a first version did, and starved).
            read(p);
            continue;
        }
        // Anything else ends the call; the next change starts on a fresh record, so that a late
        // application of this one is never taken for the next one's (the old record's delete is
        // sent after it).
        cache_.reset();
        auto record_path = std::exchange(writer_, std::string());
        if (!record_path.empty()) {
            try {
                cleanup_service::of(p)->guaranteed_delete(record_path);
            } catch (const zkr::system_error&) {
            }
        }
        if (b::in_doubt(ec))  // the client's retry policy gave up resending it
            fail(make_error_code(errc::outcome_unknown),
                 "changing " + quoted_path(path_) + " (the retry policy gave up resending it after: " + ec.message() + ")");
        fail(ec, "changing " + quoted_path(path_));
    }
}

}  // namespace zkr::detail
