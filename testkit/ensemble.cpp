// zkr::testkit::ensemble: ZooKeeper servers as child Java processes, each in DIR/s<i> (zoo.cfg,
// data/, server.log, pid, command), DIR/servers and DIR/connect describing the whole; what a
// server runs and which process it is are in its directory, so attach() (the CLI) controls an
// ensemble another process started. A watchdog shell, reading a pipe only this process writes,
// stops the servers and removes DIR when this process ends without destroying the ensemble.
#include "zkr/testkit/ensemble.hpp"

#include "address.hpp"
#include "ports.hpp"
#include "process.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace zkr::testkit {
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("zkr::testkit: cannot write " + path);
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
}

// The servers' class-data-sharing archive: the classes a ZooKeeper server loads at start, mapped
// from a file instead of loaded, parsed and verified again by every JVM (a third of a server's
// start-up CPU: 0.76 s against 0.50 s, and 100 ms less before it serves, measured). One archive
// per java, class path and JVM options, in ZKR_TESTKIT_CDS_DIR, else $XDG_CACHE_HOME/zkr-testkit,
// else ~/.cache/zkr-testkit. Made by the first server that exits normally without one (the JVM
// writes it as it exits: -XX:ArchiveClassesAtExit); the JVM checks an archive against the class
// path it runs with and ignores one that does not match, so a stale one costs nothing.
std::string cds_directory() {
    std::string dir = env("ZKR_TESTKIT_CDS_DIR");
    if (dir.empty() && !env("XDG_CACHE_HOME").empty()) dir = env("XDG_CACHE_HOME") + "/zkr-testkit";
    if (dir.empty() && !env("HOME").empty()) dir = env("HOME") + "/.cache/zkr-testkit";
    if (dir.empty()) return {};
    std::error_code ec;
    fs::create_directories(dir, ec);
    return ec || !fs::is_directory(dir, ec) ? std::string() : dir;
}

// Names what the archive depends on: the java (resolved), each jar with its size and time, the
// JVM options. A package upgrade names a new archive.
std::string cds_archive(const std::string& java, const std::string& class_path, const std::vector<std::string>& jvm_options) {
    std::string dir = cds_directory();
    if (dir.empty()) return {};
    std::error_code ec;
    std::string key = fs::weakly_canonical(java, ec).string();
    std::stringstream jars(class_path);
    std::string jar;
    while (std::getline(jars, jar, ':')) {
        key += "|" + jar;
        auto size = fs::file_size(jar, ec);
        if (!ec) key += ":" + std::to_string(size);
        auto time = fs::last_write_time(jar, ec);
        if (!ec) key += ":" + std::to_string(time.time_since_epoch().count());
    }
    for (const auto& o : jvm_options) key += "|" + o;
    char name[64];
    std::snprintf(name, sizeof name, "zookeeper-%016zx.jsa", std::hash<std::string>{}(key));
    return dir + "/" + name;
}

std::string tail(const std::string& path, int lines) {
    std::ifstream in(path);
    std::deque<std::string> last;
    std::string line;
    while (std::getline(in, line)) {
        last.push_back(line);
        if (static_cast<int>(last.size()) > lines) last.pop_front();
    }
    std::string out;
    for (auto& l : last) out += l + "\n";
    return out;
}

// "Mode: leader" of a srvr answer: leader, follower, observer, standalone; "" if none.
std::string mode_of(const std::string& srvr) {
    auto at = srvr.find("Mode: ");
    if (at == std::string::npos) return {};
    auto end = srvr.find('\n', at);
    return trim(srvr.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6));
}

// The class path: $ZKR_TESTKIT_CLASSPATH, or Debian's zookeeper package's jar with the log4j
// binding its log configuration uses (without one, slf4j drops every server log line), and
// Netty's codec, which the jar's manifest leaves out although NettyServerCnxnFactory (a server
// with serverCnxnFactory set to it, as TLS needs) cannot accept a connection without it.
std::string default_class_path() {
    if (auto cp = env("ZKR_TESTKIT_CLASSPATH"); !cp.empty()) return cp;
    const std::string jar = "/usr/share/java/zookeeper.jar";
    if (!fs::exists(jar))
        throw std::runtime_error("zkr::testkit: no ZooKeeper server: " + jar +
                                 " is missing. Install Debian's zookeeper package (apt-get install zookeeper), "
                                 "or set ZKR_TESTKIT_CLASSPATH to the server's class path");
    std::string cp = jar;
    for (const char* extra : {"/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar", "/usr/share/java/netty-codec.jar"})
        if (fs::exists(extra)) cp += std::string(":") + extra;
    return cp;
}

