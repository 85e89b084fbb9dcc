/// \file
/// zkr::testkit::proxy — a ZooKeeper-aware TCP proxy on loopback for fault injection: put its
/// address in a client's connect string instead of the server's, then partition the client,
/// delay its traffic, cut its connections, lose the reply to a chosen request, count what it sent.
#pragma once
#include "zkr/testkit/export.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace zkr::testkit {

/// ZooKeeper's request op codes (org.apache.zookeeper.ZooDefs.OpCode), for proxy::lose_next_reply
/// and proxy::requests_seen.
namespace op_code {
inline constexpr int create = 1;            ///< create
inline constexpr int remove = 2;            ///< delete
inline constexpr int exists = 3;            ///< exists
inline constexpr int get_data = 4;          ///< getData
inline constexpr int set_data = 5;          ///< setData
inline constexpr int get_acl = 6;           ///< getACL
inline constexpr int set_acl = 7;           ///< setACL
inline constexpr int get_children = 8;      ///< getChildren
inline constexpr int sync = 9;              ///< sync
inline constexpr int ping = 11;             ///< ping
inline constexpr int get_children2 = 12;    ///< getChildren with a stat (what libzookeeper_mt sends)
inline constexpr int check = 13;            ///< check (in a multi)
inline constexpr int multi = 14;            ///< multi (a transaction)
inline constexpr int create2 = 15;          ///< create with a stat
inline constexpr int reconfig = 16;         ///< reconfig
inline constexpr int check_watches = 17;    ///< checkWatches
inline constexpr int remove_watches = 18;   ///< removeWatches
inline constexpr int create_container = 19; ///< create a container node
inline constexpr int create_ttl = 21;       ///< create a TTL node
inline constexpr int multi_read = 22;       ///< multiRead
inline constexpr int set_watches = 101;     ///< setWatches (after a reconnection)
inline constexpr int set_watches2 = 105;    ///< setWatches2 (after a reconnection)
inline constexpr int add_watch = 106;       ///< addWatch
inline constexpr int close_session = -11;   ///< closeSession
}  // namespace op_code

/// A TCP proxy on 127.0.0.1 (a free port) in front of one server (or any host:port). It reads
/// ZooKeeper's framing both ways, so it can count requests by op code and path and lose the reply
/// to a chosen request; anything else (a four-letter word) passes through as it is.
///
/// One thread of its own does all the socket work; every method is thread-safe, and those that
/// change forwarding return once the proxy applies the change. Destruction closes every
/// connection and joins the thread.
class ZKR_TESTKIT_EXPORT proxy {
public:
    /// A proxy to `upstream` ("host:port", "[v6]:port"). Throws std::invalid_argument for a
    /// malformed address and std::runtime_error naming it when it does not resolve.
    explicit proxy(std::string upstream);
    ~proxy();
    proxy(const proxy&) = delete;
    proxy& operator=(const proxy&) = delete;

    /// "127.0.0.1:port": for the client's connect string.
    std::string address() const;
    /// The port it listens on.
    int port() const;
    /// What it forwards to.
    const std::string& upstream() const;

    /// on: a network partition — nothing crosses either way and the connections stay open (the
    /// client hears nothing and runs into its own timeouts); new connections are accepted but
    /// held too. Bytes are held, not dropped: off, the streams resume intact, as TCP would.
    void partition(bool on);
    /// Whether a partition is on.
    bool partitioned() const;
    /// on: a one-way partition — nothing the client sends reaches the server (its pings neither:
    /// the server expires a session that stays silent for its timeout), while what the server
    /// sends still reaches the client (replies to what it had sent, watch events; a client that
    /// keeps hearing events never times its connection out). Off: what the client sent follows,
    /// intact. A connection the server closes meanwhile closes on the client's side too.
    void hold_requests(bool on);
    /// Delays every byte by `per_direction` each way (a round trip costs twice that), in order.
    /// Zero (the default) forwards at once.
    void set_delay(std::chrono::microseconds per_direction);
    /// on: new connections are accepted and closed at once (a server that refuses).
    void refuse_connections(bool on);
    /// Closes every proxied connection now, both sides (a connection reset).
    void drop_connections();

    /// One-shot: the next request whose op code is in `op_codes` (and, if `path` is set, that
    /// names it as the server sees it, chroot included) is forwarded; when the server's reply to
    /// it comes, the reply is dropped and the connection closed on both sides — the server
    /// applied the request, the client sees a connection loss. `skip`: that many matching
    /// requests are let through first. A later call replaces one not yet matched.
    void lose_next_reply(std::vector<int> op_codes, int skip = 0, std::string path = {});
    /// How many replies lose_next_reply() dropped.
    int replies_lost() const;
    /// One-shot: the reply to the next request whose op code is in `op_codes` (and that names
    /// `path`, if set) is held, with everything the server sends after it, until the client sends
    /// its next request; then the held bytes follow that request's. The connection stays open: a
    /// server that answers nothing until a request wakes it (ZooKeeper 3.6.0 to 3.8.0's
    /// ZOOKEEPER-4537). A later call, or lose_next_reply(), replaces one not yet matched.
    void hold_next_reply(std::vector<int> op_codes, std::string path = {});
    /// How many replies hold_next_reply() held.
    int replies_held() const;

    /// Requests seen (forwarded or held) with `op` (pings too: op_code::ping).
    std::size_t requests_seen(int op) const;
    /// Those of them naming `path` (the requests that begin with a path: create, delete, exists,
    /// getData, setData, getChildren, ...).
    std::size_t requests_seen(int op, const std::string& path) const;
    /// Connections accepted so far, refused ones included.
    std::size_t connections_accepted() const;
    /// Connections open now.
    std::size_t active_connections() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace zkr::testkit
