// zkr_delay_proxy — a TCP proxy that delays every byte by a fixed time in each direction: the
// benchmark's stand-in for a network with latency (this machine has no netem).
//
//   zkr_delay_proxy --listen 127.0.0.1:0 --target 127.0.0.1:2181 --delay-ms 1
//   zkr_delay_proxy --self-test --delay-ms 1 [--count 500]
//
// Proxy mode: accepts TCP connections on --listen (port 0: any free port), connects each to
// --target, and forwards bytes both ways. Every chunk read is stamped with the time it arrived
// (the kernel's receive timestamp, SO_TIMESTAMPNS, of the last segment read: so that how soon
// this thread got to read it does not add to the delay; the time of the read when there is none)
// and written no earlier than that + D (--delay-ms, may be fractional), in order: a chunk never
// overtakes an earlier one of its direction. An end of stream (FIN) travels the same way: the
// other side is shut down for writing D after the EOF was read, once all data before it is
// written; the connection is closed once both directions have ended. A reset or an error on
// either socket closes both after writing what is due. TCP_NODELAY on both sides. Prints one line
// "listening HOST:PORT" on stdout once it accepts, then runs until killed.
//
// One thread: epoll and one timerfd (absolute CLOCK_MONOTONIC deadlines, hrtimer precision: no
// ms rounding, no timer slack) set for the earliest chunk due across all connections. A timer
// wakes a thread some tens of µs late (a VM waking from idle), so it is set early by an estimate
// of that latency and the rest is spun; chunks falling due within it go out in the same wake-up.
// The thread runs SCHED_FIFO when allowed (root or CAP_SYS_NICE; --no-realtime: never), so that
// it is not left waiting for a CPU behind the servers and clients under load. Idle costs nothing;
// a chunk costs a receive, a timer re-arm, a send and up to two wake-ups.
//
// Self-test mode: starts an echo server and a proxy to it (in this process, on loopback), sends
// --count small messages through the proxy one at a time and --count directly, and prints one
// JSON line with the round trips (µs). Exits 0 if the p50 round trip through the proxy is
// 2·D ± 0.2 ms, else 1.
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <queue>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

std::int64_t mono_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "zkr_delay_proxy: %s\n", why.c_str());
    std::exit(1);
}

[[noreturn]] void die_errno(const std::string& what) { die(what + ": " + std::strerror(errno)); }

sockaddr_in parse_addr(const std::string& s) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos) die("expected HOST:PORT, got " + s);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::string host = s.substr(0, colon);
    if (host == "localhost") host = "127.0.0.1";
    if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) die("not an IPv4 address: " + host);
    try {
        int port = std::stoi(s.substr(colon + 1));
        if (port < 0 || port > 65535) throw std::out_of_range("port");
        a.sin_port = htons(static_cast<std::uint16_t>(port));
    } catch (const std::exception&) {
        die("bad port in " + s);
    }
    return a;
}

std::string format_addr(const sockaddr_in& a) {
    char host[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
}

void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_rx_timestamps(int fd) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// SCHED_FIFO for the calling thread (needs root or CAP_SYS_NICE): it runs as soon as it wakes,
/// ahead of the (SCHED_OTHER) servers and clients. Its work per wake-up is tiny.
void make_realtime(bool say) {
    sched_param sp{};
    sp.sched_priority = 1;
    int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    if (rc != 0 && say)
        std::fprintf(stderr, "zkr_delay_proxy: note: no SCHED_FIFO (%s): delays are less precise under load\n", std::strerror(rc));
}

// ------------------------------------------------------------------ the proxy

class proxy {
public:
    proxy(const sockaddr_in& listen_at, const sockaddr_in& target, std::int64_t delay_ns, bool realtime)
        : target_(target), delay_ns_(delay_ns), realtime_(realtime) {
        listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0) die_errno("socket");
        int one = 1;
        setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(listen_fd_, reinterpret_cast<const sockaddr*>(&listen_at), sizeof listen_at) != 0)
            die_errno("bind " + format_addr(listen_at));
        if (listen(listen_fd_, 1024) != 0) die_errno("listen");
        socklen_t len = sizeof bound_;
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound_), &len);
        epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
        timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (epoll_fd_ < 0 || timer_fd_ < 0) die_errno("epoll/timerfd");
        add(listen_fd_, EPOLLIN, &listen_tag_);
        add(timer_fd_, EPOLLIN, &timer_tag_);
    }

    const sockaddr_in& bound() const { return bound_; }
    // Self-test: how late each chunk went out (ns), under lateness_mutex.
    std::vector<double>* lateness = nullptr;
    std::mutex lateness_mutex;

    [[noreturn]] void run() {
        // Under load a woken thread may wait for a CPU for milliseconds; the network this stands
        // in for does not.
        if (realtime_) make_realtime(true);
        epoll_event events[128];
        for (;;) {
            int n = epoll_wait(epoll_fd_, events, 128, -1);
            if (n < 0) {
                if (errno == EINTR) continue;
                die_errno("epoll_wait");
            }
            for (int i = 0; i < n; ++i) {
                auto* tag = static_cast<fd_tag*>(events[i].data.ptr);
                if (tag == &listen_tag_) accept_all();
                else if (tag == &timer_tag_) on_timer();
                else on_socket(*tag, events[i].events);
            }
            if (!doomed_.empty()) doomed_.clear();  // connections closed in this turn
        }
    }

