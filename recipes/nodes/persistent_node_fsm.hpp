// A persistent node's algorithm as a sans-io state machine: Curator's PersistentNode, with its
// bugs fixed. One chain of requests at a time keeps the node there:
// - create it (its parents first, as containers, when they are missing);
// - on node_exists, examine who owns the node in the way: this session's (a create whose reply
//   was lost) or no session's is taken over with our data; another session's is never adopted,
//   but watched until it goes;
// - a sequential create whose reply was lost is settled by listing the parent for our protection
//   prefix (a resend could make a second node); once made, a sequential node keeps its name
//   (CURATOR-483);
// - the chain ends with an exists watch on the node: its deletion starts the chain again, a
//   change watches it again.
// An input that asks for the chain while it runs asks for one more run once it ends.
//
// Whose node: the machine writes to or deletes only a node it knows is ours — one it made or
// took over on the current session and has not seen go since. set_data() writes only to such a
// node; close() deletes only such a node, and otherwise settles what an open create may have
// left (the reply in flight, or one more read) before deleting anything: a node at our path can
// be another session's by then.
//
// The machine does no I/O and knows no threads: persistent_node.cpp sends what it asks for and
// feeds back replies, watch events and session events (under its mutex); the unit fault test
// (tests/unit/persistent_node_fsm_fault_test.cpp) sends them to a model server with a fault at
// every step.
#pragma once

