/// \file
/// zkr::testkit::ensemble — real ZooKeeper servers on loopback, started for a test and controlled
/// by it: stop, kill, start, restart, freeze, thaw one server; find the leader; ask a server a
/// four-letter word. The servers are Java processes of Debian's `zookeeper` package (no Docker).
#pragma once
#include "zkr/testkit/export.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zkr::testkit {

/// How an ensemble's servers are started. The defaults suit tests: a 200 ms tick (sessions from
/// 400 ms to 20 s), no fsync, empty containers reaped every second, the admin server off, every
/// four-letter word allowed, loopback only.
struct ensemble_options {
    /// How many servers: 1 starts a standalone server, 2 to 9 an ensemble (a quorum of them).
    int servers = 1;
    /// The servers' tickTime.
    std::chrono::milliseconds tick_time{200};
    /// How long starting (the constructor, start(), restart()) waits for the servers to serve.
    std::chrono::milliseconds start_timeout{30'000};
    /// How long stop() waits after SIGTERM before it sends SIGKILL.
    std::chrono::milliseconds stop_timeout{10'000};
    /// How often the servers delete empty container nodes (the server's own default is 60 s).
    std::chrono::milliseconds container_check_interval{1'000};
    /// More zoo.cfg settings (key, value), written after the kit's own: they override them.
    std::map<std::string, std::string> server_config{};
    /// The ensemble gets a fresh directory under this one ("": $TMPDIR, else /tmp). It holds each
    /// server's zoo.cfg, data and server.log, and is removed when the ensemble is destroyed.
    std::string parent_directory{};
    /// This exact directory instead of a fresh one (made if missing; servers an ensemble left
    /// running in it are stopped and their directories replaced). For `zkr-testkit start`.
    std::string directory{};
    /// Keep the directory after destruction (the environment's ZKR_TESTKIT_KEEP=1 does too).
    bool keep_directory = false;
    /// For servers that outlive this object (detach()): once the process `owner_pid` has ended,
    /// a watchdog stops them and removes the directory (0: no such watchdog). `zkr-testkit start`
    /// sets it from ZKR_TESTKIT_OWNER_PID, for a script whose servers must not outlive it.
    int owner_pid = 0;
    /// The servers' log level (log4j: ERROR, WARN, INFO, DEBUG).
    std::string log_level = "INFO";
    /// fsync the servers' transaction logs.
    bool force_sync = false;
    /// When the environment sets ZKR_TESTKIT_CONNECT, be that ensemble instead of starting servers
    /// (connect_string() returns it; server control throws std::logic_error). False: always start
    /// servers here, for a test that stops, kills or freezes them.
    bool allow_external = true;
    /// The java to run ("": the environment's JAVA, else `java` on the PATH).
    std::string java{};
    /// The servers' Java class path ("": the environment's ZKR_TESTKIT_CLASSPATH, else the jars of
    /// Debian's `zookeeper` package in /usr/share/java).
    std::string class_path{};
    /// JVM options before the class name ("" entries are skipped). Default: a small heap and a
    /// JIT tuned for start-up, which is what a test's server needs.
    std::vector<std::string> jvm_options{"-Xms16m", "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                         "-XX:-UsePerfData"};
    /// Start servers from a class-data-sharing archive of the classes a server loads (a third
    /// less start-up CPU, 100 ms sooner serving). Kept in $ZKR_TESTKIT_CDS_DIR, else
    /// $XDG_CACHE_HOME/zkr-testkit, else ~/.cache/zkr-testkit, one per java, class path and JVM
    /// options; the first server to stop normally without one writes it. False, or no such
    /// directory to be had: none.
    bool class_data_sharing = true;
};

/// Real ZooKeeper servers on 127.0.0.1, each a Java process of its own. The constructor returns
/// once every server serves (an ensemble: once it has a leader); destruction stops them (SIGTERM,
/// then SIGKILL) and removes their directory. A test binary killed outright (SIGKILL, abort)
/// leaves nothing running either: a watchdog process stops its servers and removes the directory
/// as soon as the test process is gone.
///
/// Servers are numbered from 0. Ports are picked free (and reserved against other ensembles
/// starting at the same moment, in this process or another); a start whose ports were taken
/// meanwhile is made again with new ones. Every method is thread-safe. Errors: an index out of
/// range throws std::out_of_range; controlling a server in a state that does not allow it (freeze
/// a stopped server) or an external ensemble, std::logic_error; a server that does not serve
/// within start_timeout, or java or the ZooKeeper jars missing, std::runtime_error naming what
/// was wrong (and the tail of the server's log).
class ZKR_TESTKIT_EXPORT ensemble {
public:
    /// Starts `servers` servers with the default options (1: standalone).
    explicit ensemble(int servers = 1);
    /// Starts servers as `options` says (or is the external ensemble ZKR_TESTKIT_CONNECT names).
    explicit ensemble(ensemble_options options);
    /// An ensemble left running in `directory` by `zkr-testkit start` (or detach()): controls it
    /// without owning it (destruction leaves it running). Throws std::runtime_error if the
    /// directory holds no ensemble.
    static ensemble attach(const std::string& directory);
    /// Stops every server and removes the directory (unless detached or kept).
    ~ensemble();
    /// Takes over `other`'s servers (`other` is left empty: destroy it only).
    ensemble(ensemble&& other) noexcept;
    /// Stops this one's servers, then takes over `other`'s.
    ensemble& operator=(ensemble&& other) noexcept;
    ensemble(const ensemble&) = delete;
    ensemble& operator=(const ensemble&) = delete;

    /// How many servers.
    int size() const;
    /// "127.0.0.1:p0,127.0.0.1:p1,...": every server, for a client's connect string.
    std::string connect_string() const;
    /// "127.0.0.1:p" of server `i`.
    std::string address(int i) const;
    /// Server `i`'s client port.
    int client_port(int i) const;
    /// True when this is the ensemble ZKR_TESTKIT_CONNECT names (nothing was started here).
    bool external() const;
    /// The ensemble's directory ("" when external).
    std::string directory() const;
    /// The path of server `i`'s log ("" when external).
    std::string server_log(int i) const;

    /// SIGKILL: the server dies at once, as in a crash; its data stays for start().
    void kill(int i);
    /// A clean stop (SIGTERM; SIGKILL after stop_timeout). Its data stays for start().
    void stop(int i);
    /// Starts a stopped (or killed) server and waits until it serves (in an ensemble: until it
    /// follows or leads, and a leader exists). Does nothing but wait if it runs already.
    void start(int i);
    /// stop() if it runs, then start().
    void restart(int i);
    /// SIGSTOP: the server stops answering, its connections stay open (a GC pause, a hung host).
    void freeze(int i);
    /// SIGCONT after freeze().
    void thaw(int i);
    /// Whether server `i`'s process runs (a frozen one too).
    bool running(int i) const;
    /// Whether server `i` is frozen.
    bool frozen(int i) const;

    /// The index of the server that leads (standalone: 0 while it serves), -1 while none does
    /// (an election, a lost quorum). Frozen and stopped servers are not asked.
    int leader() const;
    /// leader(), polled until it is not -1; throws std::runtime_error after `timeout`.
    int wait_for_leader(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

    /// Server `i`'s answer to a four-letter word (srvr, mntr, wchs, cons, ...): "" when it does
    /// not answer within `timeout` (stopped, frozen). Throws std::invalid_argument for a word that
    /// is not four lower-case letters.
    std::string four_letter_word(int i, const std::string& word,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(3)) const;
    /// Every watch server `i` holds, data and child (`mntr`: zk_watch_count), -1 when it does not
    /// answer.
    int watch_count(int i) const;
    /// The data watches (exists, getData) server `i` holds (`wchs`: "Total watches"), -1 when it
    /// does not answer.
    int data_watch_count(int i) const;
    /// Server `i`'s `mntr` as key -> value (zk_watch_count, zk_znode_count, ...); empty when it
    /// does not answer.
    std::map<std::string, std::string> monitor(int i) const;

    /// Leaves the servers and the directory in place when this object is destroyed (what
    /// `zkr-testkit start` does); attach() finds them again.
    void detach();

private:
    struct impl;
    explicit ensemble(std::unique_ptr<impl> i);
    std::unique_ptr<impl> impl_;
};

/// The answer of the server at `address` ("host:port") to a four-letter word, "" when it does not
/// answer within `timeout`. Throws std::invalid_argument for a malformed address or word.
ZKR_TESTKIT_EXPORT std::string four_letter_word(const std::string& address, const std::string& word,
                                                std::chrono::milliseconds timeout = std::chrono::seconds(3));

}  // namespace zkr::testkit
