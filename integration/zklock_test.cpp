// zklock, the command-line tool, against a real server: each test runs the zklock binary
// (ZKLOCK_BIN, set by the build) as operators would, and checks what it did in ZooKeeper.
#include "testkit/process.hpp"
#include "support/child_process.hpp"
#include "support/curator_driver.hpp"
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "zkr/client.hpp"
#include "zkr/shared_mutex.hpp"
#include "zkr/version.hpp"

#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkr::test::child_process;
using zkr::test::eventually;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;
using clock_type = std::chrono::steady_clock;

namespace {

// zklock's exit codes (tools/zklock/exit_codes.hpp).
constexpr int exit_refused = 1, exit_usage = 64, exit_unavailable = 69, exit_lost = 70, exit_timed_out = 75;

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

void touch(const std::string& path) { std::ofstream(path) << "x\n"; }

// A directory for one test's marker files, removed with them.
class scratch_dir {
public:
    scratch_dir() {
        char name[] = "/tmp/zklock-test-XXXXXX";
        if (!mkdtemp(name)) throw std::runtime_error("mkdtemp failed");
        path_ = name;
    }
    ~scratch_dir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    std::string operator/(const std::string& file) const { return path_ + "/" + file; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// One zklock process: its stdout through the pipe of child_process, its stderr into a file.
// If a test ends with it still running, it gets SIGTERM (which it forwards to its command),
// then SIGKILL: no process is left behind.
class zklock_process {
public:
    zklock_process(const std::vector<std::string>& args, const scratch_dir& dir)
        : stderr_file_(dir / ("zklock-stderr-" + std::to_string(++count_))), process_(command_line(args, stderr_file_)) {}
    ~zklock_process() {
        if (!finished_ && kill(process_.pid(), 0) == 0) {
            kill(process_.pid(), SIGTERM);
            process_.wait(5s);
        }
    }
    /// Its exit code; -1 if it did not exit within `timeout` (or was killed by a signal).
    int wait(std::chrono::milliseconds timeout = 20s) {
        int code = process_.wait(timeout);
        finished_ = code != -1 || kill(process_.pid(), 0) != 0;
        return code;
    }
    std::optional<std::string> read_line(std::chrono::milliseconds timeout = 15s) { return process_.read_line(timeout); }
    std::string error_output() const { return read_file(stderr_file_); }
    pid_t pid() const { return process_.pid(); }

private:
    static std::string command_line(const std::vector<std::string>& args, const std::string& stderr_file) {
        std::string command = "exec " + shell_quote(ZKLOCK_BIN);
        for (const auto& a : args) command += " " + shell_quote(a);
        return command + " 2>" + shell_quote(stderr_file);
    }
    static inline int count_ = 0;
    std::string stderr_file_;
    child_process process_;
    bool finished_ = false;
};

// A command for `zklock run`: records its lock environment in <dir>/<name>.*, then waits until
// <dir>/<name>.go exists (or zklock, its parent, is gone, so it never outlives a test), exits 7.
std::vector<std::string> holding_command(const scratch_dir& dir, const std::string& name) {
    std::string at = dir / name;
    return {"/bin/sh", "-c",
            "echo \"$ZKLOCK_FENCING_TOKEN\" > '" + at + ".token'; echo \"$ZKLOCK_PATH\" > '" + at + ".path'; "
            "echo $$ > '" + at + ".pid'; echo \"$ZKLOCK_NODE\" > '" + at + ".node.tmp'; mv '" + at + ".node.tmp' '" + at + ".node'; "
            "while [ ! -e '" + at + ".go' ] && kill -0 $PPID 2>/dev/null; do sleep 0.05; done; exit 7"};
}

std::vector<std::string> run_args(const std::string& path, const std::vector<std::string>& command,
                                  std::vector<std::string> options = {}) {
    std::vector<std::string> args{"run", "--connect", test_connect_string()};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back(path);
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return args;
}

// Waits until `path` has `n` children (up to 15 s, for process start-up on a loaded machine);
// else fails, showing the queue and what the zklock processes said on stderr.
void require_queue_length(zkr::client& c, const std::string& path, std::size_t n,
                          const std::vector<const zklock_process*>& processes) {
    if (eventually([&] { return queue_length(c, path) == n; }, 15s)) return;
    std::string report = "expected " + std::to_string(n) + " nodes under " + path + ", found " +
                         std::to_string(queue_length(c, path));
    for (const auto* p : processes) report += "\nzklock " + std::to_string(p->pid()) + " stderr: " + p->error_output();
    FAIL(report);
}

// The node zklock's command reported in <name>.node, once it has started.
std::string started_node(const scratch_dir& dir, const std::string& name) {
    REQUIRE(eventually([&] { return file_exists(dir / (name + ".node")); }, 15s));
    return trimmed(read_file(dir / (name + ".node")));
}

std::string node_name(const std::string& node_path) { return node_path.substr(node_path.rfind('/') + 1); }

// Children of `path` in queue order (by the sequence after the marker: its last 10 digits).
std::vector<std::string> queue_of(zkr::client& c, const std::string& path) {
    zkr::error_code ec;
    auto children = c.get_children(path, ec).children;
    std::sort(children.begin(), children.end(),
              [](const std::string& a, const std::string& b) { return a.substr(a.size() - 10) < b.substr(b.size() - 10); });
    return children;
}

std::string hex_session(std::int64_t session) {
    char text[24];
    std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(session));
    return text;
}

// The password ZooKeeper gives session `id`: ZooKeeperServer.generatePasswd seeds
// java.util.Random with id ^ 0xB3415C00 and takes 16 bytes. It lets a test join — and so
// expire — the session of another process, knowing only its id (a lock node's ephemeral owner).
std::string zookeeper_session_password(std::int64_t id) {
    constexpr std::uint64_t mask = (std::uint64_t{1} << 48) - 1;
    std::uint64_t seed = (static_cast<std::uint64_t>(id) ^ 0xB3415C00ULL ^ 0x5DEECE66DULL) & mask;
    auto next_int = [&] {
        seed = (seed * 0x5DEECE66DULL + 0xBULL) & mask;
        return static_cast<std::uint32_t>(seed >> 16);
    };
    std::string password;
    while (password.size() < 16) {
        std::uint32_t random = next_int();
        for (int n = 0; n < 4 && password.size() < 16; ++n, random >>= 8) password.push_back(static_cast<char>(random & 0xff));
    }
    return password;
}

struct session_event_flag {
    std::mutex mutex;
    std::condition_variable changed;
    bool connected = false;
};

void on_session_event(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* flag = static_cast<session_event_flag*>(context);
    std::lock_guard lock(flag->mutex);
    flag->connected = state == ZOO_CONNECTED_STATE;
    flag->changed.notify_all();
}

// Joins session `id` with a second handle and closes it there: the server ends the session as
// if it had expired. (session_tools' expire_session needs the zkr::client in this process;
// zklock's is in another one, so this joins with the password derived from the id alone.)
void join_and_close_session(const std::string& connect, std::int64_t id) {
    session_event_flag flag;
    clientid_t credentials{};
    credentials.client_id = id;
    std::string password = zookeeper_session_password(id);
    std::copy(password.begin(), password.end(), credentials.passwd);
    zhandle_t* handle = zookeeper_init(connect.c_str(), &on_session_event, 10000, &credentials, &flag, 0);
    if (!handle) return;
    {
        std::unique_lock lock(flag.mutex);
        flag.changed.wait_for(lock, 5s, [&] { return flag.connected; });
    }
    zookeeper_close(handle);  // on the joined session: closes it
}

// Expires the session of zklock (process `pid`) from outside, as the server would. zklock is
// frozen meanwhile (well within its session timeout): otherwise its client could reconnect and
// take its session back between our join and our close.
void expire_foreign_session(pid_t pid, std::int64_t session, const std::function<bool()>& gone) {
    for (int attempt = 0; attempt < 5 && !gone(); ++attempt) {
        kill(pid, SIGSTOP);
        join_and_close_session(test_connect_string(), session);
        kill(pid, SIGCONT);
        if (eventually(gone, 3s)) return;
    }
    FAIL("the session survived five attempts to expire it");
}

// A loopback port nobody listens on: connecting is refused at once.
int unused_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
        throw std::runtime_error("cannot find a free port");
    close(fd);
    return ntohs(address.sin_port);
}

using zkr::test::ms_since;

std::string host_name() {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return name;
}

// True once `pid` has ended. A zombie counts as gone: an orphan waits there for whoever
// adopted it to reap it, and runs nothing.
bool process_gone(pid_t pid) {
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char state = zkr::testkit::detail::process_state(pid);
    return state == 0 || state == 'Z' || state == 'X';  // 0: gone meanwhile
}

// The pid a test's command wrote into `file`, once it is there (written then renamed).
pid_t pid_from(const std::string& file) {
    REQUIRE(eventually([&] { return file_exists(file); }, 15s));
    return static_cast<pid_t>(std::stol(read_file(file)));
}

// Kills, at the end of a test, the processes whose pid files it names that are still running:
// zklock should have ended them; where it did not, the test fails but leaves nothing behind.
class leftover_killer {
public:
    explicit leftover_killer(std::vector<std::string> pid_files) : pid_files_(std::move(pid_files)) {}
    ~leftover_killer() {
        for (const auto& file : pid_files_) {
            if (!file_exists(file)) continue;
            pid_t pid = static_cast<pid_t>(std::atol(read_file(file).c_str()));
            if (pid <= 0 || process_gone(pid)) continue;
            // Not our child: once it ended, its pid may be another process's. Only one that had
            // started by the time the file was written is the one the file names.
            auto started = zkr::testkit::detail::process_start_time(pid);
            auto written = std::filesystem::last_write_time(file);
            auto written_at = std::chrono::file_clock::to_sys(written);
            if (started && *started <= written_at + std::chrono::seconds(1)) kill(pid, SIGKILL);
        }
    }
    leftover_killer(const leftover_killer&) = delete;
    leftover_killer& operator=(const leftover_killer&) = delete;

private:
    std::vector<std::string> pid_files_;
};

// Writes `text` into the file `path` (a script for a test's command).
void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A command and a grandchild (its child, in the foreground: a background job of sh would
// ignore SIGINT and SIGQUIT) that never watch zklock: only zklock's own doing can end them.
// On `sig` (when given) each notes it in <dir>/{child,grandchild}.mark; the grandchild exits 0,
// then the child 3. `ignore` makes both ignore that signal instead (and its sleeps inherit it).
std::vector<std::string> group_command(const scratch_dir& dir, const std::string& sig = "", bool ignore = false) {
    auto on_signal = [&](const std::string& who, int code) -> std::string {
        if (sig.empty()) return "";
        if (ignore) return "trap '' " + sig + "\n";
        return "trap 'echo " + sig + " >> \"$dir/" + who + ".mark\"; exit " + std::to_string(code) + "' " + sig + "\n";
    };
    write_file(dir / "grandchild.sh", "dir=$1\n" + on_signal("grandchild", 0) +
                                          "echo $$ > \"$dir/grandchild.pid.tmp\"; mv \"$dir/grandchild.pid.tmp\" \"$dir/grandchild.pid\"\n"
                                          "while :; do sleep 0.05; done\n");
    write_file(dir / "child.sh", "dir=$1\nulimit -c 0\n" + on_signal("child", 3) +
                                     "echo $$ > \"$dir/child.pid.tmp\"; mv \"$dir/child.pid.tmp\" \"$dir/child.pid\"\n"
                                     "/bin/sh \"$dir/grandchild.sh\" \"$dir\"\n");
    return {"/bin/sh", dir / "child.sh", dir.path()};
}

}  // namespace

TEST_CASE("zklock --version and --help", "[zklock]") {
    scratch_dir dir;
    zklock_process version({"--version"}, dir);
    CHECK(version.read_line() == std::optional<std::string>(std::string("zklock ") + zkr::version()));
    CHECK(version.wait() == 0);

    zklock_process help({"--help"}, dir);
    std::string text;
    while (auto line = help.read_line(5s)) text += *line + "\n";
    CHECK(help.wait() == 0);
    for (const char* expected : {"run", "status", "watch", "release-stale", "--max", "64", "69", "70", "75"})
        CHECK(text.find(expected) != std::string::npos);

    zklock_process run_help({"run", "--help"}, dir);
    text.clear();
    while (auto line = run_help.read_line(5s)) text += *line + "\n";
    CHECK(run_help.wait() == 0);
    CHECK(text.find("--lost-signal") != std::string::npos);
    CHECK(text.find("ZKLOCK_FENCING_TOKEN") != std::string::npos);
    CHECK(text.find("process group of its own") != std::string::npos);
    CHECK(text.find("watchdog") != std::string::npos);
    CHECK(text.find("Not covered") != std::string::npos);
    CHECK(text.find("--max") != std::string::npos);
    CHECK(text.find("semaphore") != std::string::npos);

    zklock_process status_help({"status", "--help"}, dir);
    text.clear();
    while (auto line = status_help.read_line(5s)) text += *line + "\n";
    CHECK(status_help.wait() == 0);
    CHECK(text.find("\\xNN") != std::string::npos);  // how node data is escaped
    CHECK(text.find("--json") != std::string::npos);
}

TEST_CASE("zklock run returns the command's status and exports the fencing token and node", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-run");
    zkr::client observer(test_options(test_connect_string()));
    zklock_process zklock(run_args(path, holding_command(dir, "a")), dir);

    std::string node = started_node(dir, "a");
    CHECK(node.rfind(path + "/_c_", 0) == 0);
    CHECK(node.find("-__WRIT__") != std::string::npos);  // exclusive: the write side
    CHECK(trimmed(read_file(dir / "a.path")) == path);
    auto stat = observer.exists(node);
    REQUIRE(stat.exists);
    CHECK(trimmed(read_file(dir / "a.token")) == std::to_string(stat.stat.czxid));
    CHECK(stat.stat.ephemeral_owner != 0);

    touch(dir / "a.go");
    CHECK(zklock.wait() == 7);
    CHECK_FALSE(observer.exists(node).exists);
    CHECK(zklock.error_output().empty());
}

TEST_CASE("zklock run --verbose prints how long it waited for the lock and how long it held it", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-verbose");
    zkr::client holder(test_options(test_connect_string()));
    zkr::shared_mutex held(holder, path);  // zklock run takes the write side
    held.lock();
    zklock_process zklock(run_args(path, holding_command(dir, "a"), {"--verbose"}), dir);
    require_queue_length(holder, path, 2, {&zklock});
    // zklock waits behind the holder for 300 ms at least (checked throughout): its wait is longer.
    CHECK(zkr::test::holds_throughout([&] { return zkr::test::queue_length(holder, path) == 2 && !file_exists(dir / "a.path"); }, 300ms));
    held.unlock();
    std::string node = started_node(dir, "a");
    touch(dir / "a.go");
    CHECK(zklock.wait() == 7);
    auto err = zklock.error_output();
    INFO(err);
    std::smatch m;
    REQUIRE(std::regex_search(err, m, std::regex("holding " + node + R"( \(fencing token \d+\) after waiting (\d+\.\d{3}) s)")));
    CHECK(std::stod(m[1].str()) >= 0.3);
    REQUIRE(std::regex_search(err, m, std::regex("released " + node + R"( after holding it (\d+\.\d{3}) s)")));
    CHECK(std::stod(m[1].str()) >= 0);
}

TEST_CASE("zklock run: exclusive runs exclude each other, shared runs share, a shared run waits for an exclusive one", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-exclusion");
    zkr::client observer(test_options(test_connect_string()));

    zklock_process first(run_args(path, holding_command(dir, "first")), dir);
    started_node(dir, "first");
    zklock_process second(run_args(path, holding_command(dir, "second")), dir);
    require_queue_length(observer, path, 2, {&first, &second});
    zklock_process reader(run_args(path, holding_command(dir, "reader"), {"--shared"}), dir);
    require_queue_length(observer, path, 3, {&first, &second, &reader});
    std::this_thread::sleep_for(1s);
    CHECK_FALSE(file_exists(dir / "second.node"));  // exclusive behind exclusive
    CHECK_FALSE(file_exists(dir / "reader.node"));  // shared behind exclusive

    touch(dir / "first.go");
    CHECK(first.wait() == 7);
    started_node(dir, "second");
    std::this_thread::sleep_for(500ms);
    CHECK_FALSE(file_exists(dir / "reader.node"));  // still behind the second writer

    touch(dir / "second.go");
    CHECK(second.wait() == 7);
    started_node(dir, "reader");
    // Another shared run joins the one holding at once.
    zklock_process other_reader(run_args(path, holding_command(dir, "other"), {"--shared"}), dir);
    started_node(dir, "other");
    CHECK_FALSE(file_exists(dir / "reader.go"));  // both hold together

    touch(dir / "reader.go");
    touch(dir / "other.go");
    CHECK(reader.wait() == 7);
    CHECK(other_reader.wait() == 7);
    CHECK(eventually([&] { return queue_length(observer, path) == 0; }));
}

TEST_CASE("zklock run --timeout while another holds: the timeout code, and no node left", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-timeout");
    zkr::client observer(test_options(test_connect_string()));
    zklock_process holder(run_args(path, holding_command(dir, "holder"), {"--shared"}), dir);
    std::string held = started_node(dir, "holder");

    auto start = clock_type::now();
    zklock_process late(run_args(path, holding_command(dir, "late"), {"--timeout", "1500ms"}), dir);
    CHECK(late.wait() == exit_timed_out);
    CHECK(ms_since(start) >= 1500);
    CHECK(ms_since(start) < 8000);
    CHECK(late.error_output().find("timed out") != std::string::npos);
    CHECK(late.error_output().find(path) != std::string::npos);
    CHECK_FALSE(file_exists(dir / "late.node"));
    CHECK(queue_of(observer, path) == std::vector<std::string>{node_name(held)});

    touch(dir / "holder.go");
    CHECK(holder.wait() == 7);
}

TEST_CASE("zklock run --timeout 0 takes the lock only if it is free at once, like flock -n", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-timeout-zero");
    zkr::client observer(test_options(test_connect_string()));
    zklock_process holder(run_args(path, holding_command(dir, "holder"), {"--shared"}), dir);
    std::string held = started_node(dir, "holder");

    // Held by another: 75 at once, not a connection failure, and no node left.
    auto start = clock_type::now();
    zklock_process refused(run_args(path, holding_command(dir, "refused"), {"--timeout", "0"}), dir);
    CHECK(refused.wait() == exit_timed_out);
    CHECK(ms_since(start) < 5000);
    INFO("stderr: " << refused.error_output());
    CHECK(refused.error_output().find(path) != std::string::npos);
    CHECK(refused.error_output().find("--timeout 0") != std::string::npos);
    CHECK_FALSE(file_exists(dir / "refused.node"));
    CHECK(queue_of(observer, path) == std::vector<std::string>{node_name(held)});

    // Free for a reader beside the reader: it runs, with the lock's environment.
    zklock_process reader(run_args(path, holding_command(dir, "reader"), {"--shared", "--timeout", "0"}), dir);
    std::string reader_node = started_node(dir, "reader");
    CHECK(trimmed(read_file(dir / "reader.token")) == std::to_string(observer.exists(reader_node).stat.czxid));
    touch(dir / "reader.go");
    CHECK(reader.wait() == 7);
    touch(dir / "holder.go");
    CHECK(holder.wait() == 7);

    // A free lock: the command runs and its status comes back.
    zklock_process free_run(run_args(path, {"/bin/sh", "-c", "exit 4"}, {"--timeout", "0"}), dir);
    CHECK(free_run.wait() == 4);
    CHECK(eventually([&] { return queue_length(observer, path) == 0; }));
}

TEST_CASE("zklock run --timeout 0: the connection is still waited for, within --connect-timeout", "[zklock]") {
    scratch_dir dir;
    std::string nowhere = "127.0.0.1:" + std::to_string(unused_port());
    auto start = clock_type::now();
    zklock_process run({"run", "--connect", nowhere, "--timeout", "0", "--connect-timeout", "2s", "/zklock-test/unreachable",
                        "--", "true"},
                       dir);
    CHECK(run.wait() == exit_unavailable);
    CHECK(ms_since(start) >= 2000);
    CHECK(ms_since(start) < 8000);
    CHECK(run.error_output().find(nowhere) != std::string::npos);
}

TEST_CASE("zklock run: SIGTERM while waiting cancels the wait and leaves no node", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-cancel");
    zkr::client observer(test_options(test_connect_string()));
    zklock_process holder(run_args(path, holding_command(dir, "holder")), dir);
    std::string held = started_node(dir, "holder");
    zklock_process waiter(run_args(path, holding_command(dir, "waiter")), dir);
    require_queue_length(observer, path, 2, {&holder, &waiter});

    kill(waiter.pid(), SIGTERM);
    CHECK(waiter.wait() == 128 + SIGTERM);
    CHECK(waiter.error_output().find("interrupted by SIGTERM") != std::string::npos);
    CHECK(eventually([&] { return queue_of(observer, path) == std::vector<std::string>{node_name(held)}; }));
    CHECK_FALSE(file_exists(dir / "waiter.node"));

    touch(dir / "holder.go");
    CHECK(holder.wait() == 7);
}

TEST_CASE("zklock run forwards SIGTERM to the running command", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-forward");
    zkr::client observer(test_options(test_connect_string()));
    std::string marker = dir / "term", ready = dir / "ready";
    zklock_process zklock(run_args(path, {"/bin/sh", "-c",
                                          "trap \"echo term > '" + marker + "'; exit 3\" TERM; touch '" + ready +
                                              "'; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done"}),
                          dir);
    REQUIRE(eventually([&] { return file_exists(ready); }, 15s));
    kill(zklock.pid(), SIGTERM);
    CHECK(zklock.wait() == 3);
    CHECK(file_exists(marker));
    CHECK(eventually([&] { return queue_length(observer, path) == 0; }));
}

TEST_CASE("zklock run killed with SIGKILL: its command's whole process group goes with it", "[zklock]") {
    // flock(1)'s lock goes with its process; zklock's lock outlives it by a session timeout, after
    // which another run may start. So the command must not outlive zklock: not the command, not
    // its children.
    scratch_dir dir;
    std::string path = unique_path("zklock-kill9");
    leftover_killer cleanup({dir / "child.pid", dir / "grandchild.pid"});
    zklock_process zklock(run_args(path, group_command(dir)), dir);
    pid_t child = pid_from(dir / "child.pid");
    pid_t grandchild = pid_from(dir / "grandchild.pid");

    kill(zklock.pid(), SIGKILL);
    zklock.wait();
    REQUIRE(process_gone(zklock.pid()));
    CHECK(eventually([&] { return process_gone(child) && process_gone(grandchild); }, 5s));
    // The one who signalled them says so, on zklock's stderr.
    CHECK(zklock.error_output().find("SIGTERM") != std::string::npos);
}

TEST_CASE("zklock run killed with SIGKILL: a command that ignores the signal gets SIGKILL after --grace", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-kill9-grace");
    leftover_killer cleanup({dir / "child.pid", dir / "grandchild.pid"});
    write_file(dir / "stubborn.sh",
               "dir=$1\n"
               "trap 'echo TERM >> \"$dir/term.mark\"' TERM\n"
               "echo $$ > \"$dir/child.pid.tmp\"; mv \"$dir/child.pid.tmp\" \"$dir/child.pid\"\n"
               "while :; do sleep 0.05; done\n");
    zklock_process zklock(run_args(path, {"/bin/sh", dir / "stubborn.sh", dir.path()}, {"--grace", "3s"}), dir);
    pid_t child = pid_from(dir / "child.pid");

    auto killed = clock_type::now();
    kill(zklock.pid(), SIGKILL);
    zklock.wait();
    // It was told (SIGTERM), chose to run on, and is killed once the grace has passed.
    REQUIRE(eventually([&] { return file_exists(dir / "term.mark"); }, 5s));
    CHECK_FALSE(process_gone(child));
    CHECK(eventually([&] { return process_gone(child); }, 10s));
    CHECK(ms_since(killed) >= 3000);
}

TEST_CASE("zklock run forwards every terminating signal to the command's process group", "[zklock]") {
    const std::pair<const char*, int> signals[] = {
        {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"HUP", SIGHUP}, {"TERM", SIGTERM}, {"INT", SIGINT}};
    for (const auto& [sig, number] : signals) {
        INFO("SIG" << sig);
        scratch_dir dir;
        std::string path = unique_path("zklock-forward-group");
        zkr::client observer(test_options(test_connect_string()));
        leftover_killer cleanup({dir / "child.pid", dir / "grandchild.pid"});
        zklock_process zklock(run_args(path, group_command(dir, sig)), dir);
        pid_from(dir / "child.pid");
        pid_from(dir / "grandchild.pid");  // its trap is set: it writes its pid after

        kill(zklock.pid(), number);
        CHECK(zklock.wait(10s) == 3);  // the command's own status: zklock lived on to release
        CHECK(trimmed(read_file(dir / "child.mark")) == sig);
        CHECK(trimmed(read_file(dir / "grandchild.mark")) == sig);
        CHECK(eventually([&] { return queue_length(observer, path) == 0; }));
    }
}

namespace {

// A terminal and an interactive shell's job control, in python3 (pty, termios), for zklock run:
// it starts zklock (argv) as a foreground job on a new pseudo-terminal (stdin and stdout on it,
// stderr into <stderr file>), prints "started", then obeys one line at a time on its stdin:
//   type TEXT   types TEXT and Enter       key ^Z | ^C   types the control key
//   expect TEXT prints "seen" once TEXT came out of the terminal (else "timeout", after 15 s)
//   wait        prints "stopped N", "exited N" or "signaled N" when zklock stops or ends
//               (else "timeout", after 15 s)
//   fg          gives the job the terminal back and continues it (as fg does), prints "ok"
// On end of input it kills what is left of the job.
constexpr const char* job_control_shell = R"(import fcntl, os, select, signal, sys, termios, time
stderr_file, argv = sys.argv[1], sys.argv[2:]
signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a shell takes its terminal back from the background
master, slave = os.openpty()
os.setsid()
fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
go_read, go_write = os.pipe()
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.read(go_read, 1)  # until the terminal is ours
    os.dup2(slave, 0); os.dup2(slave, 1)
    os.dup2(os.open(stderr_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    os.execv(argv[0], argv)
os.setpgid(pid, pid)
os.tcsetpgrp(slave, pid)
os.write(go_write, b"x")
seen = b""
def say(text):
    print(text, flush=True)
def output_until(text, deadline):
    global seen
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0: return False
        if select.select([master], [], [], left)[0]:
            try: seen += os.read(master, 4096)
            except OSError: return False
    seen = seen[seen.index(text.encode()) + len(text):]
    return True
say("started")
for line in sys.stdin:
    word, _, rest = line.rstrip("\n").partition(" ")
    if word == "type": os.write(master, rest.encode() + b"\n")
    elif word == "key": os.write(master, {"^Z": b"\x1a", "^C": b"\x03"}[rest])
    elif word == "expect": say("seen" if output_until(rest, time.monotonic() + 15) else "timeout")
    elif word == "wait":
        deadline, status = time.monotonic() + 15, None
        while status is None and time.monotonic() < deadline:
            got, st = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
            if got == pid: status = st
            elif select.select([master], [], [], 0.01)[0]:  # its output keeps flowing meanwhile
                try: seen += os.read(master, 4096)
                except OSError: pass
        if status is None: say("timeout")
        elif os.WIFSTOPPED(status): os.tcsetpgrp(slave, os.getpgrp()); say("stopped %d" % os.WSTOPSIG(status))
        elif os.WIFEXITED(status): say("exited %d" % os.WEXITSTATUS(status)); pid = 0
        else: say("signaled %d" % os.WTERMSIG(status)); pid = 0
    elif word == "fg":
        os.tcsetpgrp(slave, pid); os.killpg(pid, signal.SIGCONT); say("ok")
if pid:
    os.killpg(pid, signal.SIGKILL)
)";

// The one-letter state of process `pid` ('T': stopped), '?' if it is gone.
char process_state(pid_t pid) {
    char state = zkr::testkit::detail::process_state(pid);
    return state == 0 ? '?' : state;
}

std::optional<child_process> job_control_shell_for(const scratch_dir& dir, const std::vector<std::string>& zklock_args) {
    {
        child_process probe("/usr/bin/python3 -c 'import pty, termios' 2>/dev/null && echo yes");
        if (probe.read_line(10s) != std::optional<std::string>("yes")) return std::nullopt;
    }
    write_file(dir / "shell.py", job_control_shell);
    std::string command = "exec /usr/bin/python3 " + shell_quote(dir / "shell.py") + " " + shell_quote(dir / "zklock-stderr") +
                          " " + shell_quote(ZKLOCK_BIN);
    for (const auto& a : zklock_args) command += " " + shell_quote(a);
    return std::optional<child_process>(std::in_place, command);
}

}  // namespace

TEST_CASE("zklock run at a terminal: Ctrl-Z stops the job, command included, fg continues it, Ctrl-C reaches the command", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-job-control");
    zkr::client observer(test_options(test_connect_string()));
    leftover_killer cleanup({dir / "child.pid"});
    // One process that never forks: caught between fork and exec, a shell shows 'D', not 'T'.
    write_file(dir / "sleeping.sh",
               "dir=$1\n"
               "echo $$ > \"$dir/child.pid.tmp\"; mv \"$dir/child.pid.tmp\" \"$dir/child.pid\"\n"
               "exec sleep 300\n");
    auto shell = job_control_shell_for(dir, run_args(path, {"/bin/sh", dir / "sleeping.sh", dir.path()}));
    if (!shell) {
        WARN("python3 with pty and termios is not installed: skipped");
        return;
    }
    REQUIRE(shell->read_line() == std::optional<std::string>("started"));
    pid_t child = pid_from(dir / "child.pid");

    // zklock's job has the terminal: Ctrl-Z reaches zklock, which stops the command's group and
    // then itself, so that the shell sees its job stopped.
    shell->write_line("key ^Z");
    shell->write_line("wait");
    REQUIRE(shell->read_line() == std::optional<std::string>("stopped " + std::to_string(SIGTSTP)));
    CHECK(eventually([&] { return process_state(child) == 'T'; }, 5s));
    CHECK(queue_length(observer, path) == 1);  // stopped, not gone: still holding

    shell->write_line("fg");
    REQUIRE(shell->read_line() == std::optional<std::string>("ok"));
    CHECK(eventually([&] { return process_state(child) != 'T'; }, 5s));

    // Ctrl-C reaches zklock, which passes it on to the command's group (not the same one).
    shell->write_line("key ^C");
    shell->write_line("wait");
    CHECK(shell->read_line() == std::optional<std::string>("exited " + std::to_string(128 + SIGINT)));
    CHECK(eventually([&] { return queue_length(observer, path) == 0; }));
    shell->close_input();
    CHECK(shell->wait() == 0);
}

TEST_CASE("zklock run at a terminal: a command that reads the terminal gets it, and Ctrl-Z and fg still work", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-job-terminal");
    zkr::client observer(test_options(test_connect_string()));
    leftover_killer cleanup({dir / "child.pid"});
    write_file(dir / "reading.sh",
               "dir=$1\n"
               "echo $$ > \"$dir/child.pid.tmp\"; mv \"$dir/child.pid.tmp\" \"$dir/child.pid\"\n"
               "read first; echo \"got:$first\"; read second; echo \"got:$second\"; exit 5\n");
    auto shell = job_control_shell_for(dir, run_args(path, {"/bin/sh", dir / "reading.sh", dir.path()}));
    if (!shell) {
        WARN("python3 with pty and termios is not installed: skipped");
        return;
    }
    REQUIRE(shell->read_line() == std::optional<std::string>("started"));
    pid_t child = pid_from(dir / "child.pid");

    // In a group of its own, the command reads the terminal from the background (SIGTTIN):
    // zklock, whose job has the terminal, hands it over.
    shell->write_line("type hello");
    shell->write_line("expect got:hello");
    REQUIRE(shell->read_line() == std::optional<std::string>("seen"));

    // Now Ctrl-Z goes to the command's group: zklock sees it stop and stops too.
    shell->write_line("key ^Z");
    shell->write_line("wait");
    REQUIRE(shell->read_line() == std::optional<std::string>("stopped " + std::to_string(SIGTSTP)));
    CHECK(process_state(child) == 'T');
    CHECK(queue_length(observer, path) == 1);

    shell->write_line("fg");
    REQUIRE(shell->read_line() == std::optional<std::string>("ok"));
    shell->write_line("type world");
    shell->write_line("expect got:world");
    CHECK(shell->read_line() == std::optional<std::string>("seen"));
    shell->write_line("wait");
    CHECK(shell->read_line() == std::optional<std::string>("exited 5"));
    CHECK(eventually([&] { return queue_length(observer, path) == 0; }));
    shell->close_input();
    CHECK(shell->wait() == 0);
}

TEST_CASE("zklock: an unreachable ensemble gives the unavailable code within the deadline", "[zklock]") {
    scratch_dir dir;
    std::string nowhere = "127.0.0.1:" + std::to_string(unused_port());

    auto start = clock_type::now();
    // --connect-timeout bounds the connection (--timeout is the wait for the lock, once connected).
    zklock_process run({"run", "--connect", nowhere, "--connect-timeout", "2s", "/zklock-test/unreachable", "--", "true"}, dir);
    CHECK(run.wait() == exit_unavailable);
    CHECK(ms_since(start) < 6000);
    CHECK(run.error_output().find(nowhere) != std::string::npos);

    start = clock_type::now();
    zklock_process status({"status", "--connect", nowhere, "--timeout", "2s", "/zklock-test/unreachable"}, dir);
    CHECK(status.wait() == exit_unavailable);
    CHECK(ms_since(start) < 6000);
    CHECK(status.error_output().find(nowhere) != std::string::npos);
}

// The lines of what a zklock process wrote on stderr.
std::vector<std::string> error_lines(const zklock_process& p) {
    std::vector<std::string> lines;
    std::istringstream text(p.error_output());
    for (std::string line; std::getline(text, line);) lines.push_back(line);
    return lines;
}

TEST_CASE("zklock under a chroot that does not exist: the usage code and one line naming the chroot", "[zklock]") {
    scratch_dir dir;
    std::string chroot = unique_path("zklock-no-such-chroot");
    std::string connect = test_connect_string() + chroot;
    {
        zkr::client observer(test_options(test_connect_string()));
        REQUIRE_FALSE(observer.exists(chroot).exists);
    }

    zklock_process status({"status", "--connect", connect, "/locks/a"}, dir);
    std::string out;
    while (auto line = status.read_line(10s)) out += *line + "\n";
    CHECK(status.wait() == exit_usage);
    CHECK(out.empty());  // not "nobody holds or waits"
    auto lines = error_lines(status);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("\"" + chroot + "\"") != std::string::npos);
    CHECK(lines[0].find("does not exist") != std::string::npos);