std::string find_java(const std::string& wanted) {
    std::string name = !wanted.empty() ? wanted : !env("JAVA").empty() ? env("JAVA") : "java";
    auto found = detail::find_program(name);
    if (found.empty())
        throw std::runtime_error("zkr::testkit: no Java runtime: \"" + name +
                                 "\" is not an executable (on the PATH). Install one (apt-get install "
                                 "default-jre-headless), or set JAVA or ensemble_options::java");
    return found;
}

enum class serving { ok, timed_out, died, died_binding };

struct wait_result {
    serving outcome = serving::ok;
    int server = -1;  // the one that failed (-1: the leader was missing)
};

// Waits until its owner is gone — the end of its input (this process) or, with an owner pid and
// its start time, that process — then, if DIR still holds the ensemble it was started for (its
// instance), stops the servers running there and removes DIR (or keeps it: $3 = keep).
// Arguments: DIR INSTANCE keep|remove [OWNER_PID OWNER_START].
constexpr const char* watchdog_script = R"sh(
owner=$4 owner_start=$5
if [ -n "$owner" ]; then
  started() { sed 's/.*) //' "/proc/$owner/stat" 2>/dev/null | cut -d' ' -f20; }
  while [ -d "$1" ] && [ "$(started)" = "$owner_start" ]; do sleep 1; done
else
  while read -r _; do :; done
fi
[ "$(cat "$1/instance" 2>/dev/null)" = "$2" ] || exit 0
for f in "$1"/s*/pid; do
  [ -r "$f" ] || continue
  p=$(cat "$f")
  case "$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)" in
    *"$1/"*) kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null ;;
  esac
done
[ "$3" = keep ] || rm -rf "$1"
)sh";

}  // namespace

struct ensemble::impl {
    ensemble_options options;
    bool external = false;
    std::vector<std::string> external_hosts;
    std::string dir;
    int servers = 0;
    std::vector<int> ports;  // client ports
    std::atomic<bool> owned{true};  // destruction stops the servers and removes the directory
    std::string instance;    // this start's token in DIR/instance: watchdogs act for it alone
    bool ready = false;      // started (or attached): a start that threw cleaned up after itself
    mutable std::mutex control;  // one server-control operation at a time
    int watchdog_fd = -1;
    pid_t watchdog_pid = -1;
    pid_t owner_watchdog_pid = -1;

    std::string server_dir(int i) const { return dir + "/s" + std::to_string(i); }
    std::string marker(int i) const { return server_dir(i) + "/zoo.cfg"; }
    pid_t pid_of(int i) const {
        auto text = trim(read_file(server_dir(i) + "/pid"));
        return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
    }
    bool runs(int i) const { return detail::process_runs(pid_of(i), marker(i)); }

    void check_index(int i, const char* what) const {
        if (i < 0 || i >= servers)
            throw std::out_of_range(std::string("zkr::testkit::ensemble::") + what + "(" + std::to_string(i) +
                                    "): no such server (the ensemble has " + std::to_string(servers) + ", from 0)");
    }
    void check_control(int i, const char* what) const {
        if (external)
            throw std::logic_error(std::string("zkr::testkit::ensemble::") + what +
                                   ": the ensemble is external (ZKR_TESTKIT_CONNECT=" + env("ZKR_TESTKIT_CONNECT") +
                                   "): its servers cannot be controlled from here");
        check_index(i, what);
    }

    std::string address(int i) const {
        return external ? external_hosts[static_cast<std::size_t>(i)] : "127.0.0.1:" + std::to_string(ports[static_cast<std::size_t>(i)]);
    }
    std::string mode(int i, std::chrono::milliseconds timeout) const {
        return mode_of(testkit::four_letter_word(address(i), "srvr", timeout));
    }

