// Internal: "host:port" resolved once, for the proxy's upstream and four-letter words.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

namespace zkr::testkit::detail {

struct resolved_address {
    sockaddr_storage storage{};
    socklen_t length = 0;
    int family = 0;
};

/// `address` ("host:port", "[v6]:port") resolved. Throws std::invalid_argument naming `who` for a
/// malformed one, std::runtime_error when the host does not resolve.
resolved_address resolve(const std::string& address, const std::string& who);

/// The hosts of a connect string ("h1:p1,h2:p2/chroot" -> {"h1:p1", "h2:p2"}).
std::vector<std::string> connect_string_hosts(const std::string& connect);

}  // namespace zkr::testkit::detail
