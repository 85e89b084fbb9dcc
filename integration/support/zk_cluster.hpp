// zk_cluster — throwaway native ZooKeeper servers for zkr's integration tests.
//
// Drives integration/zk-cluster.sh (its absolute path comes from the compile definition
// ZKR_CLUSTER_SCRIPT, a string literal). Server indexes are 1-based, as in the script.
//
// Every cluster started here carries a watchdog (ZK_CLUSTER_OWNER_PID): if the test binary dies
// without running destructors (abort, SIGKILL), the servers are stopped and the directory removed
// about a second later, so crashed tests do not leak JVMs.
#pragma once

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

namespace zkr::test {

class zk_cluster {
public:
    // Starts `servers` servers (1: standalone, 3: ensemble) in a fresh directory made by mkdtemp
    // under /tmp. Throws std::runtime_error carrying the script's stderr on failure.
    explicit zk_cluster(int servers = 1);
    ~zk_cluster();  // stops every server and removes the directory

    zk_cluster(const zk_cluster&) = delete;
    zk_cluster& operator=(const zk_cluster&) = delete;

    const std::string& connect_string() const { return connect_; }
    int size() const { return servers_; }
    const std::string& directory() const { return dir_; }  // DIR/sN/server.log holds the logs

    // Stop (SIGTERM, then SIGKILL after a bound) / signal / (re)start server i (1-based).
    // start_server waits until the server serves (ensemble member: until it is leader or follower).
    void stop_server(int i);
    void kill_server(int i, int signal = SIGKILL);
    void start_server(int i);
    void pause_server(int i);   // SIGSTOP
    void resume_server(int i);  // SIGCONT

    // Index of the server that reports "Mode: leader" (or "standalone" for a 1-server cluster),
    // 0 if none does right now (e.g. during an election).
    int leader() const;
    // Polls leader() until it is non-zero; throws std::runtime_error after `timeout`.
    int wait_for_leader(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

    // Reply to a four-letter word sent straight to server i's client port (empty string when the
    // server does not answer within ~3 s, e.g. while it is stopped or paused).
    std::string four_letter_word(int i, const std::string& word) const;
    // Total watches on server i, parsed from `wchs` ("... Total watches:N"); -1 if no answer.
    int watch_count(int i) const;
    /// Data and child watches server `i` holds ("mntr": zk_watch_count), or -1.
    int all_watch_count(int i) const;
    // "127.0.0.1:port" of server i's client port.
    std::string server_address(int i) const;
    int client_port(int i) const;

private:
    void check_index(int i) const;
    std::string run(const std::vector<std::string>& args) const;  // throws on non-zero exit

    int servers_;
    std::string dir_;
    std::string connect_;
    std::vector<int> ports_;
};

// Connect string for integration tests: $ZK_CONNECT if set (and non-empty), else the server the
// ctest fixture started ($ZKR_TEST_CONNECT_FILE), else a process-wide shared standalone cluster
// started on first use and stopped at exit. Using $ZK_CONNECT is announced on stderr, once per
// process. Tests that need servers of their own (to stop, pause or count them) start them with
// zk_cluster whatever ZK_CONNECT says.
std::string test_connect_string();
// True when ZK_CONNECT is set (test_connect_string() returns it).
bool using_external_ensemble();

// Runs the cluster script with `args`; returns its exit status and fills stdout/stderr.
// Exposed for tests of the harness itself.
int run_cluster_script(const std::vector<std::string>& args, std::string& out, std::string& err);

}  // namespace zkr::test