    // ------------------------------------------------------------ configuration

    void write_configs(const std::vector<int>& picked, const std::string& java, const std::string& class_path) {
        ports.assign(picked.begin(), picked.begin() + servers);
        write_file(dir + "/log4j.properties",
                   "log4j.rootLogger=${zookeeper.root.logger}\n"
                   "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
                   "log4j.appender.CONSOLE.Target=System.out\n"
                   "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
                   "log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%c{1}] - %m%n\n");
        write_file(dir + "/servers", std::to_string(servers) + "\n");
        for (int i = 0; i < servers; ++i) {
            const std::string sdir = server_dir(i);
            fs::create_directories(sdir + "/data");
            write_file(sdir + "/data/myid", std::to_string(i + 1) + "\n");
            std::map<std::string, std::string> cfg{
                {"tickTime", std::to_string(options.tick_time.count())},
                {"initLimit", "20"},
                {"syncLimit", "10"},
                {"minSessionTimeout", std::to_string(2 * options.tick_time.count())},
                {"maxSessionTimeout", std::to_string(100 * options.tick_time.count())},
                {"dataDir", sdir + "/data"},
                {"clientPort", std::to_string(ports[static_cast<std::size_t>(i)])},
                {"clientPortAddress", "127.0.0.1"},
                {"admin.enableServer", "false"},
                {"4lw.commands.whitelist", "*"},
                {"preAllocSize", "1024"},
                {"forceSync", options.force_sync ? "yes" : "no"},
                {"reconfigEnabled", "false"},
                {"maxClientCnxns", "0"},
                {"autopurge.purgeInterval", "0"},
            };
            if (servers > 1) {
                cfg["standaloneEnabled"] = "false";
                for (int j = 0; j < servers; ++j) {
                    auto quorum = picked[static_cast<std::size_t>(servers + 2 * j)];
                    auto election = picked[static_cast<std::size_t>(servers + 2 * j + 1)];
                    cfg["server." + std::to_string(j + 1)] = "127.0.0.1:" + std::to_string(quorum) + ":" +
                                                             std::to_string(election) + ";127.0.0.1:" +
                                                             std::to_string(ports[static_cast<std::size_t>(j)]);
                }
            }
            for (auto& [k, v] : options.server_config) cfg[k] = v;
            std::string text;
            for (auto& [k, v] : cfg) text += k + "=" + v + "\n";
            write_file(sdir + "/zoo.cfg", text);
            std::vector<std::string> command{java};
            for (auto& o : options.jvm_options)
                if (!o.empty()) command.push_back(o);
            command.insert(command.end(), {"-Djava.net.preferIPv4Stack=true",
                                           "-Dlog4j.configuration=file:" + dir + "/log4j.properties",
                                           "-Dzookeeper.log.dir=" + sdir,
                                           "-Dzookeeper.root.logger=" + options.log_level + ",CONSOLE",
                                           "-Dzookeeper.jmx.log4j.disable=true",
                                           "-Dznode.container.checkIntervalMs=" + std::to_string(options.container_check_interval.count()),
                                           "-cp", class_path, "org.apache.zookeeper.server.quorum.QuorumPeerMain", sdir + "/zoo.cfg"});
            std::string lines;
            for (auto& c : command) lines += c + "\n";
            write_file(sdir + "/command", lines);
            // Where the class-data-sharing archive is (launch() uses it, or has it made), for
            // whoever starts this server: this process, or another one that attached.
            std::error_code ec;
            fs::remove(sdir + "/cds-archive", ec);
            if (options.class_data_sharing) {
                if (auto archive = cds_archive(java, class_path, options.jvm_options); !archive.empty())
                    write_file(sdir + "/cds-archive", archive + "\n");
            }
        }
    }

    // ------------------------------------------------------------ processes

