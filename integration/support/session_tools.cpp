#include "session_tools.hpp"

#include <set>
#include <algorithm>
#include <cstdio>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include <pthread.h>
#include <unistd.h>

namespace zkr::test {

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return condition();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

bool holds_throughout(const std::function<bool()>& condition, std::chrono::milliseconds window) {
    auto end = std::chrono::steady_clock::now() + window;
    while (std::chrono::steady_clock::now() < end) {
        if (!condition()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return condition();
}

state_log::state_log(zkr::client& c)
    : subscription_(c.on_state_change([this](zkr::connection_state s) {
          std::lock_guard lock(mutex_);
          states_.push_back(s);
      })) {}

std::vector<zkr::connection_state> state_log::snapshot() {
    std::lock_guard lock(mutex_);
    return states_;
}

bool state_log::saw(zkr::connection_state s) {
    auto v = snapshot();
    return std::find(v.begin(), v.end(), s) != v.end();
}

std::size_t queue_child_watches(zkr::client& c, const std::string& path) {
    auto children = c.get_children(path).children;
    // By sequence: the suffix after the last '-'.
    std::sort(children.begin(), children.end(), [](const std::string& x, const std::string& y) {
        return x.substr(x.rfind('-') + 1) < y.substr(y.rfind('-') + 1);
    });
    std::set<std::pair<std::string, std::int64_t>> watches;
    std::string previous;
    for (const auto& name : children) {
        auto r = c.exists(path + "/" + name);
        if (!r.exists) throw std::runtime_error("queue_child_watches(" + path + "): " + name + " went while counting");
        std::int64_t session = r.stat.ephemeral_owner;
        watches.insert({name, session});
        if (!previous.empty()) watches.insert({previous, session});
        previous = name;
    }
    return watches.size();
}

std::vector<std::string> barrier_members(zkr::client& c, const std::string& path) {
    zkr::error_code ec;
    auto r = c.get_children(path, ec);
    if (ec == zkr::errc::no_node) return {};
    if (ec) throw zkr::system_error(ec, "barrier_members(" + path + "): the listing failed");
    auto kids = r.children;
    kids.erase(std::remove(kids.begin(), kids.end(), "ready"), kids.end());
    std::sort(kids.begin(), kids.end());
    return kids;
}

std::size_t queue_length(zkr::client& c, const std::string& path) {
    zkr::error_code ec;
    auto r = c.get_children(path, ec);
    if (ec == zkr::errc::no_node) return 0;  // no lock path: nobody queued
    if (ec) throw zkr::system_error(ec, "queue_length(" + path + "): the listing failed");
    return r.children.size();
}

bool queues_empty(zkr::client& c, const std::vector<std::string>& paths) {
    return std::all_of(paths.begin(), paths.end(), [&](const std::string& p) { return queue_length(c, p) == 0; });
}

void fail_deadline(const std::string& what, std::chrono::milliseconds timeout) {
    std::string message = "waited " + std::to_string(timeout.count()) + " ms for " + what + " in vain";
    std::fprintf(stderr, "deadline passed: %s\n", message.c_str());
    throw deadline_passed(message);
}

std::map<pid_t, std::string> process_threads() {
    std::map<pid_t, std::string> threads;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(entry.path() / "comm");
        std::string name;
        std::getline(comm, name);
        threads[static_cast<pid_t>(std::stol(entry.path().filename().string()))] = name;
    }
    return threads;
}

pid_t this_thread_id() { return ::gettid(); }

std::string this_thread_name() {
    char name[32] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    return name;
}

std::string first_server(const std::string& connect) {
    auto hosts = connect.substr(0, connect.find('/'));
    return hosts.substr(0, hosts.find(','));
}

std::string unique_path(const std::string& name) {
    static std::mt19937_64 random{std::random_device{}()};
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    return "/zkr-test/" + name + "-" + std::to_string(random() % 1'000'000'000);
}

zkr::client_options test_options(const std::string& connect, std::chrono::milliseconds session_timeout) {
    zkr::client_options o;
    o.connect = connect;
    o.session_timeout = session_timeout;
    o.connection_timeout = std::chrono::seconds(20);
    o.retry_policy = std::make_shared<zkr::retry::retry_until_elapsed>(std::chrono::seconds(20), std::chrono::milliseconds(100));
    return o;
}

}  // namespace zkr::test
