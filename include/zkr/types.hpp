/// \file
/// Plain data exchanged with ZooKeeper: stats, create modes, ACLs, results and events.
#pragma once
#include "zkr/export.hpp"

#include "zkr/watch.hpp"

#include <cstdint>
#include <string>
#include "zkr/error.hpp"
#include <variant>
#include <vector>

namespace zkr {

/// A znode's metadata, as the server reports it.
struct stat {
    std::int64_t czxid = 0;           ///< zxid of the create: ensemble-wide, monotonic (zkr's fencing token)
    std::int64_t mzxid = 0;           ///< zxid of the last change of the data
    std::int64_t ctime = 0;           ///< milliseconds since the epoch
    std::int64_t mtime = 0;           ///< time of the last change of the data, milliseconds since the epoch
    std::int32_t version = 0;         ///< data version
    std::int32_t cversion = 0;        ///< children version
    std::int32_t aversion = 0;        ///< ACL version
    std::int64_t ephemeral_owner = 0; ///< session id of the owner, 0 for a persistent node
    std::int32_t data_length = 0;     ///< bytes of data
    std::int32_t num_children = 0;    ///< number of children
    std::int64_t pzxid = 0;           ///< zxid of the last change of the children
};

/// What kind of node a create makes.
enum class create_mode {
    persistent,             ///< stays until deleted
    ephemeral,              ///< deleted by the server when the session that made it ends
    persistent_sequential,  ///< persistent, with a 10-digit counter appended to its name
    ephemeral_sequential,   ///< ephemeral, with a 10-digit counter appended (what lock nodes are)
    container,  ///< persistent, removed by the server once it has had children and has none left
};

/// True for the sequential modes (their creates are never retried blindly).
constexpr bool is_sequential(create_mode m) noexcept {
    return m == create_mode::persistent_sequential || m == create_mode::ephemeral_sequential;
}

/// Permission bits of an ACL entry (ZooKeeper's ZOO_PERM_*).
namespace perms {
/// \var read
/// Read the node's data and list its children.
/// \var write
/// Set the node's data.
/// \var create
/// Create children.
/// \var remove
/// Delete children (ZooKeeper checks a delete against the parent's ACL).
/// \var admin
/// Set the node's ACL.
/// \var all
/// Every permission.
inline constexpr std::int32_t read = 1, write = 2, create = 4, remove = 8, admin = 16, all = 31;
}

/// One entry of a node's access control list: who (scheme and id) may do what (permissions).
struct acl_entry {
    std::int32_t permissions = perms::all;  ///< zkr::perms bits, or-ed
    std::string scheme{};  ///< "world", "auth", "digest", "ip", ...
    std::string id{};      ///< whom, in the scheme's terms ("anyone" for world, "user:base64(sha1(user:password))" for digest)
};
/// A node's access control list (client_options::default_acl for the nodes a client creates).
using acl = std::vector<acl_entry>;

/// world:anyone with every permission (ZooKeeper's OPEN_ACL_UNSAFE).
ZKR_EXPORT acl open_acl_unsafe();
/// Every permission for the creator's authenticated identities (CREATOR_ALL_ACL).
ZKR_EXPORT acl creator_all_acl();
/// world:anyone may read (READ_ACL_UNSAFE).
ZKR_EXPORT acl read_acl_unsafe();

/// Any data version (ZooKeeper's -1).
inline constexpr std::int32_t any_version = -1;

/// What a create completes with.
struct create_result {
    std::string path{};  ///< the created path (with the sequence suffix for sequential nodes)
    zkr::stat stat;    ///< the new node's stat (its czxid, ephemeral owner, ...)
};

/// What get_data completes with.
struct data_result {
    std::string data{};  ///< the node's data
    zkr::stat stat;    ///< the node's stat
    zkr::watch watch;  ///< set when the read asked for one
};

/// What get_children completes with.
struct children_result {
    std::vector<std::string> children{};  ///< names, not paths; in the server's order
    zkr::stat stat;                     ///< the parent's stat
    zkr::watch watch;                   ///< set when the read asked for one
};

/// What exists completes with.
struct exists_result {
    bool exists = false;  ///< whether the node exists
    zkr::stat stat;  ///< zeroes when the node does not exist
    zkr::watch watch;  ///< set when the read asked for one (it fires on create, too)
};

/// Which kind of server-side watch a read leaves.
enum class watch_kind { data, child };

/// One operation of a multi (transaction).
namespace op {
/// Creates a node (as client::create).
struct create {
    std::string path{};  ///< the node (the prefix, for a sequential mode)
    std::string data{};  ///< its data
    create_mode mode = create_mode::persistent;  ///< what kind of node
};
/// Deletes a node (as client::remove).
struct remove {
    std::string path{};                     ///< the node
    std::int32_t version = any_version;   ///< only at this data version (any_version: any)
};
/// Replaces a node's data (as client::set_data).
struct set_data {
    std::string path{};                     ///< the node
    std::string data{};                     ///< its new data
    std::int32_t version = any_version;   ///< only at this data version (any_version: any)
};
/// Changes nothing, but fails the whole multi unless the node exists (errc::no_node) and, unless
/// `version` is any_version, is at that data version (errc::bad_version).
struct check {
    std::string path{};                     ///< the node
    std::int32_t version = any_version;   ///< the data version required (any_version: any)
};
/// A hold's promise, checked by the server in the same transaction as the writes beside it:
/// changes nothing, but fails the whole multi with errc::lock_lost unless the hold's node (and
/// every node of `also`) still exists. Made by the holds' guard() (a lock held, a lock_hold, a
/// lease, a leading latch, a multi_lock's parts).
struct guard {
    std::string path{};               ///< the hold's node
    std::string what{};               ///< what it guards, for messages (e.g. "lock /orders/stock")
    std::vector<std::string> also{};  ///< further nodes that must all exist (a multi-lock's other parts)
};
}  // namespace op
/// One operation of client::multi.
using multi_op = std::variant<op::create, op::remove, op::set_data, op::check, op::guard>;

/// The outcome of one operation of a multi.
struct multi_op_result {
    zkr::error_code error;  ///< for a failed multi: the failing op's error; the others runtime_inconsistency/ok
    std::string path{};       ///< created path, for op::create
    zkr::stat stat;         ///< for op::set_data
};

/// Connection states, in Curator's model (plus `connecting`, which Curator's listeners never see
/// either: it is where a client starts, not a change).
enum class connection_state {
    connected,    ///< a new session is established (the first one, or a new one after `lost`)
    suspended,    ///< the connection dropped; the session may still be alive on the server
    reconnected,  ///< the connection is back, with the same session as before `suspended`
    lost,         ///< the session expired, or stayed suspended for a whole session timeout:
                  ///< its ephemeral nodes and watches are gone (or going)
    closed,       ///< the client was closed
    connecting,   ///< no session yet: the client has not connected since it was made. Only
                  ///< client::state() says it (before the first `connected`, or `closed`);
                  ///< listeners and async_next_state() are never told it, and it does not come
                  ///< back after a session is lost (that is `lost`, then `connected`)
};

/// The state's name ("connected", "suspended", ...).
ZKR_EXPORT const char* to_string(connection_state s) noexcept;

}  // namespace zkr