    zklock_process run({"run", "--connect", connect, "/locks/a", "--", "/bin/sh", "-c", "touch " + shell_quote(dir / "ran")}, dir);
    CHECK(run.wait() == exit_usage);
    lines = error_lines(run);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("\"" + chroot + "\"") != std::string::npos);
    CHECK_FALSE(file_exists(dir / "ran"));

    zklock_process watch({"watch", "--connect", connect, "/locks/a"}, dir);
    CHECK(watch.wait() == exit_usage);  // not a wait, for ever, for a node nobody can make
    lines = error_lines(watch);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("\"" + chroot + "\"") != std::string::npos);
}

TEST_CASE("zklock: host names that do not resolve give the unavailable code, one line that says DNS", "[zklock]") {
    scratch_dir dir;
    std::string nowhere = "no-such-host.invalid:2181";  // .invalid never resolves (RFC 2606)

    zklock_process status({"status", "--connect", nowhere, "--timeout", "2s", "/locks/a"}, dir);
    CHECK(status.wait() == exit_unavailable);
    auto lines = error_lines(status);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("no-such-host.invalid") != std::string::npos);
    CHECK(lines[0].find("DNS") != std::string::npos);

    zklock_process run({"run", "--connect", nowhere, "--connect-timeout", "2s", "/locks/a", "--", "true"}, dir);
    CHECK(run.wait() == exit_unavailable);
    lines = error_lines(run);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("DNS") != std::string::npos);
}