#include "toolkit/protected_create.hpp"
#include "zkr/error.hpp"
#include "zkr/log.hpp"
#include "zkr/types.hpp"

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace zkr::detail {

/// The requests the machine asks for; each one's answer is fed back to the input named.
namespace node_step {
struct idle {};         ///< nothing to send now (watching, waiting, or closed)
struct retry_later {};  ///< connection trouble: ensure() again in a moment or on reconnection
struct create {         ///< created()
    std::string path;
    std::string data;
    create_mode mode = create_mode::persistent;
};
struct make_parents { std::string path; };  ///< `path` and its ancestors, as containers: parents_made()
struct list { std::string parent; };        ///< get_children, no watch: listed()
struct examine { std::string path; };       ///< exists, no watch: examined()
struct take_over {                          ///< set_data at any version: taken_over()
    std::string path;
    std::string data;
    std::int64_t session = 0;  ///< sent only on this session (an ephemeral node's); 0: any
};
struct watch { std::string path; };         ///< exists with a watch: watched(), then watch_fired()
struct remove {                             ///< a guaranteed delete: a node of ours, found after close()
    std::string path;
    std::int64_t session = 0;  ///< the ephemeral node's session (deleted only on it); 0: a node of no session
};
}  // namespace node_step

class persistent_node_fsm {
public:
    using request = std::variant<node_step::idle, node_step::retry_later, node_step::create, node_step::make_parents,
                                 node_step::list, node_step::examine, node_step::take_over, node_step::watch,
                                 node_step::remove>;

    /// `new_prefix` makes a protection prefix ("_c_<uuid>-"): one at construction (with
    /// protection), another each time a create in doubt is found never made.
    persistent_node_fsm(std::string path, create_mode mode, std::string data, bool protection, bool create_parents,
                        std::function<std::string()> new_prefix);

    // --- inputs; `session` is the client's session as the input is fed (0: none) ---
    /// Starts a chain, or asks the running one for another run: at start, on a new session, on a
    /// reconnection while not watching, when the node was deleted, when a retry is due.
    request ensure(std::int64_t session);
    /// `owner`: the made node's ephemeralOwner (from its stat): the session layer may have resent
    /// the create on a later session than the one it was sent on.
    request created(std::int64_t session, error_code ec, const std::string& made, std::int64_t owner);
    request parents_made(std::int64_t session, error_code ec);
    request listed(std::int64_t session, error_code ec, const std::vector<std::string>& children);
    request examined(std::int64_t session, error_code ec, bool exists, std::int64_t owner);
    request taken_over(std::int64_t session, error_code ec);
    request watched(std::int64_t session, error_code ec, bool exists);
    /// The watch the last watch step set fired (one ended by an error is watch_lost()).
    request watch_fired(std::int64_t session, event_type type);
    /// The watch is gone without an event (session lost, removed): not watching any more; an
    /// ephemeral node of a lost session is no longer ours to write to or delete.
    void watch_lost() noexcept;
    /// New data, for every later create and take-over. Returns the node to write it to now: ""
    /// unless a node is known to be ours (the create or take-over under way or to come carries it).
    std::string set_data(std::string data);

    /// What close() leaves to clean up: our node (when known to be ours), the protection
    /// prefixes of creates an earlier listing found unmade (swept from `parent`), and `next`: a
    /// read that settles whether an open create left a node of ours (its answer is fed as usual).
    struct leftovers {
        std::string node;
        std::int64_t node_session = 0;  ///< the session `node` is of, when ephemeral (deleted only on it)
        std::string parent;
        std::vector<unsettled_create> doubts;
        request next = node_step::idle{};
    };
    /// Stops keeping the node. Later inputs ask only for what settles a create or take-over that
    /// was open: a listing or an examine, then a remove for a node of ours.
    leftovers close();

    // --- what the machine knows ---
    bool closed() const noexcept { return closed_; }
    bool busy() const noexcept { return busy_; }
    bool watching() const noexcept { return watching_; }
    bool made_once() const noexcept { return made_once_; }
    const std::string& actual() const noexcept { return actual_; }
    /// The session our node is of, when it is ephemeral (writes and deletes are sent only on it:
    /// on a later one the path may hold another session's node); 0 for a node of no session.
    std::int64_t node_session() const noexcept { return node_session_; }
    const std::string& data() const noexcept { return data_; }
    /// Log lines since the last call (the driver writes them outside its lock).
    std::vector<std::pair<log::level, std::string>> take_log() { return std::exchange(log_, {}); }

private:
    enum class phase { idle, creating, making_parents, listing, examining, taking_over, watching };

    request send_create();
    request made(const std::string& path);
    request settle_after_close(error_code ec);  // a create's or take-over's reply after close()
    request step_done(std::int64_t session, bool retry, bool now = false);
    request watch_node(const std::string& path);
    std::string creation_path() const;
    create_mode creation_mode() const;
    void note(log::level level, std::string line) { log_.emplace_back(level, std::move(line)); }

    const std::string path_, parent_;
    const create_mode mode_;
    const bool protection_, create_parents_;
    std::function<std::string()> new_prefix_;

    std::string data_;
    std::uint64_t data_gen_ = 0;
    std::string prefix_;  // with protection
    std::string actual_;  // our node, once made (or found by our prefix)

    phase phase_ = phase::idle;
    phase phase_before_close_ = phase::idle;  // what was in flight when close() came
    bool closed_ = false, busy_ = false, again_ = false, watching_ = false, made_once_ = false;
    bool owned_ = false;         // actual_ is ours: made or taken over on this session, not seen go since
    std::int64_t node_session_ = 0;  // the session actual_ is of when ephemeral, else 0
    std::int64_t take_session_ = 0;  // the take-over in flight: the session of the node it writes to
    bool taking_made_ = false;   // the take-over in flight is new data for a node we just made
    bool created_any_ = false;   // a create was ever sent
    // The request in flight: what it was sent with.
    std::string sent_path_;
    create_mode sent_mode_ = create_mode::persistent;
    std::uint64_t sent_gen_ = 0;
    std::int64_t sent_session_ = 0;
    std::string watched_path_;  // the node the last watch step was for (ours, or one in the way)

    bool in_doubt_ = false;  // a sequential create whose reply was lost: list before creating
    std::int64_t doubt_session_ = 0;
    std::vector<unsettled_create> doubts_;  // prefixes found unmade, swept at close
    std::set<std::int64_t> sessions_;       // every session a create was sent on (for the log)
    std::vector<std::pair<log::level, std::string>> log_;
};

}  // namespace zkr::detail
