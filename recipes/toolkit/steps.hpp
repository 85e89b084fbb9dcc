// The vocabulary shared by the recipes' sans-io state machines and the one driver that runs them
// (fsm_runner.hpp): the requests a machine asks for (steps) and what comes back (replies). A
// machine never does I/O; fsm_runner sends each step to the session and feeds back its reply,
// and the fault harness of the unit tests sends them to a model server with a failure injected
// at any step.
#pragma once

#include "listing.hpp"
#include "zkr/error.hpp"
#include "zkr/types.hpp"

#include <cassert>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace zkr::detail {

/// The session a recipe's node was made on is gone, and the node with it (a client's close is
/// not: its nodes go with the close, and the caller is told client_closed).
inline bool node_session_gone(error_code ec) { return is_session_lost(ec) && ec != errc::client_closed; }

/// What a machine asks for next. Each step carries only what belongs to it.
namespace step {
struct none {};  ///< nothing to send now: a reply is still due
/// create `path` + sequence (ephemeral, with `data`), then list `list`, back to back: the server
/// answers a session's requests in order, so the listing already shows the new node. Replies:
/// create_answered as soon as the create is, then created_and_listed.
struct create_and_list {
    std::string path;
    std::string data;
    std::string list;
};
struct create_parents { std::string path; };  ///< create `path` and its ancestors (containers)
/// list `path`; with `watch`, leave a child watch on it (waited for by a later `wait`).
struct list {
    std::string path;
    bool watch = false;
};
/// The transaction `ops`, then list `list`, back to back (the listing sees what it made).
/// Replies: multi_answered as soon as the transaction is, then multi_and_listed.
struct multi_and_list {
    std::vector<multi_op> ops;
    std::string list;
};
struct check_owner { std::string node; };  ///< exists(node): which session made it
/// get_children(node) leaving a child watch (a sequence node is ephemeral and has no children:
/// it fires only when the node goes) and, if `want_mark`, get_data(node) leaving a data watch
/// sent right before it (it fires when the node's data changes, or it goes). Then watch_set.
///
/// With `own` (our own node), also get_children(own) leaving a child watch, once per node: our
/// node's deletion by someone else then reaches us before any later departure (a session's
/// events arrive in the order they happened), so a departure is never taken for a hold of a
/// node that is gone (Netflix Curator #115).
struct watch {
    std::string node;
    bool want_mark = true;
    std::string own;
};
struct wait { std::string node; };          ///< wait for the watches the last `watch` or `list` left
struct remove_watch { std::string node; };  ///< remove what is left of them, then watch_removed
}  // namespace step

/// What comes back, for each step.
namespace reply {
struct created_and_listed {
    error_code create_error;
    create_result created;
    error_code list_error;
    listing children;  ///< shared with whoever else of the client the listing answered
};
/// The create of a create_and_list step was answered; its listing (shared with others of the
/// client) may still be due. Comes before that step's created_and_listed, which repeats it; a
/// machine given up meanwhile learns here of a node it would otherwise name only with both.
struct create_answered {
    error_code error;
    create_result created;
};
/// The same for a multi_and_list step's transaction.
struct multi_answered {
    error_code error;
    std::vector<multi_op_result> results;
};
struct parents_created { error_code error; };
struct multi_and_listed {
    error_code error;  ///< the first failing op's (the results say which), or the transport's
    std::vector<multi_op_result> results;
    error_code list_error;
    listing children;  ///< shared with whoever else of the client the listing answered
};
struct listed {
    error_code error;
    listing children;  ///< shared with whoever else of the client the listing answered
};
struct owner {
    error_code error;
    exists_result result;
};
/// A `watch` step's replies: `error` is the get_data's if the mark was wanted, else the
/// get_children's; `data` is the node's data when it was read.
struct watch_set {
    error_code error;
    bool data_read = false;
    std::string data;
    bool child_watch_set = false;
    bool own_gone = false;  ///< our own node does not exist (any more)
};
/// A watch of the last `watch` (or watched `list`) step fired, or ended with an error (its
/// session lost, or removed). `child_watch`: the child watch (else the data watch).
struct watch_fired {
    error_code error;
    event_type type = event_type::not_watching;
    bool child_watch = false;
    bool own_node = false;  ///< the watch on our own node (step::watch::own)
};
/// The watches are removed. `error`: a removal failed for its session (lost meanwhile).
struct watch_removed {
    error_code error;
};
}  // namespace reply

using any_reply = std::variant<reply::created_and_listed, reply::create_answered, reply::parents_created,
                               reply::multi_and_listed, reply::multi_answered, reply::listed, reply::owner,
                               reply::watch_set, reply::watch_fired, reply::watch_removed>;

/// A machine's answer: the next step (or its own `Done`), and our own nodes to delete first
/// (guaranteed, ordered before the step's requests).
template <class Done>
struct basic_action {
    std::variant<step::none, step::create_and_list, step::create_parents, step::multi_and_list, step::list,
                 step::check_owner, step::watch, step::wait, step::remove_watch, Done>
        next;
    std::vector<std::string> deletes;

    template <class Step>
    bool is() const noexcept { return std::holds_alternative<Step>(next); }
    template <class Step>
    const Step& as() const {
        assert(is<Step>());
        return std::get<Step>(next);
    }
};

}  // namespace zkr::detail
