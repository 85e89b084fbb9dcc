// Internal: the session engine behind zkr::client.
#pragma once

#include "completion.hpp"
#include "zkr/client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

namespace zkr::detail {

class client_impl;

/// The context of a handle's global watcher: which client, and which of its handles.
struct handle_context {
    client_impl* client;
    std::uint64_t generation;
};

zkr::stat to_stat(const Stat& s) noexcept;

/// A one-shot watch as the C client sees it: its context pointer is this object, kept alive by
/// the client's registry until the watch fires, is removed, or its session ends.
struct watch_state {
    client_impl* client = nullptr;           // valid while the C client can call us
    std::weak_ptr<client_impl> client_owner; // for user calls after the fact (remove)
    boost::asio::any_io_executor fallback_executor;
    std::string path;
    watch_kind kind = watch_kind::data;
    std::uint64_t generation = 0;            // the handle it is set on
    std::atomic<bool> armed{false};          // handed to the user: the C client holds it

    std::mutex mutex;
    bool done = false;
    zkr::error_code error;
    watch_event event;
    std::optional<watch_handler> waiter;
    boost::asio::any_io_executor waiter_work;
    sync_slot<watch_event>* sync_waiter = nullptr;
    // zkr's own waits (lock recipes): called on the thread that ends the watch; must not block.
    std::function<void(zkr::error_code, const watch_event&)> inline_waiter;

    /// First call wins; completes a pending wait.
    void finish(zkr::error_code ec, watch_event ev);
    void cancel_wait();
    /// Registers an inline waiter; if the watch already ended, calls it at once (on this thread).
    void wait_inline(std::function<void(zkr::error_code, const watch_event&)> fn);
};

/// For recipes: the state behind a zkr::watch.
struct watch_access {
    static const std::shared_ptr<watch_state>& state(const zkr::watch& w) { return w.state_; }
};

/// A request to the ZooKeeper server, resent under the retry policy when that is safe.
class request {
public:
    request(client_impl& c, bool retry_allowed) : client(c), retry_allowed(retry_allowed) {}
    virtual ~request() = default;
    /// Issues the C call with `this` as its data; returns the C client's synchronous rc.
    virtual int send(zhandle_t* zh) = 0;
    /// Delivers an error and deletes this.
    virtual void fail(zkr::error_code ec) = 0;
    /// Called before each send, under the handle lock.
    virtual void on_send(std::uint64_t /*generation*/) {}

    client_impl& client;
    const bool retry_allowed;
    int retries = 0;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::unique_ptr<boost::asio::steady_timer> backoff;
};

class client_impl : public std::enable_shared_from_this<client_impl> {
public:
    explicit client_impl(client_options options);
    ~client_impl();

    void start();     // opens the first handle

    /// Per-client state of a recipe family (e.g. the lock engine), made on first use and
    /// destroyed with the client.
    std::shared_ptr<void> extension(const void* key, const std::function<std::shared_ptr<void>()>& make);
    void shutdown();  // close() + stop the internal thread
    void close();

    const client_options& options() const { return options_; }
    boost::asio::any_io_executor executor() const { return executor_; }
    boost::asio::io_context::executor_type internal_executor() { return internal_.get_executor(); }

    connection_state state() const;
    bool is_connected() const { return connected_.load(); }
    /// The session of the current handle, read live from the C client (which learns it before
    /// any reply of that session reaches us); 0 while there is none.
    std::int64_t session_id() const;
    std::chrono::milliseconds session_timeout() const { return std::chrono::milliseconds(negotiated_timeout_.load()); }
    std::uint64_t session_count() const { return session_count_.load(); }
    bool closed() const { return closed_.load(); }
    /// The current session's id and password (for tests that expire it from outside).
    std::pair<std::int64_t, std::string> session_credentials() const;

    void wait_connected(std::chrono::milliseconds timeout);
    subscription on_state_change(std::function<void(connection_state)> listener);
    void wait_connected_async(completion<> done);
    void next_state_async(completion<connection_state> done);

    // Requests.
    void create(std::string path, std::string data, create_mode mode, completion<create_result> done);
    void remove(std::string path, std::int32_t version, completion<> done);
    void exists(std::string path, bool watch, completion<exists_result> done);
    void get_data(std::string path, bool watch, completion<data_result> done);
    void set_data(std::string path, std::string data, std::int32_t version, completion<zkr::stat> done);
    void get_children(std::string path, bool watch, completion<children_result> done);
    void multi(std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done);
    void remove_watch(std::shared_ptr<watch_state> ws, completion<> done);

    /// Sends (or resends) a request on the current handle.
    void submit(request* r);
    /// A request failed with C client code `rc`: retry it, or fail it.
    void on_failure(request* r, int rc);

    std::shared_ptr<watch_state> new_watch(std::string path, watch_kind kind);
    void forget_watch(watch_state* ws);
    /// Armed watches of ours, other than `ws`, on the same path, kind and handle.
    std::vector<std::shared_ptr<watch_state>> watches_sharing(const watch_state& ws);
    /// Ends those with `ev` (their registration went with a removal of all watches on the path).
    void end_watches_on(const watch_state& ws, const watch_event& ev);
    const ACL_vector* acl() const { return &acl_vector_; }

    /// Handle-level events from the C client (posted to the internal thread).
    void on_session_event(std::uint64_t generation, int zstate);

private:
    struct listener_entry {
        std::function<void(connection_state)> fn;
        std::atomic<bool> active{true};
    };

    void open_handle();
    void replace_handle(zkr::error_code reason);
    void declare_lost(const char* why);
    void report(connection_state s);
    void schedule_retry(request* r, zkr::error_code ec);
    void fail_watches(zkr::error_code ec);
    zkr::error_code map_rc(int rc) const;

    client_options options_;
    boost::asio::io_context internal_;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
    boost::asio::any_io_executor executor_;
    boost::asio::strand<boost::asio::any_io_executor> events_;
    std::thread thread_;

    // The handle, replaced after a session is lost. Readers (senders) take it shared.
    mutable std::shared_mutex handle_mutex_;
    zhandle_t* zh_ = nullptr;
    std::uint64_t generation_ = 0;
    std::list<handle_context> contexts_;
    // Requests sent while the handle was being replaced: sent on the new one as soon as it exists.
    std::mutex parked_mutex_;
    std::vector<request*> parked_;

    std::atomic<bool> closed_{false};
    std::atomic<bool> connected_{false};
    std::atomic<std::int64_t> negotiated_timeout_{0};
    std::atomic<std::uint64_t> session_count_{0};

    // Internal thread only.
    bool session_established_ = false;
    bool suspended_ = false;
    boost::asio::steady_timer lost_timer_;
    boost::asio::steady_timer reopen_timer_;
    std::unordered_set<request*> backing_off_;

    mutable std::mutex state_mutex_;
    std::condition_variable state_changed_;
    connection_state state_ = connection_state::suspended;
    std::vector<completion<>> connected_waiters_;
    std::vector<completion<connection_state>> next_state_waiters_;
    std::map<std::uint64_t, std::shared_ptr<listener_entry>> listeners_;
    std::uint64_t next_listener_id_ = 0;

    std::mutex extensions_mutex_;
    std::map<const void*, std::shared_ptr<void>> extensions_;

    std::mutex watches_mutex_;
    std::unordered_map<watch_state*, std::shared_ptr<watch_state>> watches_;

    // ACL storage handed to the C client.
    std::vector<std::string> acl_strings_;
    std::vector<ACL> acl_entries_;
    ACL_vector acl_vector_{};
};

}  // namespace zkr::detail