TEST_CASE("zklock: bad paths and arguments give the usage code and name what is wrong", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    zklock_process relative({"run", "--connect", connect, "locks/no-slash", "--", "true"}, dir);
    CHECK(relative.wait() == exit_usage);
    CHECK(relative.error_output().find("\"locks/no-slash\"") != std::string::npos);

    zklock_process empty_segment({"status", "--connect", connect, "/locks//double"}, dir);
    CHECK(empty_segment.wait() == exit_usage);
    CHECK(empty_segment.error_output().find("\"/locks//double\"") != std::string::npos);

    zklock_process bad_duration({"run", "--connect", connect, "--timeout", "5x", "/locks/a", "--", "true"}, dir);
    CHECK(bad_duration.wait() == exit_usage);
    CHECK(bad_duration.error_output().find("--timeout") != std::string::npos);

    zklock_process no_command({"run", "--connect", connect, "/locks/a", "--"}, dir);
    CHECK(no_command.wait() == exit_usage);
    CHECK(no_command.error_output().find("COMMAND") != std::string::npos);

    // Refused by the library (the server's own subtree): still a usage error, not "unexpected".
    zklock_process server_subtree({"run", "--connect", connect, "/zookeeper/lock", "--", "true"}, dir);
    CHECK(server_subtree.wait() == exit_usage);
    CHECK(server_subtree.error_output().find("/zookeeper") != std::string::npos);
}

