#include "nodes/persistent_node_fsm.hpp"

#include "toolkit/sequence_queue.hpp"
#include "zkr/path.hpp"

#include <sstream>

namespace zkr::detail {

namespace {
create_mode without_sequence(create_mode m) {
    switch (m) {
        case create_mode::ephemeral_sequential: return create_mode::ephemeral;
        case create_mode::persistent_sequential: return create_mode::persistent;
        default: return m;
    }
}
bool is_ephemeral(create_mode m) { return m == create_mode::ephemeral || m == create_mode::ephemeral_sequential; }
std::string hex(std::int64_t session) {
    std::ostringstream s;
    s << "0x" << std::hex << session;
    return s.str();
}
}  // namespace

persistent_node_fsm::persistent_node_fsm(std::string path, create_mode mode, std::string data, bool protection,
                                         bool create_parents, std::function<std::string()> new_prefix)
    : path_(std::move(path)),
      parent_(parent_path(path_)),
      mode_(mode),
      protection_(protection || is_sequential(mode)),
      create_parents_(create_parents),
      new_prefix_(std::move(new_prefix)),
      data_(std::move(data)) {
    if (protection_) prefix_ = new_prefix_();
}

std::string persistent_node_fsm::creation_path() const {
    if (!actual_.empty()) return actual_;  // made before: the same name again (CURATOR-483)
    if (!protection_) return path_;
    return join_path(parent_, prefix_ + std::string(node_name(path_)));
}

create_mode persistent_node_fsm::creation_mode() const { return actual_.empty() ? mode_ : without_sequence(mode_); }

persistent_node_fsm::request persistent_node_fsm::ensure(std::int64_t session) {
    if (closed_) return node_step::idle{};
    if (busy_) {
        again_ = true;
        return node_step::idle{};
    }
    busy_ = true;
    again_ = false;
    watching_ = false;  // every chain ends with a watch of its own
    owned_ = false;     // until this chain makes or takes the node again
    sent_session_ = session;
    if (session) sessions_.insert(session);
    if (in_doubt_) {
        phase_ = phase::listing;
        return node_step::list{parent_};
    }
    return send_create();
}

persistent_node_fsm::request persistent_node_fsm::send_create() {
    phase_ = phase::creating;
    created_any_ = true;
    sent_path_ = creation_path();
    sent_mode_ = creation_mode();
    sent_gen_ = data_gen_;
    return node_step::create{sent_path_, data_, sent_mode_};
}

persistent_node_fsm::request persistent_node_fsm::created(std::int64_t session, error_code ec, const std::string& made_path,
                                                          std::int64_t owner) {
    // The session the node is of, when ephemeral: its stat's, not the one the create was sent on.
    const std::int64_t of = is_ephemeral(sent_mode_) ? (owner ? owner : session) : 0;
    if (closed_) {
        if (!ec) {
            busy_ = false;
            phase_ = phase::idle;
            return node_step::remove{made_path, of};  // landed after close()
        }
        return settle_after_close(ec);
    }
    if (!ec) {
        node_session_ = of;
        return made(made_path);
    }
    if (ec == errc::node_exists) {
        phase_ = phase::examining;
        return node_step::examine{sent_path_};
    }
    if (ec == errc::no_node && create_parents_) {
        phase_ = phase::making_parents;
        return node_step::make_parents{parent_};
    }
    if (is_sequential(sent_mode_) && (is_retryable(ec) || is_session_lost(ec)) && ec != errc::client_closed) {
        // Made or not (a persistent one outlives the session too): a listing of the parent
        // settles it by our prefix. Sent again, it could make a second node.
        in_doubt_ = true;
        doubt_session_ = sent_session_;
    }
    if (!is_retryable(ec) && !is_session_lost(ec)) note(log::level::error, "cannot make " + sent_path_ + ": " + ec.message());
    return step_done(session, is_retryable(ec));
}

persistent_node_fsm::request persistent_node_fsm::made(const std::string& path) {
    actual_ = path;
    owned_ = true;
    made_once_ = true;
    if (sent_gen_ != data_gen_) {
        // New data came while it was being made (or taken over): written before the watch.
        phase_ = phase::taking_over;
        taking_made_ = true;
        sent_path_ = path;
        sent_gen_ = data_gen_;
        take_session_ = node_session_;
        return node_step::take_over{path, data_, take_session_};
    }
    return watch_node(path);
}

// A create or take-over whose outcome is open when close() has come: what settles whether it
// left a node of ours (which is then removed).
persistent_node_fsm::request persistent_node_fsm::settle_after_close(error_code ec) {
    busy_ = false;
    phase_ = phase::idle;
    if (ec == errc::client_closed || ec == errc::no_node) return node_step::idle{};  // nothing made, or nothing more to do
    if (phase_before_close_ == phase::creating && is_sequential(sent_mode_)) {
        // Its name is the server's: found by our prefix.
        phase_ = phase::listing;
        return node_step::list{parent_};
    }
    phase_ = phase::examining;
    return node_step::examine{sent_path_};
}

persistent_node_fsm::request persistent_node_fsm::parents_made(std::int64_t session, error_code ec) {
    if (closed_) {
        busy_ = false;
        phase_ = phase::idle;
        return node_step::idle{};
    }
    if (ec && !is_retryable(ec) && !is_session_lost(ec)) note(log::level::error, "cannot make its parents: " + ec.message());
    return step_done(session, ec && is_retryable(ec), !ec);
}

persistent_node_fsm::request persistent_node_fsm::listed(std::int64_t session, error_code ec,
                                                         const std::vector<std::string>& children) {
    std::string found;
    if (!ec)
        for (const auto& c : children)
            if (has_prefix(c, prefix_)) found = join_path(parent_, c);
    if (closed_) {  // a create of ours in doubt: its node, if it stands, goes
        busy_ = false;
        phase_ = phase::idle;
        if (!found.empty()) return node_step::remove{found, is_ephemeral(mode_) ? session : 0};
        return node_step::idle{};
    }
    if (ec && ec != errc::no_node) return step_done(session, is_retryable(ec));
    in_doubt_ = false;
    if (found.empty()) {
        // Nothing made: a fresh name, and the old one swept at close while its session lives.
        doubts_.push_back({prefix_, doubt_session_, !is_ephemeral(mode_)});
        prefix_ = new_prefix_();
        return step_done(session, false, true);
    }
    actual_ = found;
    phase_ = phase::examining;
    sent_path_ = found;
    return node_step::examine{found};
}

persistent_node_fsm::request persistent_node_fsm::examined(std::int64_t session, error_code ec, bool exists,
                                                           std::int64_t owner) {
    if (closed_) {
        // Settling an open create: ours (this session's, or of no session: taken over) goes.
        busy_ = false;
        phase_ = phase::idle;
        if (!ec && exists && (owner == 0 || owner == session)) return node_step::remove{sent_path_, owner};
        return node_step::idle{};
    }
    if (ec) return step_done(session, is_retryable(ec));
    if (!exists) return step_done(session, false, true);  // gone meanwhile: create again
    if (owner == 0 || owner == session) {
        // Our own (a create whose reply was lost), or a node of no session: take it, with our data.
        if (owner == 0 && is_ephemeral(mode_))
            note(log::level::warning, "a persistent node is in the way at " + sent_path_ + "; taken over (it is not ephemeral)");
        phase_ = phase::taking_over;
        taking_made_ = false;
        sent_gen_ = data_gen_;
        take_session_ = owner;  // this session's ephemeral node, or one of no session
        return node_step::take_over{sent_path_, data_, take_session_};
    }
    // Another session's node: never adopted (writing to a node of an expired session of ours is
    // lost when the server deletes it; one of someone else's is theirs). Watched until it goes
    // with its session or is deleted; then ours is made. A session of ours zkr gave up is closed
    // on the server as soon as one answers, so that wait is short.
    note(log::level::warning, sent_path_ + " belongs to session " + hex(owner) +
                                  (sessions_.count(owner) ? " (an earlier one of ours)" : "") + "; waiting for it to go");
    return watch_node(sent_path_);
}

persistent_node_fsm::request persistent_node_fsm::taken_over(std::int64_t session, error_code ec) {
    if (closed_) {
        if (!ec) {
            busy_ = false;
            phase_ = phase::idle;
            return node_step::remove{sent_path_, take_session_};  // ours since the write: deleted with the rest
        }
        return settle_after_close(ec);
    }
    if (ec && taking_made_ && !is_retryable(ec) && !is_session_lost(ec) && ec != errc::no_node) {
        // New data for a node we made could not be written (an ACL, say): it is kept all the
        // same, with what it holds, and watched.
        note(log::level::error, "cannot write its new data to " + sent_path_ + ": " + ec.message());
        return watch_node(sent_path_);
    }
    if (ec) return step_done(session, is_retryable(ec), ec == errc::no_node);
    node_session_ = take_session_;
    return made(sent_path_);
}

persistent_node_fsm::request persistent_node_fsm::watch_node(const std::string& path) {
    phase_ = phase::watching;
    watched_path_ = path;
    return node_step::watch{path};
}

persistent_node_fsm::request persistent_node_fsm::watched(std::int64_t session, error_code ec, bool exists) {
    if (closed_) {  // the driver removes the watch the reply set
        busy_ = false;
        phase_ = phase::idle;
        return node_step::idle{};
    }
    // too_many_watches: refused by the client (its watches would not fit one reconnection's
    // request), nothing sent. Not left unwatched, where a delete would go unseen: the chain runs
    // again after the retry pause (making the node again if it went), until a watch is had.
    if (ec) return step_done(session, is_retryable(ec) || ec == errc::too_many_watches);
    if (!exists) return step_done(session, false, true);  // gone already: make it again
    watching_ = true;
    return step_done(session, false);
}

persistent_node_fsm::request persistent_node_fsm::watch_fired(std::int64_t session, event_type type) {
    watching_ = false;
    if (closed_) return node_step::idle{};
    if (type == event_type::deleted) {
        owned_ = false;
        return ensure(session);  // make it again
    }
    // Changed (by someone): the same node watched again, unless a chain runs (every chain ends
    // watching). The node watched, not ours: a node in the way whose data changes is still
    // waited out.
    if (busy_) return node_step::idle{};
    busy_ = true;
    again_ = false;
    return watch_node(watched_path_);
}

std::string persistent_node_fsm::set_data(std::string data) {
    data_ = std::move(data);
    ++data_gen_;
    return owned_ ? actual_ : std::string();
}

void persistent_node_fsm::watch_lost() noexcept {
    watching_ = false;
    if (is_ephemeral(mode_)) owned_ = false;  // it goes with its session; the path may be someone else's next
}

persistent_node_fsm::leftovers persistent_node_fsm::close() {
    leftovers out;
    if (closed_) return out;
    closed_ = true;
    phase_before_close_ = phase_;
    out.parent = parent_;
    out.doubts = std::move(doubts_);
    if (owned_) {
        out.node = actual_;
        out.node_session = node_session_;
        if (!busy_) {
            phase_ = phase::idle;
            return out;
        }
    }
    // A request in flight: its reply settles what it may have left (see the inputs after close).
    if (busy_ || !created_any_) return out;
    // Idle, with no node known to be ours: a create whose outcome is open may have left one
    // (a reply lost and the retry not yet sent, or a session lost before its answer). One read
    // settles it: a listing for our prefix when its name is the server's, else the node itself.
    if (in_doubt_) {
        phase_ = phase::listing;
        out.next = node_step::list{parent_};
    } else {
        phase_ = phase::examining;
        sent_path_ = creation_path();
        out.next = node_step::examine{sent_path_};
    }
    busy_ = true;
    return out;
}

persistent_node_fsm::request persistent_node_fsm::step_done(std::int64_t session, bool retry, bool now) {
    busy_ = false;
    phase_ = phase::idle;
    if (closed_) return node_step::idle{};
    if (now || again_) return ensure(session);
    if (retry) return node_step::retry_later{};
    return node_step::idle{};
}

}  // namespace zkr::detail