    void launch(int i) {
        const std::string sdir = server_dir(i);
        std::vector<std::string> command;
        {
            std::istringstream lines(read_file(sdir + "/command"));
            std::string line;
            while (std::getline(lines, line)) command.push_back(line);
        }
        if (command.empty()) throw std::runtime_error("zkr::testkit: " + sdir + "/command is missing");
        // From the archive if there is one; else this server writes one as it exits (to a name
        // of its own, renamed into place once it has exited normally: see finish_cds_dump).
        if (auto archive = trim(read_file(sdir + "/cds-archive")); !archive.empty()) {
            std::vector<std::string> cds{"-Xlog:cds=off", "-Xlog:cds+dynamic=off"};
            std::error_code ec;
            finish_cds_dump(i, false);  // what an earlier start of this server left, if it exited on its own
            if (fs::exists(archive, ec)) {
                cds.push_back("-XX:SharedArchiveFile=" + archive);
            } else {
                drop_stale_cds_dumps(archive);
                std::string dump = archive + "." + std::to_string(::getpid()) + "-" + instance + "-s" + std::to_string(i) + ".tmp";
                cds.push_back("-XX:ArchiveClassesAtExit=" + dump);
                write_file(sdir + "/cds-dump", dump + "\n");
            }
            command.insert(command.begin() + 1, cds.begin(), cds.end());
        }
        {
            std::ofstream log(sdir + "/server.log", std::ios::app);
            log << "===== zkr::testkit: starting server " << i << "\n";
        }
        pid_t pid = detail::spawn(command, sdir, sdir + "/server.log");
        // Whole or not at all, for readers without the control lock (running(), leader()).
        write_file(sdir + "/pid.new", std::to_string(pid) + "\n");
        fs::rename(sdir + "/pid.new", sdir + "/pid");
    }

    // SIGTERM (SIGKILL for a kill), then SIGKILL after the bound; returns once it is gone.
    void stop_one(int i, bool kill) {
        pid_t pid = pid_of(i);
        if (detail::process_runs(pid, marker(i))) {
            if (kill) {
                ::kill(pid, SIGKILL);
            } else {
                ::kill(pid, SIGTERM);
                ::kill(pid, SIGCONT);  // a frozen JVM cannot act on SIGTERM
            }
            bool exited = detail::wait_gone(pid, marker(i), kill ? std::chrono::milliseconds(5000) : options.stop_timeout);
            if (!exited) {
                ::kill(pid, SIGKILL);
                if (!detail::wait_gone(pid, marker(i), std::chrono::milliseconds(5000)))
                    throw std::runtime_error("zkr::testkit: server " + std::to_string(i) + " (pid " + std::to_string(pid) +
                                             ") survived SIGKILL");
            }
            finish_cds_dump(i, exited && !kill);
        } else {
            finish_cds_dump(i, false);  // it ended on its own: whatever it wrote is not to be trusted
        }
        detail::reap(pid);  // one that exited on its own (a bad setting, a port taken) is a zombie of ours
        std::error_code ec;
        fs::remove(server_dir(i) + "/pid", ec);
    }