TEST_CASE("zklock run: a command killed mid-hold gives 128+9 and its node goes", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-killed");
    zkr::client observer(test_options(test_connect_string()));
    zklock_process zklock(run_args(path, holding_command(dir, "a")), dir);
    std::string node = started_node(dir, "a");
    REQUIRE(observer.exists(node).exists);

    pid_t command = std::stoi(read_file(dir / "a.pid"));
    kill(command, SIGKILL);
    CHECK(zklock.wait() == 128 + SIGKILL);
    CHECK(eventually([&] { return !observer.exists(node).exists; }));
}

TEST_CASE("zklock run: a lock lost while the command runs signals the command, exit code lost", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-lost");
    zkr::client observer(test_options(test_connect_string()));
    std::string marker = dir / "term", node_file = dir / "node";
    zklock_process zklock(run_args(path,
                                   {"/bin/sh", "-c",
                                    "trap \"echo term > '" + marker + "'; exit 0\" TERM; echo \"$ZKLOCK_NODE\" > '" +
                                        node_file + ".tmp'; mv '" + node_file + ".tmp' '" + node_file +
                                        "'; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done"},
                                   {"--session-timeout", "4s", "--grace", "5s"}),
                          dir);
    REQUIRE(eventually([&] { return file_exists(node_file); }, 15s));
    std::string node = trimmed(read_file(node_file));
    auto stat = observer.exists(node);
    REQUIRE(stat.exists);

    // zklock's session, found from its lock node, expired from outside.
    expire_foreign_session(zklock.pid(), stat.stat.ephemeral_owner, [&] { return !observer.exists(node).exists; });
    CHECK(zklock.wait() == exit_lost);
    CHECK(trimmed(read_file(marker)) == "term");
    CHECK(zklock.error_output().find("lost") != std::string::npos);
    CHECK(zklock.error_output().find(path) != std::string::npos);
}

