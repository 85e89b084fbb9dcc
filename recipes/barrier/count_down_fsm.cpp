#include "count_down_fsm.hpp"

#include "toolkit/big_endian.hpp"
#include "zkr/error.hpp"
#include "zkr/path.hpp"

namespace zkr::detail {

namespace {
constexpr const char* who = "zkr::count_down_latch::count_down";

// The op of a failed multi that failed (the others say runtime_inconsistency or ok); the size
// when the reply carries no op results (a transport failure).
std::size_t failed_op(const counter_reply& r) {
    const auto* results = std::get_if<std::vector<multi_op_result>>(&r.value);
    if (!results) return static_cast<std::size_t>(-1);
    for (std::size_t i = 0; i < results->size(); ++i) {
        if ((*results)[i].error && (*results)[i].error != errc::runtime_inconsistency) return i;
    }
    return results->size();
}
}  // namespace

count_down_fsm::count_down_fsm(std::string path, std::string key)
    : path_(std::move(path)), key_(std::move(key)), released_(join_path(path_, "released")) {}

count_down_fsm::action count_down_fsm::start() {
    phase_ = phase::reading;
    return {counter_step::read{path_}};
}

count_down_fsm::action count_down_fsm::finish() {
    phase_ = phase::finished;
    return {counter_step::done{}};
}

count_down_fsm::action count_down_fsm::fail(error_code ec, std::string what) {
    phase_ = phase::finished;
    return {counter_step::done{ec, std::string(who) + what, {}}};
}

count_down_fsm::action count_down_fsm::read_again() {
    // No pause for the first lost races (a writer that paused would fall behind one that just
    // won); then a short, growing one spreads many contenders apart.
    ++races_lost_;
    phase_ = phase::reading;
    std::chrono::microseconds pause{0};
    if (races_lost_ > 3) pause = std::chrono::microseconds(100 << std::min(races_lost_ - 4, 6));
    return {counter_step::read{path_}, pause};
}

count_down_fsm::action count_down_fsm::lower(std::int64_t left, std::int32_t version) {
    version_ = version;
    phase_ = phase::writing;
    std::vector<multi_op> ops{op::create{key_, "", create_mode::persistent},
                              op::set_data{path_, encode_big_endian<std::int64_t>(left - 1), version}};
    if (left == 1) ops.push_back(op::create{released_, "", create_mode::persistent});
    return {counter_step::write{std::move(ops)}};
}

count_down_fsm::action count_down_fsm::on(const counter_reply& r) {
    switch (phase_) {
    case phase::reading: {
        if (r.error == errc::no_node) return fail(r.error, ": " + quoted_path(path_) + " has no count (try_set_count first)");
        if (r.error) return fail(r.error, ": reading " + quoted_path(path_));
        const auto& d = std::get<data_result>(r.value);
        // No data is no count (a counter reads it as 0, but a latch at 0 would have been released).
        auto left = d.data.empty() ? std::nullopt : decode_big_endian<std::int64_t>(d.data);
        if (!left)
            return fail(make_error_code(errc::bad_arguments), ": " + quoted_path(path_) + " does not hold an 8-byte count (" +
                                                                  std::to_string(d.data.size()) + " bytes)");
        if (*left <= 0) {
            // Released already (by us too, maybe: a transaction resent after a lost reply). A
            // count brought to 0 by another writer (a DistributedAtomicLong) has no release yet:
            // made here, so that waiters are not left waiting.
            phase_ = phase::releasing;
            return {counter_step::create{released_, "", create_mode::persistent}};
        }
        return lower(*left, d.stat.version);
    }
    case phase::releasing:
        if (r.error && r.error != errc::node_exists && r.error != errc::no_node)
            return fail(r.error, ": creating " + quoted_path(released_));
        return finish();
    case phase::writing:
    case phase::writing_zero: return on_write(r);
    case phase::idle:
    case phase::finished: break;
    }
    return fail(make_error_code(errc::runtime_inconsistency), ": a reply in no step (a bug of zkr's)");
}

count_down_fsm::action count_down_fsm::on_write(const counter_reply& r) {
    if (!r.error) return finish();
    const std::size_t failed = failed_op(r);
    if (r.error == errc::node_exists && failed == 0) return finish();  // our first try was applied; its reply was lost
    if (r.error == errc::node_exists && failed == 2 && phase_ == phase::writing) {
        // "released" is there while the count was 1: made by hand, or by a bad count. The count
        // goes on to 0 without it.
        phase_ = phase::writing_zero;
        return {counter_step::write{{op::create{key_, "", create_mode::persistent},
                                     op::set_data{path_, encode_big_endian<std::int64_t>(0), version_}}}};
    }
    if (r.error == errc::bad_version || r.error == errc::node_exists) return read_again();  // someone counted down meanwhile
    if (r.error == errc::no_node) return fail(r.error, ": " + quoted_path(path_) + " was deleted");
    // The client's retry policy gave up on a lost connection: our key says whether it was
    // applied; this call cannot know.
    std::string what = " ";  // (appended, not " " + ...: GCC 12 warns falsely on that one)
    what += quoted_path(path_);
    // Given up on (the retry policy, or the client closing while it was sent or to be resent):
    // it may have been applied.
    if (may_have_been_applied(r.error)) {
        what += r.error == errc::client_closed ? " (the client closed before its answer: " : " (the retry policy gave up resending it after: ";
        what += r.error.message();
        what += "; " + quoted_path(key_) + " says whether it was applied)";
        return fail(make_error_code(errc::outcome_unknown), std::move(what));
    }
    return fail(r.error, std::move(what));
}

}  // namespace zkr::detail
