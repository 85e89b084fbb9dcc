// zkr::testkit::proxy: one poll() thread forwards both ways, frames ZooKeeper's messages (a 4-byte
// length; the first message each way is the connect request or response, without a header; then
// requests begin {int32 xid, int32 type} and replies {int32 xid, int64 zxid, int32 err}) to count
// requests and to lose a chosen reply, and holds each chunk until its due time when delayed.
#include "zkr/testkit/proxy.hpp"

#include "address.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace zkr::testkit {
namespace {

constexpr std::uint32_t kMaxFrame = 256u << 20;     // larger "lengths" mean it is not ZooKeeper framing
constexpr std::size_t kHighWater = 4u << 20;         // stop reading a side while its peer has this much queued
constexpr std::size_t kMaxReadPerWakeup = 1u << 20;  // fairness between connections

std::uint32_t be32(const unsigned char* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

void set_nonblocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL, 0);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_nodelay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

using clock_type = std::chrono::steady_clock;

// Bytes held back until their time (a delay), or the cut of a connection whose reply was lost.
struct delayed_chunk {
    clock_type::time_point due;
    std::string bytes;
    bool cut = false;  // once due: deliver what came before, then close the connection
};

// One direction of a proxied connection.
struct stream {
    std::string in;          // bytes read from the source, not yet framed
    std::size_t in_off = 0;  // consumed prefix of `in`
    std::string out;         // bytes to write to the destination
    std::size_t out_off = 0;
    bool first = true;  // next frame is the ConnectRequest/ConnectResponse (no header)
    bool raw = false;   // not ZooKeeper framing (e.g. a four-letter word): pass through as is
    std::deque<delayed_chunk> delayed;  // in order: a chunk never overtakes an earlier one

    std::size_t pending_out() const { return out.size() - out_off; }
    void compact() {
        if (in_off == in.size()) {
            in.clear();
            in_off = 0;
        } else if (in_off > (64u << 10) && in_off > in.size() / 2) {
            in.erase(0, in_off);
            in_off = 0;
        }
        if (out_off == out.size()) {
            out.clear();
            out_off = 0;
        } else if (out_off > (64u << 10) && out_off > out.size() / 2) {
            out.erase(0, out_off);
            out_off = 0;
        }
    }
};

struct connection {
    int client_fd = -1;
    int server_fd = -1;
    stream c2s;  // client -> server
    stream s2c;  // server -> client
    bool closed = false;
    bool reply_to_lose = false;  // lose_next_reply matched a request on this connection
    std::int32_t lose_xid = 0;
    bool hold_reply = false;     // ...or hold_next_reply did: hold rather than lose it
    bool holding = false;        // the server's bytes from that reply on wait in `held`
    std::string held;
    bool cutting = false;           // a cut is on its way: nothing more is forwarded
    bool close_when_drained = false;  // the cut is due: close once what came before is written
};

}  // namespace

struct proxy::impl {
    std::string upstream;
    sockaddr_storage upstream_addr{};
    socklen_t upstream_len = 0;
    int listen_fd = -1;
    int wake_rd = -1, wake_wr = -1;
    int port = 0;

    std::atomic<bool> stopping{false};
    std::atomic<bool> blackholed{false};
    std::atomic<bool> requests_held{false};  // a one-way partition: the client's bytes wait in its socket
    std::atomic<bool> refusing{false};
    std::atomic<int> lost{0};
    std::atomic<int> held{0};
    std::atomic<std::size_t> accepted{0};
    std::atomic<std::size_t> active{0};
    std::atomic<std::int64_t> delay_ns{0};  // per direction

    mutable std::mutex state_mutex;  // guards the members below
    bool armed = false;
    bool armed_hold = false;  // hold_next_reply: the matched reply is held, not lost
    std::vector<int> armed_types;
    int armed_skip = 0;  // matching requests still to let through first
    std::string armed_path;  // if set, only requests naming this path match
    std::map<int, std::size_t> seen;
    std::map<std::pair<int, std::string>, std::size_t> seen_paths;

    std::mutex cmd_mutex;
    std::vector<std::packaged_task<void()>> commands;
    bool loop_done = false;  // guarded by cmd_mutex

    std::list<connection> conns;  // proxy thread only
    std::thread thread;

    explicit impl(std::string up) : upstream(std::move(up)) {}