TEST_CASE("zklock run: a lock node deleted by someone else signals the command, exit code lost", "[zklock]") {
    // An operator with zkCli, release-stale aimed at the wrong session: the next waiter gets in at
    // once, so the command must stop at once (issue 19: zklock went on, never told).
    scratch_dir dir;
    std::string path = unique_path("zklock-deleted");
    zkr::client observer(test_options(test_connect_string()));
    std::string marker = dir / "term", node_file = dir / "node";
    zklock_process zklock(run_args(path,
                                   {"/bin/sh", "-c",
                                    "trap \"echo term > '" + marker + "'; exit 0\" TERM; echo \"$ZKLOCK_NODE\" > '" +
                                        node_file + ".tmp'; mv '" + node_file + ".tmp' '" + node_file +
                                        "'; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done"},
                                   {"--grace", "5s"}),
                          dir);
    REQUIRE(eventually([&] { return file_exists(node_file); }, 15s));
    std::string node = trimmed(read_file(node_file));
    REQUIRE(observer.exists(node).exists);
    observer.remove(node);
    CHECK(zklock.wait() == exit_lost);
    CHECK(trimmed(read_file(marker)) == "term");
    CHECK(zklock.error_output().find("lost") != std::string::npos);
}

TEST_CASE("zklock status: holder first, then waiters, with owner and session, also as JSON", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-status");
    zkr::client observer(test_options(test_connect_string()));
    zklock_process holder(run_args(path, holding_command(dir, "holder")), dir);
    started_node(dir, "holder");
    zklock_process reader(run_args(path, holding_command(dir, "reader"), {"--shared"}), dir);
    require_queue_length(observer, path, 2, {&holder, &reader});
    zklock_process writer(run_args(path, holding_command(dir, "writer")), dir);
    require_queue_length(observer, path, 3, {&holder, &reader, &writer});
    auto queue = queue_of(observer, path);
    REQUIRE(queue.size() == 3);
    auto holder_session = hex_session(observer.exists(path + "/" + queue[0]).stat.ephemeral_owner);

    zklock_process status({"status", "--connect", test_connect_string(), path}, dir);
    std::vector<std::string> lines;
    while (auto line = status.read_line(10s)) lines.push_back(*line);
    CHECK(status.wait() == 0);
    INFO("status stderr: " << status.error_output());
    REQUIRE(lines.size() == 5);  // summary, column names, three nodes
    CHECK(lines[0] == path + ": 1 holder, 2 waiters");
    CHECK(lines[2].find("holds") != std::string::npos);
    CHECK(lines[2].find("writer") != std::string::npos);
    CHECK(lines[2].find(queue[0]) != std::string::npos);
    CHECK(lines[2].find("0x" + holder_session) != std::string::npos);
    CHECK(lines[2].find("host=" + host_name() + " pid=" + std::to_string(holder.pid())) != std::string::npos);
    CHECK(lines[3].find("waits") != std::string::npos);
    CHECK(lines[3].find("reader") != std::string::npos);
    CHECK(lines[3].find(queue[1]) != std::string::npos);
    CHECK(lines[3].find("pid=" + std::to_string(reader.pid())) != std::string::npos);
    CHECK(lines[4].find("waits") != std::string::npos);
    CHECK(lines[4].find("writer") != std::string::npos);
    CHECK(lines[4].find(queue[2]) != std::string::npos);

    zklock_process json({"status", "--json", "--connect", test_connect_string(), path}, dir);
    auto object = json.read_line(10s);
    CHECK(json.wait() == 0);
    REQUIRE(object);
    CHECK(object->front() == '{');
    CHECK(object->back() == '}');
    CHECK(object->find("\"path\":\"" + path + "\"") != std::string::npos);
    CHECK(object->find("\"holders\":1,\"waiters\":2,\"recipes\":[\"read-write\"]") != std::string::npos);
    auto first = object->find("\"node\":\"" + queue[0] + "\",\"sequence\":");
    auto second = object->find("\"node\":\"" + queue[1] + "\"");
    auto third = object->find("\"node\":\"" + queue[2] + "\"");
    CHECK(first < second);
    CHECK(second < third);
    CHECK(third != std::string::npos);
    CHECK(object->find("\"role\":\"writer\",\"recipe\":\"read-write\",\"holds\":true,\"session\":\"0x" + holder_session + "\"",
                       first) != std::string::npos);
    CHECK(object->find("\"pid\":" + std::to_string(holder.pid())) != std::string::npos);

    touch(dir / "holder.go");
    touch(dir / "reader.go");
    touch(dir / "writer.go");
    CHECK(holder.wait() == 7);
    CHECK(reader.wait() == 7);
    CHECK(writer.wait() == 7);
}

TEST_CASE("zklock status shows a lock Curator holds, its data raw", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-curator");
    zkr::client observer(test_options(connect));
    child_process curator(zkr::test::curator_command("hold " + connect + " " + path));
    auto acquired = curator.read_line(30s);
    REQUIRE(acquired);
    REQUIRE(acquired->rfind("acquired ", 0) == 0);
    std::string node = acquired->substr(9);
    std::string data = observer.get_data(node).data;  // Curator writes its IP address

    zklock_process status({"status", "--connect", connect, path}, dir);
    std::vector<std::string> lines;
    while (auto line = status.read_line(10s)) lines.push_back(*line);
    CHECK(status.wait() == 0);
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == path + ": 1 holder, 0 waiters");
    CHECK(lines[2].find("holds") != std::string::npos);
    CHECK(lines[2].find(node_name(node)) != std::string::npos);
    CHECK(lines[2].find("data \"" + data + "\"") != std::string::npos);

    zklock_process json({"status", "--json", "--connect", connect, path}, dir);
    auto object = json.read_line(10s);
    CHECK(json.wait() == 0);
    REQUIRE(object);
    CHECK(object->find("\"owner\":null,\"data\":\"" + data + "\"") != std::string::npos);

    curator.write_line("release");
    CHECK(curator.read_line() == std::optional<std::string>("released"));
    CHECK(curator.wait() == 0);
}

