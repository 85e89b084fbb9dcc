// Internal: the initiation objects of zkr's async operations.
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <utility>

namespace zkr::detail {

/// An initiation that tells Asio where its operation completes, for completion tokens and
/// adapters that ask (deferred operations, cancellation adapters).
template <class Start>
struct initiation {
    using executor_type = boost::asio::any_io_executor;
    executor_type executor;
    Start start;
    executor_type get_executor() const noexcept { return executor; }
    template <class Handler, class... Args>
    void operator()(Handler&& handler, Args&&... args) const {
        start(std::forward<Handler>(handler), std::forward<Args>(args)...);
    }
};
template <class Start>
initiation(boost::asio::any_io_executor, Start) -> initiation<Start>;

}  // namespace zkr::detail
