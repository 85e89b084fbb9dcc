// Plain data exchanged with ZooKeeper: stats, create modes, ACLs, results and events.
#pragma once

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
    std::int64_t mzxid = 0;
    std::int64_t ctime = 0;           ///< milliseconds since the epoch
    std::int64_t mtime = 0;
    std::int32_t version = 0;         ///< data version
    std::int32_t cversion = 0;        ///< children version
    std::int32_t aversion = 0;        ///< ACL version
    std::int64_t ephemeral_owner = 0; ///< session id of the owner, 0 for a persistent node
    std::int32_t data_length = 0;
    std::int32_t num_children = 0;
    std::int64_t pzxid = 0;
};

enum class create_mode {
    persistent,
    ephemeral,
    persistent_sequential,
    ephemeral_sequential,
    container,  ///< persistent, removed by the server once its last child is gone
};

constexpr bool is_sequential(create_mode m) noexcept {
    return m == create_mode::persistent_sequential || m == create_mode::ephemeral_sequential;
}

/// Permission bits of an ACL entry (ZooKeeper's ZOO_PERM_*).
namespace perms {
inline constexpr std::int32_t read = 1, write = 2, create = 4, remove = 8, admin = 16, all = 31;
}

struct acl_entry {
    std::int32_t permissions = perms::all;
    std::string scheme;  ///< "world", "auth", "digest", "ip", ...
    std::string id;
};
using acl = std::vector<acl_entry>;

/// world:anyone with every permission (ZooKeeper's OPEN_ACL_UNSAFE).
acl open_acl_unsafe();
/// Every permission for the creator's authenticated identities (CREATOR_ALL_ACL).
acl creator_all_acl();
/// world:anyone may read (READ_ACL_UNSAFE).
acl read_acl_unsafe();

/// Any data version (ZooKeeper's -1).
inline constexpr std::int32_t any_version = -1;

struct create_result {
    std::string path;  ///< the created path (with the sequence suffix for sequential nodes)
    zkr::stat stat;
};

struct data_result {
    std::string data;
    zkr::stat stat;
    zkr::watch watch;  ///< set when the read asked for one
};

struct children_result {
    std::vector<std::string> children;  ///< names, not paths; in the server's order
    zkr::stat stat;                     ///< the parent's stat
    zkr::watch watch;                   ///< set when the read asked for one
};

struct exists_result {
    bool exists = false;
    zkr::stat stat;  ///< zeroes when the node does not exist
    zkr::watch watch;  ///< set when the read asked for one (it fires on create, too)
};

/// Which kind of server-side watch a read leaves.
enum class watch_kind { data, child };

/// One operation of a multi (transaction).
namespace op {
struct create {
    std::string path;
    std::string data;
    create_mode mode = create_mode::persistent;
};
struct remove {
    std::string path;
    std::int32_t version = any_version;
};
struct set_data {
    std::string path;
    std::string data;
    std::int32_t version = any_version;
};
struct check {
    std::string path;
    std::int32_t version = any_version;
};
}  // namespace op
using multi_op = std::variant<op::create, op::remove, op::set_data, op::check>;

/// The outcome of one operation of a multi.
struct multi_op_result {
    zkr::error_code error;  ///< for a failed multi: the failing op's error; the others runtime_inconsistency/ok
    std::string path;       ///< created path, for op::create
    zkr::stat stat;         ///< for op::set_data
};

/// Connection states, in Curator's model.
enum class connection_state {
    connected,    ///< a new session is established (the first one, or a new one after `lost`)
    suspended,    ///< the connection dropped; the session may still be alive on the server
    reconnected,  ///< the connection is back, with the same session as before `suspended`
    lost,         ///< the session expired, or stayed suspended for a whole session timeout:
                  ///< its ephemeral nodes and watches are gone (or going)
    closed,       ///< the client was closed
};

const char* to_string(connection_state s) noexcept;

}  // namespace zkr