TEST_CASE("zklock status escapes node data: one line per node in text, valid JSON for any bytes", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-escapes");
    zkr::client writer(test_options(connect));
    writer.create_parents(path);
    // A zkr owner whose host has a line break in it, and another client's data with control
    // characters, UTF-8, a C1 control, bytes that are not UTF-8 (a lone continuation byte, an
    // encoded surrogate, an overlong form), a quote and a backslash.
    const std::string host = "evil\nhost";
    const std::string data = std::string("a\nb\tc\x01\x7f") + "\xc3\xa9" + "\xc2\x9b" + "\xff" + "\xed\xa0\x80" + "\xe0\x80\x80" + "\"\\";
    auto holder = writer.create(path + "/_c_11111111-2222-3333-4444-555555555555-__WRIT__", "zkr:1;host=" + host + ";pid=42;thread=7",
                                zkr::create_mode::ephemeral_sequential).path;
    auto waiter = writer.create(path + "/_c_66666666-7777-8888-9999-000000000000-__READ__", data,
                                zkr::create_mode::ephemeral_sequential).path;

    zklock_process status({"status", "--connect", connect, path}, dir);
    std::vector<std::string> lines;
    while (auto line = status.read_line(10s)) lines.push_back(*line);
    CHECK(status.wait() == 0);
    REQUIRE(lines.size() == 4);  // summary, column names, two nodes: nothing broke a line
    CHECK(lines[2].find("host=evil\\nhost pid=42 thread=7") != std::string::npos);
    CHECK(lines[2].find(node_name(holder)) != std::string::npos);
    CHECK(lines[3].find(R"(data "a\nb\tc\x01\x7f)" "\xc3\xa9" R"(\xc2\x9b\xff\xed\xa0\x80\xe0\x80\x80\"\\")") != std::string::npos);
    CHECK(lines[3].find(node_name(waiter)) != std::string::npos);

    // JSON: strict UTF-8 that a JSON parser takes; text as is, the rest as \u00XX (its Latin-1 reading).
    zklock_process json({"status", "--json", "--connect", connect, path}, dir);
    auto object = json.read_line(10s);
    CHECK(json.wait() == 0);
    REQUIRE(object);
    write_file(dir / "status.json", *object);
    const std::string check =
        "import json, sys\n"
        "o = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'))\n"
        "n = o['nodes']\n"
        "assert n[0]['owner']['host'] == 'evil\\nhost', n[0]\n"
        "assert n[1]['data'] == 'a\\nb\\tc\\x01\\x7f\\u00e9\\u009b\\u00ff\\u00ed\\u00a0\\u0080\\u00e0\\u0080\\u0080\"\\\\', repr(n[1]['data'])\n"
        "print('ok')\n";
    write_file(dir / "check.py", check);
    child_process parse("/usr/bin/python3 " + shell_quote(dir / "check.py") + " " + shell_quote(dir / "status.json") + " 2>&1");
    std::string said;
    while (auto line = parse.read_line(10s)) said += *line + "\n";
    CHECK(said == "ok\n");
}

TEST_CASE("zklock status reads kazoo's lock nodes", "[zklock]") {
    {
        child_process probe("/usr/bin/python3 -c 'import kazoo' 2>/dev/null && echo yes");
        if (probe.read_line(10s) != std::optional<std::string>("yes")) {
            WARN("kazoo is not installed (python3-kazoo): skipped");
            return;
        }
    }
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-kazoo");
    const std::string script =
        "import sys\n"
        "from kazoo.client import KazooClient\n"
        "zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=15)\n"
        "lock = zk.Lock(sys.argv[2], 'kazoo-holder'); lock.acquire(timeout=15)\n"
        "print('acquired', flush=True)\n"
        "sys.stdin.readline()\n"
        "lock.release(); zk.stop()\n";
    child_process kazoo("exec /usr/bin/python3 -c " + shell_quote(script) + " " + shell_quote(connect) + " " + shell_quote(path));
    REQUIRE(kazoo.read_line(20s) == std::optional<std::string>("acquired"));
    // A zklock reader on the same path: kazoo's nodes are not zkr's (nor Curator's), so the two
    // are separate locks, both held at once, and status says so.
    zklock_process reader(run_args(path, holding_command(dir, "reader"), {"--shared"}), dir);
    std::string reader_node = started_node(dir, "reader");

    zklock_process status({"status", "--connect", connect, path}, dir);
    std::vector<std::string> lines;
    while (auto line = status.read_line(10s)) lines.push_back(*line);
    CHECK(status.wait() == 0);
    REQUIRE(lines.size() == 5);  // summary, column names, two nodes, the note
    CHECK(lines[0] == path + ": 2 holders, 0 waiters");
    CHECK(lines[2].find("holds") != std::string::npos);
    CHECK(lines[2].find("writer") != std::string::npos);
    CHECK(lines[2].find("data \"kazoo-holder\"") != std::string::npos);
    CHECK(lines[2].find("__lock__") != std::string::npos);
    CHECK(lines[3].find("holds") != std::string::npos);
    CHECK(lines[3].find(node_name(reader_node)) != std::string::npos);
    CHECK(lines[4].find("do not exclude each other") != std::string::npos);

    zklock_process json({"status", "--json", "--connect", connect, path}, dir);
    auto object = json.read_line(10s);
    CHECK(json.wait() == 0);
    REQUIRE(object);
    CHECK(object->find("\"recipes\":[\"read-write\",\"kazoo\"]") != std::string::npos);
    CHECK(object->find("\"role\":\"writer\",\"recipe\":\"kazoo\",\"holds\":true") != std::string::npos);
    CHECK(object->find("\"data\":\"kazoo-holder\"") != std::string::npos);

    kazoo.write_line("release");
    CHECK(kazoo.wait() == 0);
    touch(dir / "reader.go");
    CHECK(reader.wait() == 7);
}

TEST_CASE("zklock watch prints an update when a waiter joins", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-watch");
    zkr::client holder_client(test_options(connect));
    zkr::client waiter_client(test_options(connect));
    zkr::shared_mutex holder(holder_client, path);
    zkr::shared_mutex waiter(waiter_client, path);
    holder.lock();

    zklock_process watch({"watch", "--count", "1", "--connect", connect, path}, dir);
    // The first status: the holder alone.
    std::vector<std::string> first;
    while (auto line = watch.read_line(10s)) {
        first.push_back(*line);
        if (line->find("holds") != std::string::npos) break;
    }
    REQUIRE(first.size() == 4);  // time, summary, column names, the holder
    CHECK(first[0].rfind("--- ", 0) == 0);
    CHECK(first[1] == path + ": 1 holder, 0 waiters");

    auto waiting = waiter.async_lock_shared(asio::use_future);
    std::vector<std::string> update;
    while (auto line = watch.read_line(10s)) update.push_back(*line);
    CHECK(watch.wait() == 0);  // --count 1: one change shown, then done
    REQUIRE(update.size() == 5);
    CHECK(update[1] == path + ": 1 holder, 1 waiter");
    CHECK(update[4].find("waits") != std::string::npos);
    CHECK(update[4].find("reader") != std::string::npos);

    holder.unlock();
    auto hold = waiting.get();
    CHECK(hold.owns_lock());
}

TEST_CASE("zklock tree prints a subtree depth first, escaped, to a depth, and with --watch then prints every change", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-tree");
    zkr::client c(test_options(connect));
    c.create_parents(path + "/b/deep");
    c.set_data(path + "/b", "bee\nline", zkr::any_version);
    c.create(path + "/a", std::string(100, 'x'));
    c.create(path + "/e", "mine", zkr::create_mode::ephemeral);
    auto mzxid = [&](const std::string& p) { return c.exists(p).stat.mzxid; };
    auto hex = [](std::int64_t v) {
        std::ostringstream s;
        s << "0x" << std::hex << v;
        return s.str();
    };

    zklock_process all({"tree", "--connect", connect, path}, dir);
    std::vector<std::string> lines;
    while (auto line = all.read_line(10s)) lines.push_back(*line);
    REQUIRE(all.wait() == 0);
    INFO("stderr: " << all.error_output());
    REQUIRE(lines.size() == 5);
    CHECK(lines[0] == path + " \"\" 0 bytes, mzxid " + hex(mzxid(path)));
    CHECK(lines[1] == path + "/a \"" + std::string(64, 'x') + "\"... 100 bytes, mzxid " + hex(mzxid(path + "/a")));
    CHECK(lines[2] == path + "/b \"bee\\nline\" 8 bytes, mzxid " + hex(mzxid(path + "/b")));
    CHECK(lines[3].rfind(path + "/b/deep \"\" 0 bytes", 0) == 0);
    std::ostringstream session;
    session << "0x" << std::hex << c.session_id();
    CHECK(lines[4] == path + "/e \"mine\" 4 bytes, mzxid " + hex(mzxid(path + "/e")) + ", session " + session.str());

    zklock_process shallow({"tree", "--depth", "1", "--json", "--connect", connect, path}, dir);
    lines.clear();
    while (auto line = shallow.read_line(10s)) lines.push_back(*line);
    REQUIRE(shallow.wait() == 0);
    REQUIRE(lines.size() == 4);  // no /b/deep
    CHECK(lines[2] == "{\"path\": \"" + path + "/b\", \"data\": \"bee\\nline\", \"bytes\": 8, \"mzxid\": " +
                          std::to_string(mzxid(path + "/b")) + ", \"ephemeral_owner\": null}");

    zklock_process watch({"tree", "--watch", "--count", "3", "--connect", connect, path}, dir);
    for (int i = 0; i < 5; ++i) REQUIRE(watch.read_line(10s));  // the subtree first
    c.create(path + "/new", "n1");
    CHECK(watch.read_line(10s) == std::optional<std::string>("created " + path + "/new \"n1\""));
    c.set_data(path + "/new", "n2", zkr::any_version);
    CHECK(watch.read_line(10s) == std::optional<std::string>("changed " + path + "/new \"n2\""));
    c.remove(path + "/new");
    CHECK(watch.read_line(10s) == std::optional<std::string>("deleted " + path + "/new"));
    CHECK(watch.wait() == 0);  // --count 3

    zklock_process bad({"tree", "--count", "2", "--connect", connect, path}, dir);
    CHECK(bad.wait() == 64);
    CHECK(bad.error_output().find("--count counts changes: it needs --watch") != std::string::npos);
}

TEST_CASE("zklock release-stale refuses without --yes, then removes only that session's nodes", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-stale");
    zkr::client live(test_options(connect));
    zkr::client stale(test_options(connect));
    live.create_parents(path);
    auto kept = live.create(path + "/_c_11111111-2222-3333-4444-555555555555-__WRIT__", "zkr:1;host=h;pid=1;thread=1",
                            zkr::create_mode::ephemeral_sequential).path;
    auto stale_writer = stale.create(path + "/_c_66666666-7777-8888-9999-000000000000-__WRIT__", "x",
                                     zkr::create_mode::ephemeral_sequential).path;
    auto stale_reader = stale.create(path + "/_c_66666666-7777-8888-9999-000000000000-__READ__", "x",
                                     zkr::create_mode::ephemeral_sequential).path;
    std::string session = hex_session(stale.session_id());

    zklock_process dry_run({"release-stale", "--connect", connect, "--session", session, path}, dir);
    std::string listed;
    while (auto line = dry_run.read_line(10s)) listed += *line + "\n";
    CHECK(dry_run.wait() == exit_refused);
    CHECK(listed.find(node_name(stale_writer)) != std::string::npos);
    CHECK(listed.find(node_name(stale_reader)) != std::string::npos);
    CHECK(listed.find(node_name(kept)) == std::string::npos);
    CHECK(dry_run.error_output().find("--yes") != std::string::npos);
    CHECK(queue_length(live, path) == 3);  // nothing removed

    zklock_process removal({"release-stale", "--connect", connect, "--session", "0x" + session, "--yes", path}, dir);
    CHECK(removal.wait() == 0);
    CHECK(queue_of(live, path) == std::vector<std::string>{node_name(kept)});
}

TEST_CASE("zklock run and a Curator service share one read/write lock, both ways", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-curator-rw");
    zkr::client observer(test_options(connect));
    {
        // Curator's InterProcessReadWriteLock holds the write side: zklock gets in neither way.
        child_process curator(zkr::test::curator_command("rw-hold " + connect + " " + path + " write"));
        REQUIRE(curator.read_line(30s).value_or("").rfind("queued ", 0) == 0);
        auto acquired = curator.read_line(30s);
        REQUIRE(acquired);
        REQUIRE(acquired->rfind("acquired ", 0) == 0);
        zklock_process exclusive(run_args(path, {"true"}, {"--timeout", "1s"}), dir);
        CHECK(exclusive.wait() == exit_timed_out);
        zklock_process shared(run_args(path, {"true"}, {"--shared", "--timeout", "1s"}), dir);
        CHECK(shared.wait() == exit_timed_out);
        curator.write_line("release");
        CHECK(curator.read_line() == std::optional<std::string>("released"));
        CHECK(curator.wait() == 0);
    }
    // zklock holds the write side: a Curator writer queues behind it and gets in once the
    // command is done.
    zklock_process holder(run_args(path, holding_command(dir, "held")), dir);
    REQUIRE(eventually([&] { return file_exists(dir / "held.node"); }, 15s));
    child_process curator(zkr::test::curator_command("rw-hold " + connect + " " + path + " write"));
    REQUIRE(curator.read_line(30s).value_or("").rfind("queued ", 0) == 0);
    require_queue_length(observer, path, 2, {&holder});
    auto early = curator.read_line(1500ms);
    CHECK_FALSE(early.has_value());  // still waiting behind zklock
    touch(dir / "held.go");
    CHECK(holder.wait() == 7);
    auto acquired = curator.read_line(30s);
    REQUIRE(acquired);
    CHECK(acquired->rfind("acquired ", 0) == 0);
    curator.write_line("release");
    CHECK(curator.read_line() == std::optional<std::string>("released"));
    CHECK(curator.wait() == 0);
}

namespace {

// Like holding_command, and it appends "start <name>" to <dir>/log when it starts and
// "end <name>" just before it exits: the log is the order in which the commands ran.
std::vector<std::string> logged_command(const scratch_dir& dir, const std::string& name) {
    std::string at = dir / name, log = dir / "log";
    return {"/bin/sh", "-c",
            "echo 'start " + name + "' >> '" + log + "'; echo $$ > '" + at + ".pid'; "
            "echo \"$ZKLOCK_NODE\" > '" + at + ".node.tmp'; mv '" + at + ".node.tmp' '" + at + ".node'; "
            "while [ ! -e '" + at + ".go' ] && kill -0 $PPID 2>/dev/null; do sleep 0.05; done; "
            "echo 'end " + name + "' >> '" + log + "'; exit 7"};
}

// The most commands the log shows running at once, and whether every line made sense.
int most_at_once(const std::string& log) {
    std::istringstream lines(log);
    int running = 0, most = 0;
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("start ", 0) == 0) most = std::max(most, ++running);
        else if (line.rfind("end ", 0) == 0) --running;
        else return -1;
    }
    return running == 0 ? most : -1;
}

