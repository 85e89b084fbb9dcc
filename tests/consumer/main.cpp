// A program that uses an installed zkr, as a user's would (built by find_package and pkg-config).
#include <zkr/zkr.hpp>

#include <chrono>
#include <cstring>
#include <iostream>
#include <stdexcept>

int main() {
    // The library it runs with is the one its headers describe.
    if (std::strcmp(zkr::version(), ZKR_VERSION_STRING) != 0) {
        std::cerr << "headers " << ZKR_VERSION_STRING << ", library " << zkr::version() << "\n";
        return 1;
    }
    // No server needed: bad input is refused before anything connects.
    // Designated initializers, built with -Wall -Wextra -Werror: no missing-field warnings.
    zkr::client_options options{.connect = "not a connect string", .session_timeout = std::chrono::seconds(5)};
    try {
        zkr::client c(options);
    } catch (const std::invalid_argument& e) {
        std::cout << "zkr " << zkr::version() << ": refused as expected: " << e.what() << "\n";
        return 0;
    }
    return 1;
}
