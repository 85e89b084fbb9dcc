// zkr-testkit: zkr::testkit::ensemble from the command line, for shell scripts and ctest fixtures
// (servers that outlive the command that started them). Servers are numbered from 0.
#include "zkr/testkit/ensemble.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace {

constexpr const char* usage = R"(usage: zkr-testkit COMMAND DIR [ARGS]
ZooKeeper servers on loopback (Debian's zookeeper package), each ensemble in a directory DIR:
  start DIR N             start N servers (1: standalone) and leave them running; prints the
                          connect string (servers an earlier start left in DIR are stopped first)
  connect DIR             print the connect string
  port DIR I              print server I's client port (servers are numbered from 0)
  stop DIR                stop every server (SIGTERM, then SIGKILL), keep DIR
  stop-server DIR I       stop server I
  kill-server DIR I       SIGKILL server I
  start-server DIR I      start server I and wait until it serves
  restart-server DIR I    stop, then start server I
  freeze-server DIR I     SIGSTOP server I
  thaw-server DIR I       SIGCONT server I
  leader DIR              print the leader's index (exit 1 while there is none)
  4lw DIR I WORD          print server I's answer to a four-letter word (srvr, mntr, ...)
  destroy DIR             stop every server and remove DIR
Environment: JAVA (the java to run), ZKR_TESTKIT_CLASSPATH (the servers' class path),
ZK_LOG_LEVEL (log4j level, INFO), ZK_FORCE_SYNC=yes (fsync), ZK_START_TIMEOUT (seconds, 30),
ZK_CONTAINER_CHECK_MS (how often empty containers are reaped, 1000), ZKR_TESTKIT_OWNER_PID (start:
stop the servers and remove DIR once that process has ended).
)";

int fail(const std::string& why) {
    std::cerr << "zkr-testkit: " << why << "\n";
    return 1;
}

int index_of(const std::string& text) {
    std::size_t used = 0;
    int i = std::stoi(text, &used);
    if (used != text.size()) throw std::invalid_argument("not a server index: " + text);
    return i;
}

std::string env(const char* name, const std::string& otherwise) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : otherwise;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
        std::fputs(usage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    const std::string command = args[0];
    auto need = [&](std::size_t n) {
        if (args.size() != n + 1) throw std::invalid_argument("'" + command + "' takes " + std::to_string(n) + " argument(s); see --help");
    };
    try {
        if (command == "start") {
            need(2);
            zkr::testkit::ensemble_options o;
            o.servers = index_of(args[2]);
            o.directory = args[1];
            o.allow_external = false;
            o.log_level = env("ZK_LOG_LEVEL", "INFO");
            o.force_sync = env("ZK_FORCE_SYNC", "no") == "yes";
            o.start_timeout = std::chrono::seconds(std::stoi(env("ZK_START_TIMEOUT", "30")));
            o.container_check_interval = std::chrono::milliseconds(std::stoi(env("ZK_CONTAINER_CHECK_MS", "1000")));
            o.owner_pid = std::stoi(env("ZKR_TESTKIT_OWNER_PID", "0"));
            auto t0 = std::chrono::steady_clock::now();
            zkr::testkit::ensemble e(o);
            e.detach();
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
            std::cerr << "zkr-testkit: " << e.size() << " server(s) serving after " << ms << " ms in " << e.directory() << "\n";
            std::cout << e.connect_string() << std::endl;
            return 0;
        }
        if (args.size() < 2) throw std::invalid_argument("'" + command + "' needs a directory; see --help");
        if (command == "destroy") {
            need(1);
            if (!std::filesystem::exists(args[1])) return 0;
            if (std::filesystem::exists(std::filesystem::path(args[1]) / "servers")) {
                auto e = zkr::testkit::ensemble::attach(args[1]);
                for (int i = 0; i < e.size(); ++i) e.stop(i);
            } else if (!std::filesystem::is_empty(args[1])) {
                return fail(args[1] + " holds no ensemble: not removed");
            }
            std::filesystem::remove_all(args[1]);
            return 0;
        }
        if (command == "stop" && !std::filesystem::exists(std::filesystem::path(args[1]) / "servers")) return 0;
        auto e = zkr::testkit::ensemble::attach(args[1]);
        if (command == "connect") {
            need(1);
            std::cout << e.connect_string() << std::endl;
        } else if (command == "port") {
            need(2);
            std::cout << e.client_port(index_of(args[2])) << std::endl;
        } else if (command == "stop") {
            need(1);
            for (int i = 0; i < e.size(); ++i) e.stop(i);
        } else if (command == "stop-server") {
            need(2);
            e.stop(index_of(args[2]));
        } else if (command == "kill-server") {
            need(2);
            e.kill(index_of(args[2]));
        } else if (command == "start-server") {
            need(2);
            e.start(index_of(args[2]));
        } else if (command == "restart-server") {
            need(2);
            e.restart(index_of(args[2]));
        } else if (command == "freeze-server") {
            need(2);
            e.freeze(index_of(args[2]));
        } else if (command == "thaw-server") {
            need(2);
            e.thaw(index_of(args[2]));
        } else if (command == "leader") {
            need(1);
            int l = e.leader();
            if (l < 0) return fail("no leader in " + e.directory());
            std::cout << l << std::endl;
        } else if (command == "4lw") {
            need(3);
            auto answer = e.four_letter_word(index_of(args[2]), args[3], std::chrono::seconds(5));
            if (answer.empty()) return fail("server " + args[2] + " did not answer '" + args[3] + "'");
            std::cout << answer << (answer.back() == '\n' ? "" : "\n");
        } else {
            return fail("unknown command '" + command + "' (try --help)");
        }
        return 0;
    } catch (const std::exception& ex) {
        return fail(ex.what());
    }
}