// Waits until zklock process `p` queues on the semaphore's mutex PATH/locks (its node's zkr
// owner data names its pid): it then waits for a lease, the semaphore being full (zkr's
// semaphore, as Curator's, waits holding its mutex). Fails after 15 s.
void require_waiting_for_lease(zkr::client& c, const std::string& path, const zklock_process& p) {
    std::string mutex = path + "/locks", owner = ";pid=" + std::to_string(p.pid()) + ";";
    bool queued = eventually(
        [&] {
            zkr::error_code ec;
            for (const auto& child : c.get_children(mutex, ec).children) {
                auto data = c.get_data(mutex + "/" + child, ec);
                if (!ec && data.data.find(owner) != std::string::npos) return true;
            }
            return false;
        },
        15s);
    if (!queued) FAIL("zklock " << p.pid() << " never queued on " << mutex << ": " << p.error_output());
}

// The lease nodes of the semaphore at `path`, by name.
std::vector<std::string> leases_of(zkr::client& c, const std::string& path) {
    zkr::error_code ec;
    auto children = c.get_children(path + "/leases", ec).children;
    std::sort(children.begin(), children.end());
    return children;
}

}  // namespace

TEST_CASE("zklock run --max 2: three runs, never more than two commands at once, the third once one ends", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-max");
    zkr::client observer(test_options(test_connect_string()));
    const std::vector<std::string> names{"a", "b", "c"};
    std::vector<std::unique_ptr<zklock_process>> runs;
    for (const auto& name : names) runs.push_back(std::make_unique<zklock_process>(run_args(path, logged_command(dir, name), {"--max", "2"}), dir));

    // Two get a lease and run; the third queues on the semaphore's mutex, waiting for one.
    auto started = [&] {
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < names.size(); ++i) {
            if (file_exists(dir / (names[i] + ".node"))) out.push_back(i);
        }
        return out;
    };
    if (!eventually([&] { return started().size() >= 2; }, 15s)) {
        std::string said;
        for (const auto& r : runs) said += "\nzklock " + std::to_string(r->pid()) + ": " + r->error_output();
        FAIL("two commands did not start:" << said);
    }
    auto first_two = started();
    REQUIRE(first_two.size() == 2);
    std::size_t third = 3 - first_two[0] - first_two[1];
    require_waiting_for_lease(observer, path, *runs[third]);
    CHECK(started().size() == 2);  // waiting while two run: it has not started
    // Two held, and the waiter's own (made, then counted: as Curator's) once it is made.
    CHECK(eventually([&] { return leases_of(observer, path).size() == 3; }, 15s));
    CHECK(started().size() == 2);
    for (auto i : first_two) {
        std::string node = trimmed(read_file(dir / (names[i] + ".node")));
        CHECK(node.rfind(path + "/leases/_c_", 0) == 0);
        CHECK(node.find("-lease-") != std::string::npos);
    }

    // One ends: its lease goes to the third.
    touch(dir / (names[first_two[0]] + ".go"));
    CHECK(runs[first_two[0]]->wait() == 7);
    started_node(dir, names[third]);
    touch(dir / (names[first_two[1]] + ".go"));
    touch(dir / (names[third] + ".go"));
    CHECK(runs[first_two[1]]->wait() == 7);
    CHECK(runs[third]->wait() == 7);

    std::string log = read_file(dir / "log");
    INFO("log:\n" << log);
    CHECK(most_at_once(log) == 2);
    // The third started after the first one's end.
    CHECK(log.find("start " + names[third]) > log.find("end " + names[first_two[0]]));
    CHECK(eventually([&] { return leases_of(observer, path).empty(); }));
}