private:
    // What an epoll event refers to: the listener, the timer, or side 0/1 of a connection.
    struct fd_tag {
        std::uint64_t conn = 0;
        int side = 0;
    };
    struct chunk {
        std::int64_t due_ns;
        std::string data;  // empty: the end of the stream (EOF or reset) of this direction
        bool reset = false;
    };
    // Bytes read from side `from`, to be written to side 1 - from.
    struct direction {
        std::deque<chunk> pending;  // read, not yet due
        std::string out;            // due, not yet written (in order)
        std::size_t out_at = 0;
        std::size_t bytes = 0;      // pending + out, for back pressure
        std::int64_t last_due_ns = 0;
        bool read_done = false;     // no more reads from the source
        bool end_due = false;       // the end marker is due: shut down once `out` is written
        bool reset = false;         // ... and it was a reset: close the whole connection
        bool ended = false;         // destination shut down for writing
    };
    struct connection {
        std::uint64_t id = 0;
        int fd[2] = {-1, -1};  // 0: the client (accepted), 1: the target
        fd_tag tag[2];
        std::uint32_t interest[2] = {0, 0};
        bool polled[2] = {true, true};  // registered with epoll (a hung-up side is not: it would spin)
        bool dead = false;
        direction dir[2];      // dir[i]: from side i to side 1 - i
        ~connection() {
            for (int f : fd)
                if (f >= 0) close(f);
        }
    };
    struct due_entry {
        std::int64_t due_ns;
        std::uint64_t conn;
        int from;
        bool operator>(const due_entry& o) const { return due_ns > o.due_ns; }
    };

    static constexpr std::size_t high_water = 4 << 20;  // stop reading a source with this much in flight
    static constexpr std::size_t low_water = 1 << 20;

    sockaddr_in target_{};
    sockaddr_in bound_{};
    std::int64_t delay_ns_;
    bool realtime_;
    int listen_fd_ = -1, epoll_fd_ = -1, timer_fd_ = -1;
    fd_tag listen_tag_, timer_tag_;
    std::uint64_t next_id_ = 1;
    std::unordered_map<std::uint64_t, std::unique_ptr<connection>> conns_;
    std::vector<std::unique_ptr<connection>> doomed_;
    // When each direction has a chunk due (one entry per chunk; the earliest first).
    std::priority_queue<due_entry, std::vector<due_entry>, std::greater<>> schedule_;
    std::int64_t armed_ns_ = -1;      // the timer's expiry, or -1 (none)
    // A timer wakes this thread some time after its expiry (tens of µs in a VM, from idle). The
    // timer is set that much early, by an estimate that follows the low end of the wake-up
    // latencies seen, and the rest is spun: so chunks go out at their due time, not later, at the
    // cost of a few µs of CPU per wake-up.
    std::int64_t early_ns_ = 30000;
    static constexpr std::int64_t max_early_ns = 200000;

    void add(int fd, std::uint32_t ev, void* ptr) {
        epoll_event e{};
        e.events = ev;
        e.data.ptr = ptr;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e) != 0) die_errno("epoll_ctl");
    }

    void accept_all() {
        for (;;) {
            int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (cfd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK) std::fprintf(stderr, "zkr_delay_proxy: accept: %s\n", std::strerror(errno));
                return;
            }
            // Connect to the target (loopback: immediate; a blocking connect keeps this simple).
            int tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (tfd < 0 || connect(tfd, reinterpret_cast<const sockaddr*>(&target_), sizeof target_) != 0) {
                std::fprintf(stderr, "zkr_delay_proxy: connect %s: %s\n", format_addr(target_).c_str(), std::strerror(errno));
                if (tfd >= 0) close(tfd);
                close(cfd);
                continue;
            }
            set_nonblocking(tfd);
            set_nodelay(cfd);
            set_nodelay(tfd);
            set_rx_timestamps(cfd);
            set_rx_timestamps(tfd);
            auto c = std::make_unique<connection>();
            c->id = next_id_++;
            c->fd[0] = cfd;
            c->fd[1] = tfd;
            for (int s = 0; s < 2; ++s) {
                c->tag[s] = {c->id, s};
                c->interest[s] = EPOLLIN;
                add(c->fd[s], EPOLLIN, &c->tag[s]);
            }
            conns_.emplace(c->id, std::move(c));
        }
    }

    void arm() {
        std::int64_t want = schedule_.empty() ? 0 : std::max<std::int64_t>(1, schedule_.top().due_ns - early_ns_);
        if (want == armed_ns_ || (want == 0 && armed_ns_ <= 0)) return;
        itimerspec its{};
        if (want > 0) {
            its.it_value.tv_sec = want / 1000000000;
            its.it_value.tv_nsec = want % 1000000000;
        }
        timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);  // 0: disarm
        armed_ns_ = want == 0 ? -1 : want;
    }

    void on_timer() {
        std::uint64_t expirations;
        [[maybe_unused]] ssize_t ignored = read(timer_fd_, &expirations, sizeof expirations);  // one shot
        std::int64_t now = mono_ns();
        if (armed_ns_ > 0 && now >= armed_ns_) {
            // Follow the low end of the wake-up latency: down fast, up slowly.
            std::int64_t late = now - armed_ns_;
            early_ns_ += late < early_ns_ ? (late - early_ns_) / 4 : (late - early_ns_) / 32;
            early_ns_ = std::clamp<std::int64_t>(early_ns_, 0, std::min(max_early_ns, delay_ns_ / 2));
        }
        armed_ns_ = -1;
        // Send what is due. What falls due within the wake-up latency is waited for here, spinning:
        // a sleep would end later than that anyway (and costs more than the spin).
        std::int64_t spin_limit = std::max<std::int64_t>(early_ns_, 10000);
        while (!schedule_.empty()) {
            std::int64_t due = schedule_.top().due_ns;
            if (due > now) {
                if (due - now > spin_limit) break;
                while ((now = mono_ns()) < due) cpu_relax();
            }
            due_entry e = schedule_.top();
            schedule_.pop();
            auto it = conns_.find(e.conn);
            if (it != conns_.end()) release_due(*it->second, e.from, now);
        }
        arm();
    }

    // Moves what is due in direction `from` to its output and writes it.
    void release_due(connection& c, int from, std::int64_t now) {
        direction& d = c.dir[from];
        while (!d.pending.empty() && d.pending.front().due_ns <= now) {
            chunk& ch = d.pending.front();
            if (lateness && !ch.data.empty()) {
                std::lock_guard lock(lateness_mutex);
                lateness->push_back(double(mono_ns() - ch.due_ns) / 1e3);
            }
            if (ch.data.empty()) {
                d.end_due = true;
                d.reset = ch.reset;
            } else if (d.out_at == d.out.size()) {
                d.out = std::move(ch.data);
                d.out_at = 0;
            } else {
                d.out += ch.data;
            }
            d.pending.pop_front();
        }
        flush(c, from);
    }

    // Writes direction `from`'s due bytes to side 1 - from; handles its end once written.
    void flush(connection& c, int from) {
        direction& d = c.dir[from];
        int to = 1 - from;
        if (c.dead || d.ended) return;
        while (d.out_at < d.out.size()) {
            ssize_t n = send(c.fd[to], d.out.data() + d.out_at, d.out.size() - d.out_at, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                return destroy(c);  // the destination is gone (reset, broken pipe)
            }
            d.out_at += static_cast<std::size_t>(n);
            d.bytes -= static_cast<std::size_t>(n);
        }
        if (d.out_at == d.out.size()) {
            d.out.clear();
            d.out_at = 0;
            if (d.end_due) {
                if (d.reset) return destroy(c);
                shutdown(c.fd[to], SHUT_WR);
                d.ended = true;
                if (c.dir[to].ended) return destroy(c);
            }
        }
        update(c, from);
        update(c, to);
    }

    void update(connection& c, int side) {
        if (c.dead || !c.polled[side]) return;
        direction& in = c.dir[side];        // read from this side
        direction& out = c.dir[1 - side];   // written to this side
        std::uint32_t want = 0;
        if (!in.read_done && in.bytes < (c.interest[side] & EPOLLIN ? high_water : low_water)) want |= EPOLLIN;
        if (!out.ended && out.out_at < out.out.size()) want |= EPOLLOUT;
        if (want == c.interest[side]) return;
        epoll_event e{};
        e.events = want;
        e.data.ptr = &c.tag[side];
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd[side], &e);
        c.interest[side] = want;
    }

    void on_socket(const fd_tag& tag, std::uint32_t ev) {
        auto it = conns_.find(tag.conn);
        if (it == conns_.end()) return;
        connection& c = *it->second;
        int side = tag.side;
        if (ev & EPOLLOUT) {
            flush(c, 1 - side);
            if (c.dead) return;
        }
        if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_side(c, side);
        if (!c.dead && c.dir[side].read_done && (ev & (EPOLLHUP | EPOLLERR))) {
            // Hung up (both ways, or reset) and read to the end: level-triggered epoll would
            // report it again and again until the end falls due; stop polling this side. A write
            // to it still fails and closes the connection.
            epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd[side], nullptr);
            c.polled[side] = false;
        }
    }

    void read_side(connection& c, int side) {
        direction& d = c.dir[side];
        if (d.read_done) return;
        static char buf[64 * 1024];
        for (int rounds = 0; rounds < 4 && d.bytes < high_water && !c.dead; ++rounds) {
            std::int64_t arrived = 0;
            ssize_t n = receive(c.fd[side], buf, sizeof buf, arrived);
            if (n > 0) {
                enqueue(c, side, std::string(buf, static_cast<std::size_t>(n)), false, arrived);
                if (static_cast<std::size_t>(n) < sizeof buf) break;
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            // 0: EOF; < 0: reset or error. Either travels to the other side after the data before it.
            d.read_done = true;
            enqueue(c, side, std::string(), n < 0, mono_ns());
            break;
        }
        update(c, side);
    }

    // recv, and when the bytes arrived (CLOCK_MONOTONIC): the kernel's receive timestamp of the
    // last segment read (SO_TIMESTAMPNS), so that how soon this thread got to read them does not
    // add to the delay; the time of the read if there is none.
    static ssize_t receive(int fd, char* buf, std::size_t size, std::int64_t& arrived) {
        iovec iov{buf, size};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t n = recvmsg(fd, &msg, 0);
        std::int64_t now = mono_ns();
        arrived = now;
        if (n <= 0) return n;
        for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_TIMESTAMPNS) continue;
            timespec ts{}, rt{};
            std::memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            clock_gettime(CLOCK_REALTIME, &rt);
            std::int64_t age = (std::int64_t(rt.tv_sec) - ts.tv_sec) * 1000000000 + (rt.tv_nsec - ts.tv_nsec);
            if (ts.tv_sec != 0 && age >= 0 && age < 1000000000) arrived = now - age;
        }
        return n;
    }

    void enqueue(connection& c, int from, std::string data, bool reset, std::int64_t arrived) {
        direction& d = c.dir[from];
        // Never before an earlier chunk of this direction (the receive timestamps of segments
        // read together are those of the last one: they may go backwards).
        std::int64_t due = std::max(arrived + delay_ns_, d.last_due_ns);
        d.last_due_ns = due;
        d.bytes += data.size();
        d.pending.push_back({due, std::move(data), reset});
        if (delay_ns_ <= 0) return release_due(c, from, mono_ns());
        schedule_.push({due, c.id, from});
        arm();
    }

    void destroy(connection& c) {
        auto it = conns_.find(c.id);
        if (it == conns_.end()) return;
        c.dead = true;
        for (int s = 0; s < 2; ++s)
            if (c.polled[s]) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd[s], nullptr);
        // Freed after this epoll turn: the caller may still hold a reference.
        doomed_.push_back(std::move(it->second));
        conns_.erase(it);
    }
};

