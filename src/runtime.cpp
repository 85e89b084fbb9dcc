#include "runtime.hpp"

#include "zkr/log.hpp"

#include <pthread.h>

namespace zkr::detail {

runtime::runtime(bool own_handler_thread) {
    if (own_handler_thread) handlers = std::make_unique<boost::asio::io_context>(1);
    session_work_.emplace(session.get_executor());
    c_calls_work_.emplace(c_calls.get_executor());
    if (handlers) handlers_work_.emplace(handlers->get_executor());
}

runtime::~runtime() {
    // stop() ran (the client always calls it); these are joined or detached by now.
}

void runtime::spawn(boost::asio::io_context& ctx, std::thread& thread, const char* name) {
    thread = std::thread([self = shared_from_this(), &ctx, name] {
        pthread_setname_np(pthread_self(), name);
        for (;;) {
            try {
                ctx.run();
                return;
            } catch (const std::exception& e) {
                // Only user handlers can throw here (zkr's own never do): report and go on, as
                // one bad handler must not stop every other completion of the client.
                log::write(log::level::error, std::string("zkr: a completion handler threw: ") + e.what());
            } catch (...) {
                log::write(log::level::error, "zkr: a completion handler threw a non-std exception");
            }
        }
    });
    if (&ctx == &session) session_id_ = thread.get_id();
}

void runtime::start() {
    spawn(session, session_thread_, "zkr-session");
    spawn(c_calls, c_calls_thread_, "zkr-c-calls");
    if (handlers) spawn(*handlers, handlers_thread_, "zkr-handlers");
}

void runtime::stop() {
    if (stopped_) return;
    stopped_ = true;
    session_work_.reset();
    c_calls_work_.reset();
    handlers_work_.reset();
    bool detached = false;
    for (std::thread* t : {&session_thread_, &c_calls_thread_, &handlers_thread_}) {
        if (!t->joinable()) continue;
        if (t->get_id() == std::this_thread::get_id()) {
            t->detach();  // it finishes by itself
            detached = true;
        } else {
            t->join();
        }
    }
    if (detached) return;
    // One context's thread may have run out of work and ended before the other posted to it: a
    // handle opened as the client closed (zookeeper_init on c_calls, its hand-over to the session
    // thread) or closed through c_calls (zookeeper_close) after c_calls' thread had ended. Lost,
    // the handle would never be closed and its C client threads would call a freed context
    // (ThreadSanitizer saw it once). So what is left runs here, until neither has work.
    for (;;) {
        std::size_t ran = 0;
        session.restart();
        ran += session.run();
        c_calls.restart();
        ran += c_calls.run();
        if (ran == 0) break;
    }
}

}  // namespace zkr::detail
