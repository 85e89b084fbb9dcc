#include "zkr/testkit/chroot.hpp"

#include "zkr/client.hpp"

#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>

namespace zkr::testkit {

std::string unique_chroot(const std::string& connect, const std::string& name) {
    if (connect.find('/') != std::string::npos)
        throw std::invalid_argument("zkr::testkit::unique_chroot: \"" + connect + "\" has a chroot already");
    if (name.empty() || name.find('/') != std::string::npos)
        throw std::invalid_argument("zkr::testkit::unique_chroot: the name \"" + name + "\" must be non-empty, without '/'");
    static std::mutex mutex;
    static std::mt19937_64 random{std::random_device{}()};
    std::ostringstream path;
    {
        std::lock_guard lock(mutex);
        path << "/zkr-testkit/" << name << "-" << std::hex << random();
    }
    zkr::client_options o;
    o.connect = connect;
    zkr::client c(o);
    c.create_parents(path.str(), zkr::create_mode::persistent);
    return connect + path.str();
}

}  // namespace zkr::testkit
