// zkr::count_down_latch: the count left in the latch node (8-byte big-endian), lowered by a
// versioned setData in one transaction with a keyed child "cd-<uuid>" (the key makes a resent
// transaction fail whole instead of counting twice), and "released" made by the transaction that
// reaches 0. Waiters watch "released" only.
#include "zkr/count_down_latch.hpp"

#include "toolkit/big_endian.hpp"
#include "toolkit/blocking.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/path.hpp"

#include <stdexcept>
#include <thread>

namespace zkr {

namespace b = detail::blocking;

namespace {
constexpr const char* released_name = "released";

std::int64_t decode_count(const std::string& path, const std::string& data) {
    // No data is no count (a counter reads it as 0, but a latch at 0 would have been released).
    auto value = data.empty() ? std::nullopt : detail::decode_big_endian<std::int64_t>(data);
    if (!value)
        throw zkr::system_error(make_error_code(errc::bad_arguments),
                                "zkr::count_down_latch: " + quoted_path(path) + " does not hold an 8-byte count (" +
                                    std::to_string(data.size()) + " bytes)");
    return *value;
}

// The op of a failed multi that failed (the others say runtime_inconsistency or ok).
std::size_t failed_op(const std::vector<multi_op_result>& results) {
    for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i].error && results[i].error != errc::runtime_inconsistency) return i;
    }
    return results.size();
}
}  // namespace

count_down_latch::count_down_latch(client& c, std::string path) : path_(std::move(path)) {
    detail::check_recipe_path(c, path_, "zkr::count_down_latch", "latch path");
    auto p = detail::port_of(c);
    if (p->closed()) throw zkr::system_error(make_error_code(errc::client_closed), "zkr::count_down_latch on a closed client");
    port_ = p->weak_port();
    executor_ = p->executor();
    released_ = join_path(path_, released_name);
}

count_down_latch::~count_down_latch() = default;

std::shared_ptr<detail::session_port> count_down_latch::port() const {
    auto p = port_.lock();
    if (!p || p->closed())
        throw zkr::system_error(make_error_code(errc::client_closed), "zkr::count_down_latch " + quoted_path(path_));
    return p;
}

bool count_down_latch::try_set_count(std::int64_t count) {
    if (count < 0)
        throw std::invalid_argument("zkr::count_down_latch::try_set_count: the count must not be negative (it is " +
                                    std::to_string(count) + ")");
    auto held = port();
    auto& p = *held;
    // A keyed child made with the count tells a resent transaction (node_exists) whether its
    // first try was the one that set it.
    std::string key = join_path(path_, "set-" + b::member_uuid());
    for (int tries = 0;; ++tries) {
        error_code ec;
        auto parent = parent_path(path_);
        if (parent != "/") b::create_containers(p, parent, ec);
        if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::try_set_count: creating the parents of " + quoted_path(path_));
        std::vector<multi_op> ops{op::create{path_, detail::encode_big_endian<std::int64_t>(count), create_mode::persistent},
                                  op::create{key, "", create_mode::persistent}};
        if (count == 0) ops.push_back(op::create{released_, "", create_mode::persistent});
        auto results = b::multi(p, std::move(ops), ec);
        if (!ec) return true;
        if (ec == errc::node_exists && failed_op(results) == 0) {
            error_code kec;
            auto mine = b::exists(p, key, false, kec);
            if (kec) throw zkr::system_error(kec, "zkr::count_down_latch::try_set_count: reading " + quoted_path(key));
            return mine.exists;
        }
        if (ec == errc::no_node && failed_op(results) == 0 && tries < 2) continue;  // a container parent reaped meanwhile
        if (b::in_doubt(ec))
            throw zkr::system_error(make_error_code(errc::outcome_unknown),
                                    "zkr::count_down_latch::try_set_count " + quoted_path(path_) +
                                        " (the retry policy gave up resending it after: " + ec.message() + "; " + quoted_path(key) +
                                        " says whether it was applied)");
        throw zkr::system_error(ec, "zkr::count_down_latch::try_set_count " + quoted_path(path_));
    }
}