    // Queues bytes for the other side: at once, or at their due time when delayed (or when
    // earlier bytes of that direction are still held).
    void emit(stream& s, const char* data, std::size_t n) {
        const auto delay = std::chrono::nanoseconds(delay_ns.load());
        if (delay.count() == 0 && s.delayed.empty()) {
            s.out.append(data, n);
            return;
        }
        s.delayed.push_back({clock_type::now() + delay, std::string(data, n), false});
    }

    // Moves the chunks that are due to their side's output; cuts a connection whose cut is due.
    // Returns when the next chunk falls due (max() if none).
    clock_type::time_point release_due() {
        auto next = clock_type::time_point::max();
        const auto now = clock_type::now();
        for (auto& c : conns) {
            for (int side = 0; side < 2 && !c.closed; ++side) {
                stream& s = side == 0 ? c.c2s : c.s2c;
                const int dst = side == 0 ? c.server_fd : c.client_fd;
                bool moved = false;
                while (!s.delayed.empty() && s.delayed.front().due <= now) {
                    auto chunk = std::move(s.delayed.front());
                    s.delayed.pop_front();
                    if (chunk.cut) {
                        c.close_when_drained = true;
                        break;
                    }
                    s.out += chunk.bytes;
                    moved = true;
                }
                if (c.closed) break;
                if (moved && !flush(dst, s)) close_conn(c);
                if (!c.closed && !s.delayed.empty()) next = std::min(next, s.delayed.front().due);
            }
        }
        return next;
    }

    // Delay set to zero: what is held is due now (the loop sends it, unless partitioned).
    void release_all() {
        for (auto& c : conns) {
            for (auto* s : {&c.c2s, &c.s2c}) {
                for (auto& chunk : s->delayed) chunk.due = clock_type::time_point::min();
            }
        }
    }

    // Closes a cut connection once what came before the cut is written (a slow reader's socket
    // may not have taken it all at once).
    void close_drained() {
        for (auto& c : conns) {
            if (c.closed || !c.close_when_drained) continue;
            if (c.s2c.pending_out() == 0 && c.c2s.pending_out() == 0) close_conn(c);
        }
    }

    void wake() {
        const char b = 1;
        [[maybe_unused]] auto n = ::write(wake_wr, &b, 1);  // EAGAIN: a wake-up is pending anyway
    }

    // Runs fn on the proxy thread and waits for it.
    void run_in_loop(std::function<void()> fn) {
        if (std::this_thread::get_id() == thread.get_id()) {
            fn();
            return;
        }
        std::packaged_task<void()> task(std::move(fn));
        auto done = task.get_future();
        {
            std::lock_guard<std::mutex> lock(cmd_mutex);
            if (loop_done) {  // the proxy thread has ended: nobody else touches the state
                task();
                return;
            }
            commands.push_back(std::move(task));
        }
        wake();
        done.get();
    }

    void run_commands() {
        std::vector<std::packaged_task<void()>> todo;
        {
            std::lock_guard<std::mutex> lock(cmd_mutex);
            todo.swap(commands);
        }
        for (auto& t : todo) t();
    }

    void close_conn(connection& c) {
        if (c.closed) return;
        c.closed = true;
        if (c.client_fd >= 0) ::close(c.client_fd);
        if (c.server_fd >= 0) ::close(c.server_fd);
        c.client_fd = c.server_fd = -1;
        active.fetch_sub(1);
    }

