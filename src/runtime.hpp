// Internal: the threads of one zkr::client and the io_contexts they run. Which thread runs
// what is the table at the top of client_impl.hpp.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace zkr::detail {

class runtime : public std::enable_shared_from_this<runtime> {
public:
    using work_guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;

    /// `own_handler_thread`: run a thread for user handlers (no executor was given).
    explicit runtime(bool own_handler_thread);
    ~runtime();
    runtime(const runtime&) = delete;
    runtime& operator=(const runtime&) = delete;

    /// Starts the threads. Each keeps this object alive until it ends, so a thread that ends
    /// up releasing the client (a user handler destroying it) never destroys the io_context
    /// it is running.
    void start();
    /// Lets every context run out of work, then joins each thread — or detaches it when called
    /// on it. Idempotent.
    void stop();

    boost::asio::io_context session;  ///< session machinery; never user code
    boost::asio::io_context c_calls;  ///< the C client's blocking calls (zookeeper_init, zookeeper_close)
    std::unique_ptr<boost::asio::io_context> handlers;  ///< user handlers when no executor was given

    bool on_session_thread() const noexcept { return std::this_thread::get_id() == session_id_.load(); }

private:
    void spawn(boost::asio::io_context& ctx, std::thread& thread, const char* name);

    std::optional<work_guard> session_work_, c_calls_work_, handlers_work_;
    std::thread session_thread_, c_calls_thread_, handlers_thread_;
    std::atomic<std::thread::id> session_id_{};
    bool stopped_ = false;
};

}  // namespace zkr::detail
