// zklock's command line (Boost.Program_options): one options struct per subcommand.
#pragma once

#include <zkr/client.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace zklock {

/// What every subcommand takes: where the ensemble is and who we are.
struct connection_options {
    std::string connect;                       ///< --connect, else $ZK_CONNECT
    std::vector<zkr::digest_credentials> auth; ///< --auth (repeatable), else $ZK_AUTH
    std::chrono::milliseconds session_timeout{10'000};
    bool verbose = false;                      ///< zkr's and the C client's warnings on stderr
};

struct run_options {
    connection_options connection;
    std::string path;
    std::vector<std::string> command;          ///< argv of the command, [0] the program
    bool shared = false;
    std::optional<int> max_leases;             ///< --max: a lease of a semaphore of this many, not the lock
    std::optional<std::chrono::milliseconds> timeout;  ///< none: wait as long as it takes
    std::chrono::milliseconds connect_timeout{15'000};
    int lost_signal = 15;                      ///< SIGTERM
    std::chrono::milliseconds grace{10'000};
};

struct status_options {
    connection_options connection;
    std::string path;
    bool json = false;
    std::optional<int> max_leases;             ///< --max: the semaphore's maximum, for "N of MAX"
    std::chrono::milliseconds timeout{15'000};
};

struct watch_options {
    connection_options connection;
    std::string path;
    bool json = false;
    std::chrono::milliseconds timeout{15'000};  ///< bounds each reading of the queue
    std::optional<int> count;                  ///< exit after this many changes
};

struct tree_options {
    connection_options connection;
    std::string path;
    bool json = false;
    bool watch = false;                         ///< then every change, until interrupted
    int depth = -1;                             ///< levels below PATH (-1: all)
    std::chrono::milliseconds timeout{15'000};  ///< bounds the first reading of the subtree
    std::optional<int> count;                   ///< --watch: exit after this many changes
};

struct release_stale_options {
    connection_options connection;
    std::string path;
    std::int64_t session = 0;
    bool yes = false;
    std::chrono::milliseconds timeout{15'000};
};

/// `--help` (general or of one subcommand) or `--version`: print and exit 0.
struct print_and_exit {
    std::string text;
};

using command_line =
    std::variant<print_and_exit, run_options, status_options, watch_options, tree_options, release_stale_options>;

/// Parses argv. Throws zklock::failure(exit_code::usage) naming what is wrong.
command_line parse_command_line(int argc, const char* const* argv);

}  // namespace zklock