    // Dumps of servers that never stopped through us (their watchdog stopped them, or their
    // process was killed with ours) are never renamed: gone after ten minutes.
    static void drop_stale_cds_dumps(const std::string& archive) {
        const fs::path a(archive);
        const std::string prefix = a.filename().string() + ".";
        std::error_code ec;
        for (fs::directory_iterator it(a.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (name.rfind(prefix, 0) != 0 || name.size() < 4 || name.compare(name.size() - 4, 4, ".tmp") != 0) continue;
            std::error_code time_ec;
            auto age = fs::file_time_type::clock::now() - fs::last_write_time(it->path(), time_ec);
            if (!time_ec && age > std::chrono::minutes(10)) fs::remove(it->path(), time_ec);
        }
    }

    // A server that was to write the class-data-sharing archive has gone: the archive it wrote is
    // put in place if it exited normally (a killed JVM writes none, or half of one), else dropped.
    void finish_cds_dump(int i, bool exited_normally) {
        const std::string sdir = server_dir(i);
        auto dump = trim(read_file(sdir + "/cds-dump"));
        if (dump.empty()) return;
        std::error_code ec;
        fs::remove(sdir + "/cds-dump", ec);
        auto archive = trim(read_file(sdir + "/cds-archive"));
        if (exited_normally && !archive.empty() && fs::file_size(dump, ec) > 0 && !ec) {
            fs::rename(dump, archive, ec);  // atomic: a server starting now sees all of it or none
            if (!ec) return;
        }
        fs::remove(dump, ec);
    }

    void stop_all(bool kill) {
        std::vector<std::thread> stoppers;
        for (int i = 0; i < servers; ++i) {
            if (!fs::exists(server_dir(i))) continue;
            stoppers.emplace_back([this, i, kill] {
                try {
                    stop_one(i, kill);
                } catch (const std::exception&) {
                }
            });
        }
        for (auto& t : stoppers) t.join();
    }

    // Until every server of `which` serves (in an ensemble: leads or follows, and some server leads).
    wait_result wait_serving(const std::vector<int>& which, clock_type::time_point until) const {
        while (true) {
            bool ok = true, leader = false;
            for (int i : which) {
                if (!runs(i)) {
                    bool binding = read_file(server_dir(i) + "/server.log").find("Address already in use") != std::string::npos ||
                                   read_file(server_dir(i) + "/server.log").find("BindException") != std::string::npos;
                    return {binding ? serving::died_binding : serving::died, i};
                }
                auto m = mode(i, std::chrono::milliseconds(1000));
                if (m == "leader") leader = true;
                else if (m == "standalone" && servers == 1) {
                } else if (m != "follower" && m != "observer") ok = false;
            }
            if (ok && servers > 1 && !leader) {
                for (int i = 0; i < servers && !leader; ++i)
                    if (runs(i) && detail::process_state(pid_of(i)) != 'T' && mode(i, std::chrono::milliseconds(1000)) == "leader") leader = true;
                ok = leader;
            }
            if (ok) return {serving::ok, -1};
            if (clock_type::now() >= until) {
                for (int i : which)
                    if (mode(i, std::chrono::milliseconds(500)).empty()) return {serving::timed_out, i};
                return {serving::timed_out, -1};
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }

    std::string failure(const wait_result& r, const char* doing) const {
        std::string what = r.outcome == serving::timed_out
                               ? (r.server < 0 ? std::string("no leader was elected")
                                               : "server " + std::to_string(r.server) + " did not serve") +
                                     " within " + std::to_string(options.start_timeout.count()) + " ms"
                               : "server " + std::to_string(r.server) + " exited" +
                                     (r.outcome == serving::died_binding ? " (its ports were taken)" : "");
        // How it ended, when this process started it (a server that exits at once with nothing in
        // its log says more by its status).
        if (r.outcome != serving::timed_out && r.server >= 0) {
            const pid_t pid = pid_of(r.server);
            auto how = detail::reap_and_describe(pid, std::chrono::milliseconds(5000));
            what += " (pid " + std::to_string(pid) + (how.empty() ? std::string() : ", " + how) + ")";
        }
        std::string message = std::string("zkr::testkit: ") + doing + ": " + what;
        for (int i = 0; i < servers; ++i) {
            if (r.server >= 0 && i != r.server) continue;
            message += "\n----- the end of " + server_dir(i) + "/server.log\n" + tail(server_dir(i) + "/server.log", 25);
        }
        return message;
    }

    // ------------------------------------------------------------ the directory and its watchdog

    void make_directory() {
        if (!options.directory.empty()) {
            dir = fs::absolute(options.directory).lexically_normal().string();
            while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
            fs::create_directories(dir);
            if (!fs::is_empty(dir) && !fs::exists(dir + "/servers"))
                throw std::runtime_error("zkr::testkit: " + dir + " is not empty and holds no ensemble: not touched");
            // Servers left running here by an earlier start (a crashed run): stopped by pid file.
            if (fs::exists(dir + "/servers")) {
                servers = std::max(servers, std::stoi(trim(read_file(dir + "/servers"))));
                stop_all(true);
            }
            for (auto& entry : fs::directory_iterator(dir)) fs::remove_all(entry.path());
            return;
        }
        std::string parent = !options.parent_directory.empty() ? options.parent_directory
                             : !env("TMPDIR").empty()          ? env("TMPDIR")
                                                               : "/tmp";
        std::string pattern = parent + "/zkr-testkit-XXXXXX";
        std::vector<char> buffer(pattern.begin(), pattern.end());
        buffer.push_back('\0');
        if (!::mkdtemp(buffer.data()))
            throw std::runtime_error("zkr::testkit: cannot make a directory in " + parent + ": " + std::strerror(errno));
        dir = buffer.data();
    }

    // A watchdog of the owner process, left running (not ours to reap once we detach).
    void start_owner_watchdog(int owner) {
        std::ifstream stat("/proc/" + std::to_string(owner) + "/stat");
        std::string text;
        std::getline(stat, text);
        auto close = text.rfind(')');
        if (close == std::string::npos) throw std::runtime_error("zkr::testkit: owner process " + std::to_string(owner) + " is not running");
        std::istringstream fields(text.substr(close + 2));
        std::string field, started;
        for (int k = 0; k < 20 && fields >> field; ++k) started = field;  // field 22 of stat: its start time
        int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        owner_watchdog_pid = detail::spawn_with_input({"/bin/sh", "-c", watchdog_script, "zkr-testkit-watchdog", dir, instance,
                                                       keep() ? "keep" : "remove", std::to_string(owner), started},
                                                      null);
        ::close(null);
    }

    void start_watchdog() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("zkr::testkit: pipe2 failed");
        try {
            watchdog_pid = detail::spawn_with_input(
                {"/bin/sh", "-c", watchdog_script, "zkr-testkit-watchdog", dir, instance, keep() ? "keep" : "remove"}, fds[0]);
        } catch (...) {
            ::close(fds[0]);
            ::close(fds[1]);
            throw;
        }
        ::close(fds[0]);
        watchdog_fd = fds[1];
    }

    void stop_watchdog(bool kill_it) {
        if (watchdog_pid > 0 && kill_it) ::kill(watchdog_pid, SIGKILL);
        if (watchdog_fd >= 0) ::close(watchdog_fd);  // end of input: it cleans up what is left, then exits
        watchdog_fd = -1;
        // Bounded: a child forked elsewhere in this process that has not exec'd yet may hold the
        // pipe a moment longer.
        if (watchdog_pid > 0 && !detail::wait_gone(watchdog_pid, "zkr-testkit-watchdog", std::chrono::milliseconds(5000))) {
            ::kill(watchdog_pid, SIGKILL);
            detail::wait_gone(watchdog_pid, "zkr-testkit-watchdog", std::chrono::milliseconds(5000));
        }
        watchdog_pid = -1;
    }

    bool keep() const { return options.keep_directory || env("ZKR_TESTKIT_KEEP") == "1"; }

    void remove_directory() {
        if (keep() || dir.empty()) return;
        std::error_code ec;
        fs::remove_all(dir, ec);
    }

    // ------------------------------------------------------------ start-up

    void start_all() {
        if (options.servers < 1 || options.servers > 9)
            throw std::invalid_argument("zkr::testkit::ensemble: " + std::to_string(options.servers) +
                                        " servers (1 for a standalone server, 2 to 9 for an ensemble)");
        if (options.allow_external) {
            auto connect = env("ZKR_TESTKIT_CONNECT");
            if (!connect.empty()) {
                external = true;
                external_hosts = detail::connect_string_hosts(connect);
                if (external_hosts.empty())
                    throw std::invalid_argument("zkr::testkit: ZKR_TESTKIT_CONNECT=\"" + connect + "\" names no server");
                servers = static_cast<int>(external_hosts.size());
                return;
            }
        }
        const std::string java = find_java(options.java);
        const std::string class_path = !options.class_path.empty() ? options.class_path : default_class_path();
        {
            std::istringstream entries(class_path);
            std::string entry;
            while (std::getline(entries, entry, ':'))
                if (!entry.empty() && entry.find('*') == std::string::npos && !fs::exists(entry))
                    throw std::runtime_error("zkr::testkit: the servers' class path entry " + entry + " does not exist");
        }
        servers = options.servers;
        make_directory();
        servers = options.servers;
        try {
            std::ostringstream token;
            token << std::hex << std::random_device{}() << std::random_device{}() << ::getpid();
            instance = token.str();
            write_file(dir + "/instance", instance + "\n");
            start_watchdog();
            std::vector<int> all(static_cast<std::size_t>(servers));
            for (int i = 0; i < servers; ++i) all[static_cast<std::size_t>(i)] = i;
            for (int attempt = 1;; ++attempt) {
                for (int i = 0; i < servers; ++i) fs::remove_all(server_dir(i));
                auto picked = detail::pick_ports(dir, servers == 1 ? 1 : 3 * servers);
                write_configs(picked, java, class_path);
                for (int i = 0; i < servers; ++i) launch(i);
                auto r = wait_serving(all, clock_type::now() + options.start_timeout);
                if (r.outcome == serving::ok) break;
                auto message = failure(r, "starting the servers");
                stop_all(true);
                if (r.outcome == serving::died_binding && attempt < 3) continue;  // ports taken meanwhile: new ones
                throw std::runtime_error(message);
            }
            std::string connect;
            for (int i = 0; i < servers; ++i) connect += (i ? "," : "") + address(i);
            write_file(dir + "/connect", connect + "\n");
            if (options.owner_pid > 0) start_owner_watchdog(options.owner_pid);
            ready = true;
        } catch (...) {
            stop_all(true);
            stop_watchdog(true);
            remove_directory();
            throw;
        }
    }

    void attach_to(const std::string& directory) {
        dir = fs::absolute(directory).lexically_normal().string();
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        if (!fs::exists(dir + "/servers") || !fs::exists(dir + "/connect"))
            throw std::runtime_error("zkr::testkit: " + dir + " holds no ensemble (no servers or connect file)");
        servers = std::stoi(trim(read_file(dir + "/servers")));
        owned = false;
        for (auto& host : detail::connect_string_hosts(trim(read_file(dir + "/connect"))))
            ports.push_back(std::stoi(host.substr(host.rfind(':') + 1)));
        if (static_cast<int>(ports.size()) != servers) throw std::runtime_error("zkr::testkit: " + dir + "/connect does not name every server");
        ready = true;
    }

    ~impl() {
        if (external || !ready) return;
        if (owned) {
            stop_all(false);
            stop_watchdog(keep());  // kept: it must not remove the directory either
            remove_directory();
            if (owner_watchdog_pid > 0) {
                ::kill(owner_watchdog_pid, SIGKILL);
                detail::wait_gone(owner_watchdog_pid, "zkr-testkit-watchdog", std::chrono::milliseconds(5000));
            }
        } else {
            stop_watchdog(true);  // the owner's watchdog, if any, stays: the servers outlive us
        }
    }
};

ensemble::ensemble(int servers) : ensemble([servers] {
    ensemble_options o;
    o.servers = servers;
    return o;
}()) {}

ensemble::ensemble(ensemble_options options) : impl_(std::make_unique<impl>()) {
    impl_->options = std::move(options);
    impl_->start_all();
}

ensemble::ensemble(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

ensemble ensemble::attach(const std::string& directory) {
    auto i = std::make_unique<impl>();
    i->attach_to(directory);
    return ensemble(std::move(i));
}

ensemble::~ensemble() = default;
ensemble::ensemble(ensemble&&) noexcept = default;
ensemble& ensemble::operator=(ensemble&&) noexcept = default;

int ensemble::size() const { return impl_->servers; }

std::string ensemble::connect_string() const {
    std::string connect;
    for (int i = 0; i < impl_->servers; ++i) connect += (i ? "," : "") + impl_->address(i);
    return connect;
}

std::string ensemble::address(int i) const {
    impl_->check_index(i, "address");
    return impl_->address(i);
}

int ensemble::client_port(int i) const {
    impl_->check_index(i, "client_port");
    auto a = impl_->address(i);
    return std::stoi(a.substr(a.rfind(':') + 1));
}

bool ensemble::external() const { return impl_->external; }
std::string ensemble::directory() const { return impl_->external ? std::string() : impl_->dir; }

std::string ensemble::server_log(int i) const {
    impl_->check_index(i, "server_log");
    return impl_->external ? std::string() : impl_->server_dir(i) + "/server.log";
}

void ensemble::kill(int i) {
    impl_->check_control(i, "kill");
    std::lock_guard lock(impl_->control);
    if (!impl_->runs(i)) throw std::logic_error("zkr::testkit::ensemble::kill(" + std::to_string(i) + "): the server is not running");
    impl_->stop_one(i, true);
}

void ensemble::stop(int i) {
    impl_->check_control(i, "stop");
    std::lock_guard lock(impl_->control);
    impl_->stop_one(i, false);
}

void ensemble::start(int i) {
    impl_->check_control(i, "start");
    std::lock_guard lock(impl_->control);
    if (!impl_->runs(i)) impl_->launch(i);
    if (detail::process_state(impl_->pid_of(i)) == 'T')
        throw std::logic_error("zkr::testkit::ensemble::start(" + std::to_string(i) + "): the server is frozen (thaw() it)");
    auto r = impl_->wait_serving({i}, clock_type::now() + impl_->options.start_timeout);
    if (r.outcome != serving::ok) throw std::runtime_error(impl_->failure(r, ("starting server " + std::to_string(i)).c_str()));
}

void ensemble::restart(int i) {
    impl_->check_control(i, "restart");
    stop(i);
    start(i);
}

void ensemble::freeze(int i) {
    impl_->check_control(i, "freeze");
    std::lock_guard lock(impl_->control);
    pid_t pid = impl_->pid_of(i);
    if (!impl_->runs(i)) throw std::logic_error("zkr::testkit::ensemble::freeze(" + std::to_string(i) + "): the server is not running");
    ::kill(pid, SIGSTOP);
    if (!detail::wait_stopped(pid, std::chrono::milliseconds(5000)))
        throw std::runtime_error("zkr::testkit::ensemble::freeze(" + std::to_string(i) + "): the server did not stop");
}

void ensemble::thaw(int i) {
    impl_->check_control(i, "thaw");
    std::lock_guard lock(impl_->control);
    if (!impl_->runs(i)) throw std::logic_error("zkr::testkit::ensemble::thaw(" + std::to_string(i) + "): the server is not running");
    ::kill(impl_->pid_of(i), SIGCONT);
}

bool ensemble::running(int i) const {
    impl_->check_index(i, "running");
    return !impl_->external && impl_->runs(i);
}

bool ensemble::frozen(int i) const {
    impl_->check_index(i, "frozen");
    if (impl_->external || !impl_->runs(i)) return false;
    char s = detail::process_state(impl_->pid_of(i));
    return s == 'T' || s == 't';
}

int ensemble::leader() const {
    for (int i = 0; i < impl_->servers; ++i) {
        if (!impl_->external && (!impl_->runs(i) || frozen(i))) continue;
        auto m = impl_->mode(i, std::chrono::milliseconds(1000));
        if (m == "leader" || (m == "standalone" && impl_->servers == 1)) return i;
    }
    return -1;
}

int ensemble::wait_for_leader(std::chrono::milliseconds timeout) const {
    auto until = clock_type::now() + timeout;
    while (true) {
        int l = leader();
        if (l >= 0) return l;
        if (clock_type::now() >= until)
            throw std::runtime_error("zkr::testkit::ensemble::wait_for_leader: no leader within " + std::to_string(timeout.count()) + " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

std::string ensemble::four_letter_word(int i, const std::string& word, std::chrono::milliseconds timeout) const {
    impl_->check_index(i, "four_letter_word");
    return testkit::four_letter_word(impl_->address(i), word, timeout);
}

int ensemble::watch_count(int i) const {
    auto m = monitor(i);
    auto it = m.find("zk_watch_count");
    return it == m.end() ? -1 : std::stoi(it->second);
}

int ensemble::data_watch_count(int i) const {
    auto text = four_letter_word(i, "wchs");
    auto at = text.find("Total watches:");
    if (at == std::string::npos) return -1;
    return std::stoi(text.substr(at + 14));
}

std::map<std::string, std::string> ensemble::monitor(int i) const {
    std::map<std::string, std::string> out;
    std::istringstream lines(four_letter_word(i, "mntr"));
    std::string line;
    while (std::getline(lines, line)) {
        auto tab = line.find('\t');
        if (tab != std::string::npos) out[line.substr(0, tab)] = trim(line.substr(tab + 1));
    }
    return out;
}

void ensemble::detach() {
    if (impl_->external) return;
    impl_->owned = false;
}

}  // namespace zkr::testkit