TEST_CASE("zklock run --max 1 --timeout 0 while the lease is taken: the timeout code, as for a held lock", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-max-try");
    zkr::client observer(test_options(test_connect_string()));
    zklock_process holder(run_args(path, holding_command(dir, "holder"), {"--max", "1"}), dir);
    std::string held = started_node(dir, "holder");

    // Taken: 75 at once, and no lease left behind.
    auto start = clock_type::now();
    zklock_process refused(run_args(path, holding_command(dir, "refused"), {"--max", "1", "--timeout", "0"}), dir);
    CHECK(refused.wait() == exit_timed_out);
    CHECK(ms_since(start) < 5000);
    INFO("stderr: " << refused.error_output());
    CHECK(refused.error_output().find(path) != std::string::npos);
    CHECK(refused.error_output().find("--timeout 0") != std::string::npos);
    CHECK_FALSE(file_exists(dir / "refused.node"));
    CHECK(leases_of(observer, path) == std::vector<std::string>{node_name(held)});

    // A timed wait: 75 after it, the lease node gone with the cancelled acquisition.
    start = clock_type::now();
    zklock_process late(run_args(path, holding_command(dir, "late"), {"--max", "1", "--timeout", "1500ms"}), dir);
    CHECK(late.wait() == exit_timed_out);
    CHECK(ms_since(start) >= 1500);
    CHECK(late.error_output().find("timed out") != std::string::npos);
    CHECK_FALSE(file_exists(dir / "late.node"));
    CHECK(leases_of(observer, path) == std::vector<std::string>{node_name(held)});

    touch(dir / "holder.go");
    CHECK(holder.wait() == 7);
    // Free: the command runs and its status comes back.
    zklock_process free_run(run_args(path, {"/bin/sh", "-c", "exit 4"}, {"--max", "1", "--timeout", "0"}), dir);
    CHECK(free_run.wait() == 4);
    CHECK(eventually([&] { return leases_of(observer, path).empty(); }));
}

TEST_CASE("zklock run --max: a lease node deleted by someone else signals the command, exit code lost", "[zklock]") {
    scratch_dir dir;
    std::string path = unique_path("zklock-max-deleted");
    zkr::client observer(test_options(test_connect_string()));
    std::string marker = dir / "term", node_file = dir / "node";
    zklock_process zklock(run_args(path,
                                   {"/bin/sh", "-c",
                                    "trap \"echo term > '" + marker + "'; exit 0\" TERM; echo \"$ZKLOCK_NODE\" > '" +
                                        node_file + ".tmp'; mv '" + node_file + ".tmp' '" + node_file +
                                        "'; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done"},
                                   {"--max", "2", "--grace", "5s"}),
                          dir);
    REQUIRE(eventually([&] { return file_exists(node_file); }, 15s));
    std::string node = trimmed(read_file(node_file));
    REQUIRE(node.rfind(path + "/leases/", 0) == 0);
    REQUIRE(observer.exists(node).exists);
    observer.remove(node);
    CHECK(zklock.wait() == exit_lost);
    CHECK(trimmed(read_file(marker)) == "term");
    CHECK(zklock.error_output().find("lost the lease") != std::string::npos);
    CHECK(zklock.error_output().find(path) != std::string::npos);
}

TEST_CASE("zklock status on a semaphore path lists its leases, with owner and session, N of MAX with --max", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    std::string path = unique_path("zklock-max-status");
    zkr::client observer(test_options(connect));
    zklock_process first(run_args(path, holding_command(dir, "first"), {"--max", "2"}), dir);
    std::string first_node = started_node(dir, "first");
    zklock_process second(run_args(path, holding_command(dir, "second"), {"--max", "2"}), dir);
    std::string second_node = started_node(dir, "second");
    zklock_process third(run_args(path, holding_command(dir, "third"), {"--max", "2"}), dir);
    require_waiting_for_lease(observer, path, third);
    // Its lease node, made under the mutex before it counts: shown as waiting.
    REQUIRE(eventually([&] { return leases_of(observer, path).size() == 3; }, 15s));
    auto session_of = [&](const std::string& node) { return "0x" + hex_session(observer.exists(node).stat.ephemeral_owner); };

    zklock_process status({"status", "--max", "2", "--connect", connect, path}, dir);
    std::vector<std::string> lines;
    while (auto line = status.read_line(10s)) lines.push_back(*line);
    CHECK(status.wait() == 0);
    INFO("status stderr: " << status.error_output());
    REQUIRE(lines.size() == 5);  // summary, column names, two leases, the waiter's
    CHECK(lines[0] == path + ": semaphore, 2 of 2 leases held, 1 waiting");
    CHECK(lines[2].find("holds") != std::string::npos);
    CHECK(lines[2].find(node_name(first_node)) != std::string::npos);
    CHECK(lines[2].find(session_of(first_node)) != std::string::npos);
    CHECK(lines[2].find("host=" + host_name() + " pid=" + std::to_string(first.pid())) != std::string::npos);
    CHECK(lines[3].find(node_name(second_node)) != std::string::npos);
    CHECK(lines[3].find(session_of(second_node)) != std::string::npos);
    CHECK(lines[3].find("pid=" + std::to_string(second.pid())) != std::string::npos);
    CHECK(lines[4].find("waits") != std::string::npos);
    CHECK(lines[4].find("pid=" + std::to_string(third.pid())) != std::string::npos);
    CHECK(lines[4].find("-lease-") != std::string::npos);

    // Without --max: the count alone.
    zklock_process count({"status", "--connect", connect, path}, dir);
    auto summary = count.read_line(10s);
    while (count.read_line(10s)) {}
    CHECK(count.wait() == 0);
    CHECK(summary == std::optional<std::string>(path + ": semaphore, 2 leases held, 1 waiting"));

    zklock_process json({"status", "--json", "--connect", connect, path}, dir);
    auto object = json.read_line(10s);
    CHECK(json.wait() == 0);
    REQUIRE(object);
    CHECK(object->find("\"semaphore\":true,\"leases\":2,\"max\":null,\"waiting\":1") != std::string::npos);
    CHECK(object->find("\"node\":\"" + node_name(first_node) + "\"") < object->find("\"node\":\"" + node_name(second_node) + "\""));
    CHECK(object->find("\"pid\":" + std::to_string(second.pid())) != std::string::npos);
    CHECK(object->find("\"holds\":false") != std::string::npos);

    touch(dir / "first.go");
    touch(dir / "second.go");
    touch(dir / "third.go");
    CHECK(first.wait() == 7);
    CHECK(second.wait() == 7);
    CHECK(third.wait() == 7);
}

TEST_CASE("zklock: a bad --max (0, negative, not a number) is a usage error naming --max", "[zklock]") {
    scratch_dir dir;
    std::string connect = test_connect_string();
    for (const char* bad : {"0", "-1", "abc", "2x", ""}) {
        INFO("--max '" << bad << "'");
        zklock_process run({"run", "--connect", connect, "--max", bad, "/locks/a", "--", "/bin/sh", "-c",
                            "touch " + shell_quote(dir / "ran")},
                           dir);
        CHECK(run.wait() == exit_usage);
        CHECK(run.error_output().find("--max") != std::string::npos);
        zklock_process attached({"run", "--connect", connect, std::string("--max=") + bad, "/locks/a", "--", "true"}, dir);
        CHECK(attached.wait() == exit_usage);
        CHECK(attached.error_output().find("--max") != std::string::npos);
        zklock_process status({"status", "--connect", connect, "--max", bad, "/locks/a"}, dir);
        CHECK(status.wait() == exit_usage);
        CHECK(status.error_output().find("--max") != std::string::npos);
    }
    CHECK_FALSE(file_exists(dir / "ran"));
    zklock_process shared({"run", "--connect", connect, "--shared", "--max", "2", "/locks/a", "--", "true"}, dir);
    CHECK(shared.wait() == exit_usage);
    CHECK(shared.error_output().find("--max") != std::string::npos);
}
