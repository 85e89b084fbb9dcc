#include "bench_support.hpp"

#include <zkr/testkit/ensemble.hpp>

#include <chrono>
#include <sstream>
#include <stdexcept>

namespace zkr::bench {

std::vector<std::string> servers_of(const std::string& connect) {
    std::vector<std::string> out;
    std::istringstream in(connect.substr(0, connect.find('/')));
    for (std::string s; std::getline(in, s, ',');)
        if (!s.empty()) out.push_back(s);
    if (out.empty()) throw std::invalid_argument("no server in the connect string \"" + connect + "\"");
    return out;
}

std::string four_letter(const std::string& server, const std::string& word) {
    auto reply = zkr::testkit::four_letter_word(server, word);
    if (reply.empty()) throw std::runtime_error(server + " did not answer \"" + word + "\"");
    return reply;
}

std::int64_t mntr_value(const std::string& server, const std::string& key) {
    std::istringstream in(four_letter(server, "mntr"));
    for (std::string line; std::getline(in, line);)  // line by line: some values are not numbers (zk_version)
        if (line.rfind(key + "\t", 0) == 0) return std::stoll(line.substr(key.size() + 1));
    throw std::runtime_error("the mntr of " + server + " has no " + key);
}

std::int64_t mntr_sum(const std::string& connect, const std::string& key) {
    std::int64_t total = 0;
    for (const auto& server : servers_of(connect)) total += mntr_value(server, key);
    return total;
}

int watchers_of(const std::string& connect, const std::string& path) {
    std::istringstream in(four_letter(servers_of(connect).front(), "wchp"));
    int n = 0;
    bool in_path = false;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] == '/') in_path = line == path;
        else if (in_path && line.find("0x") != std::string::npos) ++n;
    }
    return n;
}

zkr::client_options client_options(const std::string& connect) {
    zkr::client_options o;
    o.connect = connect;
    o.session_timeout = std::chrono::seconds(10);
    return o;
}

}  // namespace zkr::bench
