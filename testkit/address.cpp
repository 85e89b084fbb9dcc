#include "address.hpp"

#include <netdb.h>

#include <cstring>
#include <stdexcept>
#include <vector>

namespace zkr::testkit::detail {

resolved_address resolve(const std::string& address, const std::string& who) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
        throw std::invalid_argument(who + ": \"" + address + "\" is not host:port");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string service = address.substr(colon + 1);
    if (service.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument(who + ": \"" + address + "\" has no numeric port");
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (rc != 0 || found == nullptr)
        throw std::runtime_error(who + ": cannot resolve \"" + address + "\": " + ::gai_strerror(rc));
    resolved_address out;
    std::memcpy(&out.storage, found->ai_addr, found->ai_addrlen);
    out.length = found->ai_addrlen;
    out.family = found->ai_family;
    ::freeaddrinfo(found);
    return out;
}

std::vector<std::string> connect_string_hosts(const std::string& connect) {
    std::string hosts = connect.substr(0, connect.find('/'));
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= hosts.size()) {
        auto comma = hosts.find(',', start);
        auto host = hosts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!host.empty()) out.push_back(host);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

}  // namespace zkr::testkit::detail