// ------------------------------------------------------------------ self-test

int connect_to(const sockaddr_in& a) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) die_errno("connect " + format_addr(a));
    set_nodelay(fd);
    return fd;
}

void read_exactly(int fd, char* p, std::size_t n) {
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) die("self-test: connection ended early");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

std::vector<double> ping(const sockaddr_in& a, int count, int warmup) {
    int fd = connect_to(a);
    char msg[64], reply[64];
    std::memset(msg, 'x', sizeof msg);
    std::vector<double> us;
    for (int i = 0; i < warmup + count; ++i) {
        auto t0 = mono_ns();
        if (send(fd, msg, sizeof msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof msg)) die_errno("self-test: send");
        read_exactly(fd, reply, sizeof reply);
        if (i >= warmup) us.push_back(double(mono_ns() - t0) / 1e3);
    }
    close(fd);
    std::sort(us.begin(), us.end());
    return us;
}

double pct(const std::vector<double>& v, double q) {
    return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(q * double(v.size() - 1) + 0.5))];
}

int self_test(double delay_ms, int count, bool realtime) {
    // Echo server: one thread per connection, blocking.
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in echo = parse_addr("127.0.0.1:0");
    if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&echo), sizeof echo) != 0 || listen(lfd, 16) != 0) die_errno("echo");
    socklen_t len = sizeof echo;
    getsockname(lfd, reinterpret_cast<sockaddr*>(&echo), &len);
    // The echo server and the pinging thread run as the proxy does (SCHED_FIFO if allowed), so
    // that the test measures the proxy rather than how soon the scheduler wakes them under load.
    if (realtime) make_realtime(false);
    std::thread([lfd, realtime] {
        for (;;) {
            int fd = accept(lfd, nullptr, nullptr);
            if (fd < 0) continue;
            set_nodelay(fd);
            std::thread([fd, realtime] {
                if (realtime) make_realtime(false);
                char buf[4096];
                for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;)
                    if (send(fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) break;
                close(fd);
            }).detach();
        }
    }).detach();
    auto* p = new proxy(parse_addr("127.0.0.1:0"), echo, std::llround(delay_ms * 1e6), realtime);
    sockaddr_in via = p->bound();
    std::vector<double> late;
    p->lateness = &late;
    std::thread([p] { p->run(); }).detach();

    int warmup = std::max(5, count / 20);
    auto direct = ping(echo, count, warmup);
    auto proxied = ping(via, count, warmup);
    {
        std::lock_guard lock(p->lateness_mutex);
        p->lateness = nullptr;
        std::sort(late.begin(), late.end());
    }
    double p50 = pct(proxied, 0.5), want = 2 * delay_ms * 1e3;
    bool ok = std::fabs(p50 - want) <= 200;
    // rtt_*: the round trip through the proxy; direct_p50_us: without it; send_late_*: how long
    // after its due time the proxy wrote a chunk (its own timing error, before the receiver wakes).
    std::printf("{\"delay_ms\": %g, \"count\": %d, \"rtt_p50_us\": %.1f, \"rtt_p99_us\": %.1f, \"rtt_min_us\": %.1f, "
                "\"rtt_max_us\": %.1f, \"direct_p50_us\": %.1f, \"added_one_way_p50_us\": %.1f, "
                "\"send_late_p50_us\": %.1f, \"send_late_p99_us\": %.1f, \"expected_us\": %.1f, "
                "\"tolerance_us\": 200, \"ok\": %s}\n",
                delay_ms, count, p50, pct(proxied, 0.99), pct(proxied, 0), pct(proxied, 1), pct(direct, 0.5),
                (p50 - pct(direct, 0.5)) / 2, pct(late, 0.5), pct(late, 0.99), want, ok ? "true" : "false");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);  // the proxy and echo threads run forever
}

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "zkr_delay_proxy: %s\n"
                 "usage: zkr_delay_proxy --listen HOST:PORT --target HOST:PORT --delay-ms D [--no-realtime]\n"
                 "       zkr_delay_proxy --self-test --delay-ms D [--count N] [--no-realtime]\n",
                 why.c_str());
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::string listen_at, target;
    double delay_ms = -1;
    bool test = false, realtime = true;
    int count = 500;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage("missing value for " + a);
            return argv[++i];
        };
        try {
            if (a == "--listen") listen_at = value();
            else if (a == "--target") target = value();
            else if (a == "--delay-ms") delay_ms = std::stod(value());
            else if (a == "--count") count = std::stoi(value());
            else if (a == "--self-test") test = true;
            else if (a == "--no-realtime") realtime = false;
            else usage("unknown argument " + a);
        } catch (const std::logic_error&) {
            usage("bad value for " + a);
        }
    }
    if (!(delay_ms >= 0) || delay_ms > 60000) usage("--delay-ms D (0 <= D <= 60000) is needed");
    if (count < 1) usage("--count must be positive");
    std::signal(SIGPIPE, SIG_IGN);
    rlimit nofile{};  // two descriptors per connection: allow as many as the hard limit does
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // wake-ups on time, not up to 50 µs late
    if (test) return self_test(delay_ms, count, realtime);
    if (listen_at.empty() || target.empty()) usage("--listen and --target are needed");
    proxy p(parse_addr(listen_at), parse_addr(target), std::llround(delay_ms * 1e6), realtime);
    std::printf("listening %s\n", format_addr(p.bound()).c_str());
    std::fflush(stdout);
    p.run();
}