    // Writes as much of s.out as the socket takes. False on a hard error.
    static bool flush(int fd, stream& s) {
        while (s.pending_out() > 0) {
            ssize_t n = ::send(fd, s.out.data() + s.out_off, s.pending_out(), MSG_NOSIGNAL);
            if (n > 0) {
                s.out_off += static_cast<std::size_t>(n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                break;
            } else {
                return false;
            }
        }
        s.compact();
        return true;
    }

    // Frames what has been read on one direction and queues it for the other side.
    // Returns false if the connection was closed (a reply was lost on purpose).
    bool pump(connection& c, bool client_to_server) {
        stream& s = client_to_server ? c.c2s : c.s2c;
        while (true) {
            const std::size_t avail = s.in.size() - s.in_off;
            if (s.raw) {
                emit(s, s.in.data() + s.in_off, avail);
                s.in_off = s.in.size();
                break;
            }
            if (avail < 4) break;
            const auto* p = reinterpret_cast<const unsigned char*>(s.in.data()) + s.in_off;
            const std::uint32_t len = be32(p);
            if (len > kMaxFrame) {
                s.raw = true;
                continue;
            }
            if (avail < 4 + static_cast<std::size_t>(len)) break;
            const unsigned char* body = p + 4;
            bool lose = false;
            if (s.first) {
                s.first = false;
            } else if (client_to_server) {
                if (len >= 8) {
                    const auto xid = static_cast<std::int32_t>(be32(body));
                    const auto type = static_cast<std::int32_t>(be32(body + 4));
                    std::lock_guard<std::mutex> lock(state_mutex);
                    ++seen[type];
                    // Most requests start with their path (a jute string: int32 length, bytes).
                    std::string request_path;
                    if (len >= 12) {
                        const auto path_len = static_cast<std::int32_t>(be32(body + 8));
                        if (path_len >= 0 && 12 + static_cast<std::uint32_t>(path_len) <= len) {
                            request_path.assign(reinterpret_cast<const char*>(body + 12), path_len);
                            ++seen_paths[{type, request_path}];
                        }
                    }
                    if (armed && !c.reply_to_lose &&
                        std::find(armed_types.begin(), armed_types.end(), type) != armed_types.end() &&
                        (armed_path.empty() || armed_path == request_path) && armed_skip-- == 0) {
                        armed = false;
                        c.reply_to_lose = true;
                        c.hold_reply = armed_hold;
                        c.lose_xid = xid;
                    }
                    if (c.holding) {
                        // A request reaches the server: what it held back is sent (after this
                        // request, as a server woken by it would).
                        c.holding = false;
                        s.in_off += 4 + static_cast<std::size_t>(len);
                        emit(s, reinterpret_cast<const char*>(p), 4 + static_cast<std::size_t>(len));
                        std::string release;
                        release.swap(c.held);
                        emit(c.s2c, release.data(), release.size());
                        flush(c.client_fd, c.s2c);
                        continue;
                    }
                }
            } else if (c.reply_to_lose && len >= 16 && static_cast<std::int32_t>(be32(body)) == c.lose_xid) {
                c.reply_to_lose = false;
                if (c.hold_reply) {
                    c.holding = true;
                    held.fetch_add(1);
                } else {
                    lose = true;
                }
            }
            if (c.holding && !client_to_server) {
                c.held.append(reinterpret_cast<const char*>(p), 4 + static_cast<std::size_t>(len));
                s.in_off += 4 + static_cast<std::size_t>(len);
                continue;
            }
            s.in_off += 4 + static_cast<std::size_t>(len);
            if (lose) {
                // Count it first: the client sees the cut at once and the test may ask right away.
                lost.fetch_add(1);
                // Deliver what came before the reply, then cut the connection (when what came
                // before is due, if that is held).
                c.cutting = true;
                if (delay_ns.load() == 0 && s.delayed.empty()) {
                    c.close_when_drained = true;
                    flush(c.client_fd, c.s2c);
                } else {
                    s.delayed.push_back({clock_type::now() + std::chrono::nanoseconds(delay_ns.load()), {}, true});
                }
                s.compact();
                return false;
            }
            emit(s, reinterpret_cast<const char*>(p), 4 + static_cast<std::size_t>(len));
        }
        s.compact();
        return true;
    }

    // Reads what is available from one side; frames it; writes it to the other side.
    void on_readable(connection& c, bool from_client) {
        const int src = from_client ? c.client_fd : c.server_fd;
        const int dst = from_client ? c.server_fd : c.client_fd;
        stream& s = from_client ? c.c2s : c.s2c;
        bool eof = false;
        std::size_t total = 0;
        char buf[64 * 1024];
        while (total < kMaxReadPerWakeup) {
            ssize_t n = ::recv(src, buf, sizeof buf, 0);
            if (n > 0) {
                s.in.append(buf, static_cast<std::size_t>(n));
                total += static_cast<std::size_t>(n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            eof = true;  // orderly shutdown or error (ECONNRESET, ...)
            break;
        }
        if (c.cutting) {  // its cut is on the way: nothing after the lost reply is forwarded
            s.in.clear();
            s.in_off = 0;
            if (eof) close_conn(c);
            return;
        }
        if (!pump(c, from_client)) return;
        if (eof && !s.delayed.empty()) {
            // The end of the stream travels as late as the bytes before it.
            s.delayed.push_back({clock_type::now() + std::chrono::nanoseconds(delay_ns.load()), {}, true});
            c.cutting = true;
            return;
        }
        const bool ok = flush(dst, s);
        if (eof || !ok) close_conn(c);
    }

    void accept_all() {
        while (true) {
            int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                return;  // EAGAIN, or EMFILE & co: try again on the next wake-up
            }
            accepted.fetch_add(1);
            if (refusing.load()) {
                ::close(fd);
                continue;
            }
            int up = ::socket(upstream_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (up < 0) {
                ::close(fd);
                continue;
            }
            timeval tv{2, 0};
            ::setsockopt(up, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds the blocking connect
            int r;
            do {
                r = ::connect(up, reinterpret_cast<const sockaddr*>(&upstream_addr), upstream_len);
            } while (r < 0 && errno == EINTR);
            if (r < 0) {  // server down: the client sees its connection closed, as with a refused connect
                ::close(up);
                ::close(fd);
                continue;
            }
            set_nonblocking(up);
            set_nodelay(up);
            set_nodelay(fd);
            connection c;
            c.client_fd = fd;
            c.server_fd = up;
            conns.push_back(std::move(c));
            active.fetch_add(1);
        }
    }

    void loop() {
        std::vector<pollfd> pfds;
        std::vector<connection*> owners;  // pfds[2 + 2k], pfds[3 + 2k] belong to owners[k]
        while (!stopping.load()) {
            // Held chunks fall due on their own; a partition holds them too.
            const bool holding = blackholed.load();
            const auto next = holding ? clock_type::time_point::max() : release_due();
            conns.remove_if([](const connection& c) { return c.closed; });
            pfds.clear();
            owners.clear();
            pfds.push_back({wake_rd, POLLIN, 0});
            pfds.push_back({listen_fd, POLLIN, 0});
            for (auto& c : conns) {
                short ce = 0, se = 0;
                if (!holding) {
                    if (c.c2s.pending_out() < kHighWater && !requests_held.load()) ce |= POLLIN;
                    if (c.s2c.pending_out() > 0) ce |= POLLOUT;
                    if (c.s2c.pending_out() < kHighWater) se |= POLLIN;
                    if (c.c2s.pending_out() > 0) se |= POLLOUT;
                }
                pfds.push_back({c.client_fd, ce, 0});
                pfds.push_back({c.server_fd, se, 0});
                owners.push_back(&c);
            }
            int timeout_ms = -1;
            if (next != clock_type::time_point::max()) {
                auto left = std::chrono::duration_cast<std::chrono::microseconds>(next - clock_type::now()).count();
                timeout_ms = static_cast<int>(std::max<long long>(0, (left + 999) / 1000));
            }
            int r = ::poll(pfds.data(), pfds.size(), timeout_ms);
            if (r < 0) {
                if (errno == EINTR) continue;
                break;
            }
            if (pfds[0].revents) {
                char drain[256];
                while (::read(wake_rd, drain, sizeof drain) > 0) {
                }
                run_commands();
                if (stopping.load()) break;
            }
            if (pfds[1].revents & POLLIN) accept_all();
            for (std::size_t k = 0; k < owners.size(); ++k) {
                connection& c = *owners[k];
                for (int side = 0; side < 2 && !c.closed; ++side) {
                    const short rev = pfds[2 + 2 * k + static_cast<std::size_t>(side)].revents;
                    if (rev == 0) continue;
                    const bool from_client = side == 0;
                    if (blackholed.load()) {
                        // Forwarding is held; only notice sockets that died.
                        if (rev & (POLLERR | POLLHUP | POLLNVAL)) close_conn(c);
                        continue;
                    }
                    if (rev & POLLNVAL) {
                        close_conn(c);
                        continue;
                    }
                    if (rev & POLLOUT) {
                        const int fd = from_client ? c.client_fd : c.server_fd;
                        stream& s = from_client ? c.s2c : c.c2s;
                        if (!flush(fd, s)) {
                            close_conn(c);
                            continue;
                        }
                    }
                    if (rev & (POLLIN | POLLHUP | POLLERR)) on_readable(c, from_client);
                }
            }
            close_drained();
            conns.remove_if([](const connection& c) { return c.closed; });
        }
        for (auto& c : conns) close_conn(c);
        conns.clear();
        {
            std::lock_guard<std::mutex> lock(cmd_mutex);
            loop_done = true;
        }
        run_commands();  // never leave a caller waiting
    }
};

proxy::proxy(std::string upstream) : impl_(std::make_unique<impl>(std::move(upstream))) {
    auto& m = *impl_;
    auto where = detail::resolve(m.upstream, "zkr::testkit::proxy");
    m.upstream_addr = where.storage;
    m.upstream_len = where.length;

    int pipefd[2];
    if (::pipe2(pipefd, O_NONBLOCK | O_CLOEXEC) != 0) throw std::runtime_error(errno_text("zkr::testkit::proxy: pipe2"));
    m.wake_rd = pipefd[0];
    m.wake_wr = pipefd[1];

    auto fail = [&](const char* what) {
        std::string msg = errno_text(what);
        if (m.listen_fd >= 0) ::close(m.listen_fd);
        ::close(m.wake_rd);
        ::close(m.wake_wr);
        throw std::runtime_error("zkr::testkit::proxy: " + msg);
    };
    m.listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (m.listen_fd < 0) fail("socket");
    int one = 1;
    ::setsockopt(m.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    if (::bind(m.listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("bind");
    if (::listen(m.listen_fd, 128) != 0) fail("listen");
    socklen_t len = sizeof sa;
    if (::getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) fail("getsockname");
    m.port = ntohs(sa.sin_port);

    m.thread = std::thread([&m] { m.loop(); });
}

proxy::~proxy() {
    auto& m = *impl_;
    m.stopping.store(true);
    m.wake();
    if (m.thread.joinable()) m.thread.join();
    ::close(m.listen_fd);
    ::close(m.wake_rd);
    ::close(m.wake_wr);
}

std::string proxy::address() const { return "127.0.0.1:" + std::to_string(impl_->port); }
int proxy::port() const { return impl_->port; }
const std::string& proxy::upstream() const { return impl_->upstream; }

void proxy::lose_next_reply(std::vector<int> op_codes, int skip, std::string path) {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    impl_->armed_hold = false;
    impl_->armed_types = std::move(op_codes);
    impl_->armed_skip = skip;
    impl_->armed_path = std::move(path);
    impl_->armed = !impl_->armed_types.empty();
}

int proxy::replies_lost() const { return impl_->lost.load(); }

void proxy::hold_next_reply(std::vector<int> op_codes, std::string path) {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    impl_->armed_hold = true;
    impl_->armed_types = std::move(op_codes);
    impl_->armed_skip = 0;
    impl_->armed_path = std::move(path);
    impl_->armed = !impl_->armed_types.empty();
}

int proxy::replies_held() const { return impl_->held.load(); }

void proxy::partition(bool on) {
    impl_->run_in_loop([this, on] { impl_->blackholed.store(on); });
}

bool proxy::partitioned() const { return impl_->blackholed.load(); }

void proxy::hold_requests(bool on) {
    impl_->run_in_loop([this, on] { impl_->requests_held.store(on); });
}

void proxy::set_delay(std::chrono::microseconds per_direction) {
    if (per_direction.count() < 0) throw std::invalid_argument("zkr::testkit::proxy::set_delay: a negative delay");
    impl_->run_in_loop([this, per_direction] {
        impl_->delay_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(per_direction).count());
        if (per_direction.count() == 0) impl_->release_all();
    });
}

void proxy::refuse_connections(bool on) {
    impl_->run_in_loop([this, on] { impl_->refusing.store(on); });
}

void proxy::drop_connections() {
    impl_->run_in_loop([this] {
        for (auto& c : impl_->conns) impl_->close_conn(c);
    });
}

std::size_t proxy::requests_seen(int op) const {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    auto it = impl_->seen.find(op);
    return it == impl_->seen.end() ? 0 : it->second;
}

std::size_t proxy::requests_seen(int op, const std::string& path) const {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    auto it = impl_->seen_paths.find({op, path});
    return it == impl_->seen_paths.end() ? 0 : it->second;
}

std::size_t proxy::connections_accepted() const { return impl_->accepted.load(); }
std::size_t proxy::active_connections() const { return impl_->active.load(); }

}  // namespace zkr::testkit
