// fault_proxy — a ZooKeeper-aware TCP proxy on 127.0.0.1 for fault injection in integration tests.
//
// Put address() into the client's connect string instead of the server's. The proxy understands
// ZooKeeper framing (4-byte big-endian length + body; the first message each way is the
// ConnectRequest / ConnectResponse without header; then requests start with {int32 xid, int32 type}
// and replies with {int32 xid, int64 zxid, int32 err}) so it can count requests by op type and drop
// the reply to a chosen request.
//
// One poll() thread does all socket I/O; the public methods are thread-safe. Methods that change
// forwarding (blackhole, refuse_connections, drop_all_connections) return once the proxy thread has
// applied the change. The destructor closes every socket and joins the thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace zkr::test {

// ZooKeeper op codes (org.apache.zookeeper.ZooDefs.OpCode), for lose_next_reply / requests_seen.
namespace zk_op {
inline constexpr int create = 1;
inline constexpr int remove = 2;  // "delete"
inline constexpr int exists = 3;
inline constexpr int get_data = 4;
inline constexpr int set_data = 5;
inline constexpr int get_acl = 6;
inline constexpr int set_acl = 7;
inline constexpr int get_children = 8;
inline constexpr int sync = 9;
inline constexpr int ping = 11;
inline constexpr int get_children2 = 12;
inline constexpr int check = 13;
inline constexpr int multi = 14;
inline constexpr int create2 = 15;
inline constexpr int reconfig = 16;
inline constexpr int check_watches = 17;
inline constexpr int remove_watches = 18;
inline constexpr int create_container = 19;
inline constexpr int create_ttl = 21;
inline constexpr int multi_read = 22;
inline constexpr int add_watch = 106;
inline constexpr int close_session = -11;
inline constexpr int set_watches = 101;
inline constexpr int set_watches2 = 105;
}  // namespace zk_op

class fault_proxy {
public:
    // Forwards to upstream_host_port ("127.0.0.1:2181", "localhost:2181"); listens on an
    // ephemeral port of 127.0.0.1. Throws std::runtime_error if it cannot listen or resolve.
    explicit fault_proxy(std::string upstream_host_port);
    ~fault_proxy();

    fault_proxy(const fault_proxy&) = delete;
    fault_proxy& operator=(const fault_proxy&) = delete;

    std::string address() const;  // "127.0.0.1:port" for the client's connect string
    int port() const;

    // One-shot: the next client request whose op type is in `types` is forwarded; when the
    // server's reply with that xid arrives, it is dropped and both sides of that connection are
    // closed (the server applied the request, the client sees connection loss). Replies queued
    // before it are still delivered. A later call replaces a pending, not yet matched arming.
    // `skip`: that many matching requests are let through first (the reply of the skip+1-th is
    // lost). `path`: if set, only requests naming that path (as the server sees it) match.
    void lose_next_reply(std::vector<int> types, int skip = 0, std::string path = {});
    int replies_lost() const;  // how many times lose_next_reply fired

    // on: stop forwarding in both directions but keep the sockets open (the client hears nothing
    // and runs into its own timeout). Bytes are held, not discarded: turning it off resumes the
    // streams intact. New connections are accepted but held too.
    void blackhole(bool on);
    // on: accept new connections and close them at once.
    void refuse_connections(bool on);
    // Close every proxied connection now (both sides).
    void drop_all_connections();

    // Client requests seen, by op type (after the ConnectRequest; pings are type 11).
    std::size_t requests_seen(int type) const;
    // Those of them that name `path` (the requests that start with a path: create, delete,
    // exists, getData, setData, getChildren, getChildren2, ...).
    std::size_t requests_seen(int type, const std::string& path) const;
    std::size_t connections_accepted() const;  // including refused ones
    std::size_t active_connections() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace zkr::test