void count_down_latch::count_down() {
    auto held = port();
    auto& p = *held;
    std::string key = join_path(path_, "cd-" + b::member_uuid());
    for (int attempt = 0;; ++attempt) {
        error_code ec;
        auto r = b::get_data(p, path_, ec);
        if (ec == errc::no_node)
            throw zkr::system_error(ec, "zkr::count_down_latch::count_down: " + quoted_path(path_) + " has no count (try_set_count first)");
        if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::count_down: reading " + quoted_path(path_));
        auto left = decode_count(path_, r.data);
        if (left <= 0) {
            // Released already (by us too, maybe: a transaction resent after a lost reply). A count
            // brought to 0 by another writer (a DistributedAtomicLong) has no release yet: made
            // here, so that waiters are not left waiting.
            b::create(p, released_, "", create_mode::persistent, ec);
            if (ec && ec != errc::node_exists && ec != errc::no_node)
                throw zkr::system_error(ec, "zkr::count_down_latch::count_down: creating " + quoted_path(released_));
            return;
        }
        std::vector<multi_op> ops{op::create{key, "", create_mode::persistent},
                                  op::set_data{path_, detail::encode_big_endian<std::int64_t>(left - 1), r.stat.version}};
        if (left == 1) ops.push_back(op::create{released_, "", create_mode::persistent});
        auto results = b::multi(p, std::move(ops), ec);
        if (!ec) return;
        auto failed = failed_op(results);
        if (ec == errc::node_exists && failed == 0) return;  // our first try was applied; its reply was lost
        if (ec == errc::node_exists && failed == 2) {
            // "released" is there while the count was 1: made by hand, or by a bad count. The
            // count goes on to 0 without it.
            std::vector<multi_op> again{op::create{key, "", create_mode::persistent},
                                        op::set_data{path_, detail::encode_big_endian<std::int64_t>(0), r.stat.version}};
            b::multi(p, std::move(again), ec);
            if (!ec || ec == errc::node_exists) return;
        }
        if (ec == errc::bad_version || ec == errc::node_exists) {
            // Someone counted down meanwhile: read again. A short, growing pause past the first
            // tries spreads many contenders apart.
            if (attempt >= 3) std::this_thread::sleep_for(std::chrono::microseconds(100 << std::min(attempt - 3, 6)));
            continue;
        }
        if (ec == errc::no_node) throw zkr::system_error(ec, "zkr::count_down_latch::count_down: " + quoted_path(path_) + " was deleted");
        // The client's retry policy gave up on a lost connection: our key says whether it was
        // applied; this call cannot know.
        if (b::in_doubt(ec))
            throw zkr::system_error(make_error_code(errc::outcome_unknown),
                                    "zkr::count_down_latch::count_down " + quoted_path(path_) + " (the retry policy gave up resending it after: " +
                                        ec.message() + "; " + quoted_path(key) + " says whether it was applied)");
        throw zkr::system_error(ec, "zkr::count_down_latch::count_down " + quoted_path(path_));
    }
}

bool count_down_latch::await_for(std::chrono::milliseconds timeout) {
    auto deadline = b::deadline_after(timeout);
    auto held = port();
    auto& p = *held;
    for (bool first = true;; first = false) {
        error_code ec;
        auto seen = b::exists_watched(p, released_, first ? b::first_read_by(deadline, timeout, p) : deadline, ec);
        if (!seen) return false;
        if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::await_for " + quoted_path(path_));
        if (seen->exists) {
            b::drop_watch(p, seen->watch);
            return true;
        }
        event_type event{};
        auto end = b::wait(p, seen->watch, deadline, &event);
        if (end == b::watch_end::timed_out) return false;
        if (end == b::watch_end::fired && event == event_type::created) return true;  // released, as the server said
    }
}

std::int64_t count_down_latch::count() const {
    auto held = port();
    error_code ec;
    auto r = b::get_data(*held, path_, ec);
    if (ec == errc::no_node) return 0;
    if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::count " + quoted_path(path_));
    return std::max<std::int64_t>(0, decode_count(path_, r.data));
}

void count_down_latch::remove() {
    auto held = port();
    auto& p = *held;
    for (int attempt = 0; attempt < 100; ++attempt) {
        error_code ec;
        auto children = b::get_children(p, path_, false, ec);
        if (ec == errc::no_node) return;
        if (ec) throw zkr::system_error(ec, "zkr::count_down_latch::remove: listing " + quoted_path(path_));
        for (const auto& child : children.children) {
            b::remove(p, join_path(path_, child), any_version, ec);
            if (ec && ec != errc::no_node) throw zkr::system_error(ec, "zkr::count_down_latch::remove " + quoted_path(join_path(path_, child)));
        }
        b::remove(p, path_, any_version, ec);
        if (!ec || ec == errc::no_node) return;
        if (ec != errc::not_empty) throw zkr::system_error(ec, "zkr::count_down_latch::remove " + quoted_path(path_));
        // A count-down came in meanwhile: delete again.
    }
    throw zkr::system_error(make_error_code(errc::not_empty), "zkr::count_down_latch::remove " + quoted_path(path_) + ": count-downs keep coming");
}

}  // namespace zkr
