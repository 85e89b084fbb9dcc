#include "connect_string.hpp"

#include "zkr/path.hpp"

#include <cctype>

namespace zkr::detail {

std::string_view connect_string_chroot(std::string_view connect) {
    std::size_t slash = connect.find('/');
    if (slash == std::string_view::npos || connect.size() - slash == 1) return {};
    return connect.substr(slash);
}

std::string connect_string_problem(std::string_view connect) {
    if (connect.empty()) return "connect string is empty";
    std::string_view hosts = connect;
    if (std::size_t slash = connect.find('/'); slash != std::string_view::npos) {
        hosts = connect.substr(0, slash);
        std::string chroot_problem = path_problem(connect.substr(slash));
        if (!chroot_problem.empty()) return "chroot " + quoted_path(connect.substr(slash)) + ": " + chroot_problem;
    }
    if (hosts.empty()) return "connect string has no host before the chroot";
    // The C client would take "a:1;b:2" for one host named "a:1;b" and fail to resolve it.
    if (hosts.find(';') != std::string_view::npos) return "hosts are separated by ',', not ';'";
    std::size_t start = 0;
    while (start <= hosts.size()) {
        std::size_t end = hosts.find(',', start);
        if (end == std::string_view::npos) end = hosts.size();
        std::string_view entry = hosts.substr(start, end - start);
        if (entry.empty()) return "connect string has an empty host entry";
        // No host name is longer (DNS), and a message must not quote a huge one.
        if (entry.size() > 260)
            return "host '" + std::string(entry.substr(0, 60)) + "...' is " + std::to_string(entry.size()) +
                   " bytes long, longer than any host name and port";
        std::size_t colon = entry.rfind(':');
        bool bracketed = !entry.empty() && entry.front() == '[';
        if (colon == std::string_view::npos || (bracketed && colon < entry.find(']')))
            return "host '" + std::string(entry) + "' has no ':port'";
        std::string_view host = entry.substr(0, colon), port = entry.substr(colon + 1);
        if (host.empty() || host == "[]") return "entry '" + std::string(entry) + "' has no host name";
        if (port.empty() || port.size() > 5) return "host '" + std::string(entry) + "' has an invalid port";
        unsigned value = 0;
        for (char c : port) {
            if (!std::isdigit(static_cast<unsigned char>(c))) return "host '" + std::string(entry) + "' has a non-numeric port";
            value = value * 10 + static_cast<unsigned>(c - '0');
        }
        if (value == 0 || value > 65535) return "host '" + std::string(entry) + "' has a port outside 1-65535";
        for (char c : host) {
            if (std::isspace(static_cast<unsigned char>(c))) return "host '" + std::string(entry) + "' contains white space";
        }
        start = end + 1;
    }
    return {};
}

}  // namespace zkr::detail

namespace zkr::detail {

std::vector<std::pair<std::string, std::string>> connect_string_hosts(std::string_view connect) {
    std::vector<std::pair<std::string, std::string>> out;
    std::string_view hosts = connect.substr(0, connect.find('/'));
    std::size_t start = 0;
    while (start < hosts.size()) {
        std::size_t end = hosts.find(',', start);
        if (end == std::string_view::npos) end = hosts.size();
        std::string_view entry = hosts.substr(start, end - start);
        std::size_t colon = entry.rfind(':');
        if (colon != std::string_view::npos) {
            std::string_view host = entry.substr(0, colon);
            if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
            out.emplace_back(std::string(host), std::string(entry.substr(colon + 1)));
        }
        start = end + 1;
    }
    return out;
}

}  // namespace zkr::detail
