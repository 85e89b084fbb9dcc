#include "support/curator_driver.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <sstream>

#include <pthread.h>
#include <signal.h>

namespace zkr::test {

namespace {

using clock = std::chrono::steady_clock;

bool safe_char(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           std::string_view("-._~/@+,:=").find(static_cast<char>(c)) != std::string_view::npos;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string t; in >> t;) out.push_back(t);
    return out;
}

std::string join(const std::vector<std::string>& v, std::size_t from = 0) {
    std::string out;
    for (std::size_t i = from; i < v.size(); ++i) out += (i > from ? " " : "") + v[i];
    return out;
}

std::string ms_arg(std::chrono::milliseconds d) { return std::to_string(std::max<long long>(0, d.count())); }

// Writes a line to the driver with SIGPIPE blocked (a driver that died must be an error, not
// the end of the test process).
void write_no_sigpipe(child_process& p, const std::string& line) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    std::string error;
    try {
        p.write_line(line);
    } catch (const std::exception& e) {
        error = e.what();
    }
    // Take a SIGPIPE this write raised before unblocking.
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (!error.empty()) throw std::runtime_error("writing to the Curator driver failed (it exited?): " + error);
}

}  // namespace

std::string curator_encode(std::string_view s) {
    if (s.empty()) return "\"\"";
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (safe_char(c)) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::string curator_decode(std::string_view t) {
    if (t == "\"\"") return "";
    auto digit = [&](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw std::invalid_argument("bad %-escape in '" + std::string(t) + "'");
    };
    std::string out;
    for (std::size_t i = 0; i < t.size(); ++i) {
        if (t[i] != '%') {
            out += t[i];
            continue;
        }
        if (i + 2 >= t.size()) throw std::invalid_argument("bad %-escape in '" + std::string(t) + "'");
        out += static_cast<char>(digit(t[i + 1]) * 16 + digit(t[i + 2]));
        i += 2;
    }
    return out;
}

const std::string& curator_line::what() const {
    static const std::string none;
    return kind == "ev" && !args.empty() ? args[0] : none;
}

const std::string& curator_line::arg(std::size_t i) const {
    if (i + 1 >= args.size()) throw std::out_of_range("event '" + text + "' has no argument " + std::to_string(i));
    return args[i + 1];
}

// ------------------------------------------------------------------ process

curator_session::curator_session(const std::string& connect) : curator_session(connect, options{}) {}

curator_session::curator_session(const std::string& connect, options o)
    : options_(o),
      process_("CURATOR_SESSION_MS=" + std::to_string(o.session_timeout.count()) + " exec " +
               curator_command("session " + connect)) {
    auto deadline = clock::now() + options_.ready_timeout;
    while (log_.empty()) {
        if (!pump(deadline)) fail("no `ready` from the Curator driver within " + ms_arg(options_.ready_timeout) + " ms");
    }
    const auto& first = log_.front();
    if (first.kind != "ready") fail("the Curator driver's first line is not `ready`");
    session_id_ = first.subject;
    taken_[0] = true;
}

curator_session::~curator_session() {
    try {
        if (!ended_) {
            write_no_sigpipe(process_, "0 exit");
            auto deadline = clock::now() + std::chrono::seconds(10);
            while (!ended_ && pump(deadline)) {
            }
        }
    } catch (...) {
        // the process may have died; child_process's destructor reaps or kills it
    }
    process_.close_input();
}

void curator_session::kill(int signal) { ::kill(process_.pid(), signal); }

bool curator_session::pump(clock::time_point deadline) {
    if (ended_) fail("the Curator driver's output has ended");
    auto left = deadline - clock::now();
    if (left <= clock::duration::zero()) return false;
    // read_line's timeout is whole milliseconds and it may return up to one early: ask for a
    // little more, so that a return before our deadline can only mean the end of the output.
    auto text = process_.read_line(std::chrono::ceil<ms>(left) + ms(2));
    if (!text) {
        if (clock::now() < deadline) {
            ended_ = true;
            fail("the Curator driver exited (end of its output)");
        }
        return false;
    }
    curator_line l;
    l.text = *text;
    auto tokens = split(*text);
    if (tokens.size() < 3) fail("malformed line from the Curator driver: '" + *text + "'");
    l.kind = tokens[0];
    try {
        l.seq = std::stoull(tokens[1]);
        l.time = clock::time_point(std::chrono::microseconds(std::stoll(tokens[2])));
    } catch (const std::exception&) {
        fail("malformed line from the Curator driver: '" + *text + "'");
    }
    if (l.kind == "ok" || l.kind == "ev" || l.kind == "ready") {
        if (tokens.size() < 4) fail("malformed line from the Curator driver: '" + *text + "'");
        l.subject = tokens[3];
        l.args.assign(tokens.begin() + 4, tokens.end());
    } else if (l.kind == "err") {
        if (tokens.size() < 5) fail("malformed line from the Curator driver: '" + *text + "'");
        l.subject = tokens[3];
        l.args = {tokens[4], join(tokens, 5)};
    } else if (l.kind == "bye") {
        ended_ = true;
    } else {
        fail("unknown line from the Curator driver: '" + *text + "'");
    }
    if (!log_.empty() && l.seq != log_.back().seq + 1)
        fail("the Curator driver's sequence jumped from " + std::to_string(log_.back().seq) + " to " + std::to_string(l.seq));
    log_.push_back(std::move(l));
    taken_.push_back(false);
    return true;
}

std::string curator_session::recent(std::size_t n) const {
    std::string out;
    for (std::size_t i = log_.size() > n ? log_.size() - n : 0; i < log_.size(); ++i) out += "\n  " + log_[i].text;
    return out;
}

void curator_session::fail(const std::string& what) const {
    throw std::runtime_error("curator_session (pid " + std::to_string(process_.pid()) + "): " + what +
                             "; its last lines:" + (log_.empty() ? std::string(" (none)") : recent()));
}

// ------------------------------------------------------------------ raw protocol

std::string curator_session::send(const std::string& command) {
    std::string tag = "t" + std::to_string(next_tag_++);
    if (ended_) fail("`" + command + "` sent after the driver ended");
    write_no_sigpipe(process_, tag + " " + command);
    return tag;
}

curator_line curator_session::reply(const std::string& tag, ms timeout) {
    auto deadline = clock::now() + timeout;
    std::size_t scanned = 0;
    for (;;) {
        for (; scanned < log_.size(); ++scanned) {
            auto& l = log_[scanned];
            if ((l.kind == "ok" || l.kind == "err") && l.subject == tag) {
                taken_[scanned] = true;
                return l;
            }
        }
        if (!pump(deadline)) fail("no reply to " + tag + " within " + ms_arg(timeout) + " ms");
    }
}

curator_line curator_session::ok(const std::string& tag, ms timeout) {
    auto l = reply(tag, timeout);
    if (l.kind == "err") throw curator_error(l.args.at(0), "Curator driver: " + l.text);
    return l;
}

curator_line curator_session::call(const std::string& command, std::optional<ms> timeout) {
    return ok(send(command), timeout.value_or(options_.reply_timeout));
}

std::optional<curator_line> curator_session::find_event(const std::string& name, const std::string& what,
                                                        const std::function<bool(const curator_line&)>& pred) {
    for (std::size_t i = 0; i < log_.size(); ++i) {
        auto& l = log_[i];
        if (taken_[i] || l.kind != "ev" || l.subject != name || (!what.empty() && l.what() != what)) continue;
        if (pred && !pred(l)) continue;
        taken_[i] = true;
        return l;
    }
    return std::nullopt;
}

curator_line curator_session::wait_event(const std::string& name, const std::string& what, ms timeout,
                                         const std::function<bool(const curator_line&)>& pred) {
    auto deadline = clock::now() + timeout;
    for (;;) {
        if (auto l = find_event(name, what, pred)) return *l;
        if (!pump(deadline))
            fail("no event `" + name + " " + (what.empty() ? "*" : what) + "`" + (pred ? " (as expected)" : "") + " within " +
                 ms_arg(timeout) + " ms");
    }
}

std::optional<curator_line> curator_session::poll_event(const std::string& name, const std::string& what, ms within,
                                                        const std::function<bool(const curator_line&)>& pred) {
    auto deadline = clock::now() + within;
    for (;;) {
        if (auto l = find_event(name, what, pred)) return l;
        if (!pump(deadline)) return std::nullopt;
    }
}

std::vector<curator_line> curator_session::events(const std::string& name, const std::string& what) const {
    std::vector<curator_line> out;
    for (auto& l : log_)
        if (l.kind == "ev" && (name.empty() || l.subject == name) && (what.empty() || l.what() == what)) out.push_back(l);
    return out;
}

// ------------------------------------------------------------------ parsing

bool curator_session::parse_bool(const std::string& s) const {
    if (s == "true") return true;
    if (s == "false") return false;
    fail("expected true|false, got '" + s + "'");
}

std::vector<curator_participant> curator_session::parse_participants(const curator_line& l) const {
    if (l.args.empty()) fail("no participant count in '" + l.text + "'");
    std::size_t n = std::stoul(l.args[0]);
    if (l.args.size() != 1 + 2 * n) fail("malformed participants '" + l.text + "'");
    std::vector<curator_participant> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back({curator_decode(l.args[1 + 2 * i]), parse_bool(l.args[2 + 2 * i])});
    return out;
}

namespace {
std::vector<std::string> counted_list(const curator_line& l) {
    if (l.args.empty()) throw std::runtime_error("no count in '" + l.text + "'");
    std::size_t n = std::stoul(l.args[0]);
    if (l.args.size() != n + 1) throw std::runtime_error("malformed list '" + l.text + "'");
    return {l.args.begin() + 1, l.args.end()};
}
std::string path_or_empty(const std::string& s) { return s == "-" ? "" : s; }
}  // namespace

// ------------------------------------------------------------------ general

void curator_session::ping() { call("ping"); }

std::vector<std::string> curator_session::children(const std::string& path) { return counted_list(call("children " + path)); }

std::optional<std::pair<std::string, std::string>> curator_session::get(const std::string& path) {
    auto l = reply(send("get " + path), options_.reply_timeout);
    if (l.kind == "err") {
        if (l.args.at(0) == "nonode") return std::nullopt;
        throw curator_error(l.args.at(0), "Curator driver: " + l.text);
    }
    if (l.args.size() != 2) fail("malformed get reply '" + l.text + "'");
    return std::pair{curator_decode(l.args[0]), l.args[1]};
}

bool curator_session::cancel(const std::string& name) { return parse_bool(call("cancel " + name).args.at(0)); }

void curator_session::close(const std::string& name, const std::string& mode) {
    call("close " + name + (mode.empty() ? "" : " " + mode), options_.reply_timeout + std::chrono::seconds(10));
}

// ------------------------------------------------------------------ LeaderLatch

void curator_session::latch_start(const std::string& name, const std::string& path, const std::string& id) {
    call("latch-start " + name + " " + path + " " + curator_encode(id));
}

bool curator_session::latch_await(const std::string& name, ms timeout) {
    return parse_bool(call("latch-await " + name + " " + ms_arg(timeout), timeout + options_.reply_timeout).args.at(0));
}

bool curator_session::latch_has(const std::string& name) { return parse_bool(call("latch-has " + name).args.at(0)); }

curator_latch_info curator_session::latch_info(const std::string& name) {
    auto l = call("latch-info " + name);
    if (l.args.size() != 5) fail("malformed latch-info reply '" + l.text + "'");
    return {l.args[0], path_or_empty(l.args[1]), path_or_empty(l.args[2]), parse_bool(l.args[3]), curator_decode(l.args[4])};
}

curator_participant curator_session::latch_leader(const std::string& name) {
    auto l = call("latch-leader " + name);
    if (l.args.size() != 2) fail("malformed latch-leader reply '" + l.text + "'");
    return {curator_decode(l.args[0]), parse_bool(l.args[1])};
}

std::vector<curator_participant> curator_session::latch_participants(const std::string& name) {
    return parse_participants(call("latch-participants " + name));
}

// ------------------------------------------------------------------ GroupMember

void curator_session::group_start(const std::string& name, const std::string& path, const std::string& id,
                                  const std::string& payload) {
    call("group-start " + name + " " + path + " " + curator_encode(id) + " " + curator_encode(payload));
}

std::map<std::string, std::string> curator_session::group_members(const std::string& name) {
    auto l = call("group-members " + name);
    if (l.args.empty()) fail("no member count in '" + l.text + "'");
    std::size_t n = std::stoul(l.args[0]);
    if (l.args.size() != 1 + 2 * n) fail("malformed members '" + l.text + "'");
    std::map<std::string, std::string> out;
    for (std::size_t i = 0; i < n; ++i) out[curator_decode(l.args[1 + 2 * i])] = curator_decode(l.args[2 + 2 * i]);
    return out;
}

// ------------------------------------------------------------------ PersistentTtlNode

void curator_session::ttl_node_start(const std::string& name, const std::string& path, std::chrono::milliseconds ttl,
                                     const std::string& data) {
    call("ttlnode-start " + name + " " + path + " " + std::to_string(ttl.count()) + " " + curator_encode(data));
}
bool curator_session::ttl_node_wait(const std::string& name, ms timeout) {
    auto l = call("ttlnode-wait " + name + " " + std::to_string(timeout.count()), timeout + std::chrono::seconds(10));
    if (l.args.size() != 1) fail("malformed ttlnode-wait reply '" + l.text + "'");
    return parse_bool(l.args[0]);
}

// ------------------------------------------------------------------ barriers, counters

void curator_session::barrier_new(const std::string& name, const std::string& path) { call("barrier-new " + name + " " + path); }
void curator_session::barrier_set(const std::string& name) { call("barrier-set " + name); }
void curator_session::barrier_remove(const std::string& name) { call("barrier-remove " + name); }
std::string curator_session::barrier_wait_send(const std::string& name, ms timeout) {
    return send("barrier-wait " + name + " " + std::to_string(timeout.count()));
}
void curator_session::dbarrier_new(const std::string& name, const std::string& path, int members) {
    call("dbarrier-new " + name + " " + path + " " + std::to_string(members));
}
std::string curator_session::dbarrier_enter_send(const std::string& name, ms timeout) {
    return send("dbarrier-enter " + name + " " + std::to_string(timeout.count()));
}
std::string curator_session::dbarrier_leave_send(const std::string& name, ms timeout) {
    return send("dbarrier-leave " + name + " " + std::to_string(timeout.count()));
}
void curator_session::along_new(const std::string& name, const std::string& path) { call("along-new " + name + " " + path); }
namespace {
std::tuple<bool, std::int64_t, std::int64_t> atomic_reply(const curator_line& l) {
    if (l.args.size() != 3) throw std::runtime_error("malformed atomic reply '" + l.text + "'");
    return {l.args[0] == "true", std::stoll(l.args[1]), std::stoll(l.args[2])};
}
}  // namespace
std::tuple<bool, std::int64_t, std::int64_t> curator_session::along_get(const std::string& name) {
    return atomic_reply(call("along-get " + name));
}
std::tuple<bool, std::int64_t, std::int64_t> curator_session::along_add(const std::string& name, std::int64_t delta) {
    return atomic_reply(call("along-add " + name + " " + std::to_string(delta)));
}
std::string curator_session::along_increments_send(const std::string& name, int times) {
    return send("along-increments " + name + " " + std::to_string(times));
}

// ------------------------------------------------------------------ LeaderSelector

void curator_session::selector_start(const std::string& name, const std::string& path, const std::string& id,
                                     bool auto_requeue) {
    call("selector-start " + name + " " + path + " " + curator_encode(id) + (auto_requeue ? " requeue" : " once"));
}

long curator_session::selector_release(const std::string& name) { return std::stol(call("selector-release " + name).args.at(0)); }

bool curator_session::selector_requeue(const std::string& name) {
    return parse_bool(call("selector-requeue " + name).args.at(0));
}

void curator_session::selector_interrupt(const std::string& name) { call("selector-interrupt " + name); }

bool curator_session::selector_has(const std::string& name) { return parse_bool(call("selector-has " + name).args.at(0)); }

curator_participant curator_session::selector_leader(const std::string& name) {
    auto l = call("selector-leader " + name);
    if (l.args.size() != 2) fail("malformed selector-leader reply '" + l.text + "'");
    return {curator_decode(l.args[0]), parse_bool(l.args[1])};
}

std::vector<curator_participant> curator_session::selector_participants(const std::string& name) {
    return parse_participants(call("selector-participants " + name));
}

// ------------------------------------------------------------------ semaphore, count

void curator_session::semaphore_create(const std::string& name, const std::string& path, int max_leases,
                                       std::optional<std::string> node_data) {
    call("sem-create " + name + " " + path + " max " + std::to_string(max_leases) +
         (node_data ? " " + curator_encode(*node_data) : ""));
}

void curator_session::semaphore_create_counted(const std::string& name, const std::string& path,
                                               const std::string& count_name, std::optional<std::string> node_data) {
    call("sem-create " + name + " " + path + " count " + count_name + (node_data ? " " + curator_encode(*node_data) : ""));
}

std::string curator_session::semaphore_acquire_begin(const std::string& name, int qty, ms timeout) {
    return send("sem-acquire " + name + " " + std::to_string(qty) + " " + ms_arg(timeout));
}

std::optional<std::vector<std::string>> curator_session::semaphore_acquired(const std::string& tag, ms timeout) {
    auto l = ok(tag, timeout + options_.reply_timeout);
    if (l.args.size() == 1 && l.args[0] == "timeout") return std::nullopt;
    if (l.args.size() < 2 || l.args[0] != "acquired") fail("malformed sem-acquire reply '" + l.text + "'");
    return std::vector<std::string>(l.args.begin() + 1, l.args.end());
}

std::optional<std::vector<std::string>> curator_session::semaphore_acquire(const std::string& name, int qty, ms timeout) {
    return semaphore_acquired(semaphore_acquire_begin(name, qty, timeout), timeout);
}

std::vector<std::string> curator_session::semaphore_leases(const std::string& name) {
    return counted_list(call("sem-leases " + name));
}

int curator_session::semaphore_release(const std::string& name, const std::string& which) {
    return std::stoi(call("sem-release " + name + " " + which).args.at(0));
}

std::vector<std::string> curator_session::semaphore_participants(const std::string& name) {
    try {
        return counted_list(call("sem-participants " + name));
    } catch (const curator_error& e) {
        // Curator's getParticipantNodes throws NoNode once the leases container, emptied, was
        // reaped (the kit's servers reap every second): nobody takes part then.
        if (e.kind() == "nonode") return {};
        throw;
    }
}

std::string curator_session::semaphore_churn_begin(const std::string& name, int cycles, ms hold, ms timeout) {
    return send("sem-churn " + name + " " + std::to_string(cycles) + " " + ms_arg(hold) + " " + ms_arg(timeout));
}

void curator_session::count_start(const std::string& name, const std::string& path, int seed) {
    call("count-start " + name + " " + path + " " + std::to_string(seed));
}

std::pair<int, int> curator_session::count_get(const std::string& name) {
    auto l = call("count-get " + name);
    if (l.args.size() != 2) fail("malformed count-get reply '" + l.text + "'");
    return {std::stoi(l.args[0]), std::stoi(l.args[1])};
}

void curator_session::count_set(const std::string& name, int value) {
    call("count-set " + name + " " + std::to_string(value));
}

bool curator_session::count_try_set(const std::string& name, int value) {
    return parse_bool(call("count-try-set " + name + " " + std::to_string(value)).args.at(0));
}

// ------------------------------------------------------------------ mutex, multi-lock

void curator_session::mutex_create(const std::string& name, const std::string& path) {
    call("mutex-create " + name + " " + path);
}

void curator_session::multi_create(const std::string& name, const std::vector<std::string>& paths) {
    call("multi-create " + name + " " + join(paths));
    multi_sizes_[name] = paths.size();
}

std::string curator_session::mutex_acquire_begin(const std::string& name, ms timeout) {
    return send("mutex-acquire " + name + " " + ms_arg(timeout));
}

std::optional<std::string> curator_session::mutex_acquire(const std::string& name, ms timeout) {
    auto l = ok(mutex_acquire_begin(name, timeout), timeout + options_.reply_timeout);
    if (l.args.empty()) fail("malformed mutex-acquire reply '" + l.text + "'");
    if (!parse_bool(l.args[0])) return std::nullopt;
    return l.args.size() > 1 ? path_or_empty(l.args[1]) : std::string();
}

std::string curator_session::multi_acquire_begin(const std::string& name, ms timeout) {
    return send("multi-acquire " + name + " " + ms_arg(timeout));
}

std::optional<std::vector<std::string>> curator_session::multi_acquire(const std::string& name, ms timeout) {
    // The multi-lock gives each of its locks the whole timeout.
    auto it = multi_sizes_.find(name);
    auto locks = static_cast<long>(it == multi_sizes_.end() ? 1 : it->second);
    auto l = ok(multi_acquire_begin(name, timeout), locks * timeout + options_.reply_timeout);
    if (l.args.empty()) fail("malformed multi-acquire reply '" + l.text + "'");
    if (!parse_bool(l.args[0])) return std::nullopt;
    std::vector<std::string> nodes;
    for (std::size_t i = 1; i < l.args.size(); ++i) nodes.push_back(path_or_empty(l.args[i]));
    return nodes;
}

void curator_session::mutex_release(const std::string& name) { call("mutex-release " + name); }

void curator_session::multi_release(const std::string& name) { call("multi-release " + name); }

}  // namespace zkr::test
