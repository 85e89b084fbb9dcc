#include <zkr/zkr.hpp>

#include <iostream>
#include <stdexcept>

int main() {
    // No server needed: bad input is refused before anything connects.
    zkr::client_options options;
    options.connect = "not a connect string";
    try {
        zkr::client c(options);
    } catch (const std::invalid_argument& e) {
        std::cout << "refused as expected: " << e.what() << "\n";
        return 0;
    }
    return 1;
}
