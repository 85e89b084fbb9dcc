/// \file
/// zkr::tree_cache — a local copy of a subtree (configuration, a service registry), kept in step
/// with the server by watches, with an event for every change. Curator's TreeCache / CuratorCache
/// on the C client's one-shot watches. Creates nothing.
#pragma once
#include "zkr/export.hpp"

#include "zkr/client.hpp"
#include "zkr/detail/deadline.hpp"
#include "zkr/detail/initiation.hpp"
#include "zkr/types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zkr {

/// What a cache event reports.
enum class cache_event_type {
    created,      ///< a node appeared in the cache (read for the first time, or made)
    changed,      ///< a cached node's data changed (also: deleted and made again unseen, by its czxid)
    deleted,      ///< a node left the cache (deleted on the server)
    initialized,  ///< the whole subtree is read: after start(), and again after every resync
};
/// The event type's name ("created", "changed", ...).
ZKR_EXPORT const char* to_string(cache_event_type t) noexcept;

/// One change of a tree_cache, in the order the cache saw it on the server.
struct cache_event {
    cache_event_type type = cache_event_type::initialized;  ///< what happened
    std::string path{};    ///< the node (empty for initialized)
    std::string data{};    ///< the node's data after the change; empty for deleted and initialized
    zkr::stat stat{};      ///< its stat after the change (for deleted: the last one seen)
};

/// A cached node.
struct cached_node {
    std::string data{};  ///< its data
    zkr::stat stat{};    ///< its stat when the data was read (children counts follow listings)
};

/// How a tree_cache reads its subtree.
struct tree_cache_options {
    /// How deep below the path to cache: 0 the path's node alone, 1 with its children, -1 every
    /// depth (the default).
    int max_depth = -1;
    /// The most reads the cache has in flight at once (the first read and every resync walk the
    /// tree with at most this many outstanding, not 2N at once). At least 1.
    std::size_t max_reads_in_flight = 64;
    /// Where listeners and handlers run. Default: the client's executor.
    std::optional<boost::asio::any_io_executor> executor{};
};

/// \deprecated Use tree_cache_options (every recipe names its options type after itself, as tree_cache_options): kept for 0.2 only.
using cache_options [[deprecated("use zkr::tree_cache_options")]] = tree_cache_options;

namespace detail {
class cache_impl;
using cache_init_handler = boost::asio::any_completion_handler<void(error_code)>;
ZKR_EXPORT void start_wait_initialized(const std::shared_ptr<cache_impl>& c, cache_init_handler handler);
ZKR_EXPORT boost::asio::any_io_executor cache_executor(const cache_impl& c);
}  // namespace detail

/// Caches the subtree at `path` (down to tree_cache_options::max_depth): every node's data and stat.
///
/// It reads each node with a watch and reads it again when the watch fires; a change is detected
/// by the node's mzxid and czxid, never its version, so a node deleted and made again with new
/// data is always reported. After a new session (expiry) it resynchronises: it walks the tree
/// again with a bounded number of reads in flight, reports what changed meanwhile (deleted nodes
/// included), ends equal to the server's tree, and sends `initialized` again. A reconnection on
/// the same session needs no walk: the server replays the watches' missed events. A path that
/// does not exist is not an error: the cache waits for it and never creates it.
///
/// Listeners run on the cache's executor (tree_cache_options::executor, by default the client's), one
/// at a time, in the order the cache saw the changes; a slow listener delays only the next
/// listener calls on that executor: the cache keeps reading, and no session or recipe machinery
/// runs there. Thread-safe.
class ZKR_EXPORT tree_cache {
public:
    /// The type of get_executor().
    using executor_type = boost::asio::any_io_executor;

    /// Checks the path and options (std::invalid_argument naming the bad one); reads nothing
    /// until start(). zkr::system_error(errc::client_closed) for a closed client.
    tree_cache(client& c, std::string path, tree_cache_options options = {});
    /// close().
    ~tree_cache();
    tree_cache(const tree_cache&) = delete;
    tree_cache& operator=(const tree_cache&) = delete;

    /// Calls `fn(event)` for every change from now on, on the cache's executor. Subscribe before
    /// start() to see every node's `created` and the first `initialized`.
    [[nodiscard]] subscription on_change(std::function<void(const cache_event&)> fn);
    /// \deprecated Use on_change(fn): kept for 0.2 only.
    [[deprecated("use zkr::tree_cache::on_change(fn)")]] [[nodiscard]] subscription on_event(std::function<void(const cache_event&)> fn) {
        return on_change(std::move(fn));
    }
    /// Starts reading (once the client is connected). std::logic_error when called a second
    /// time, or after close().
    void start();
    /// Stops: every watch the cache left is removed from the server, pending waits complete with
    /// errc::cancelled, listeners are not called again. The cached data stays readable.
    /// Idempotent.
    void close();

    /// True while the cache holds the whole subtree as read on the current session: from the end
    /// of the first walk until the session is lost, then again from the end of the resync. Never
    /// while a node cannot be read on this session (errc::no_auth; errc::too_many_watches: a
    /// subtree with more watched paths than one client can set again after a reconnection, about
    /// 1 MB of paths with the default client_options::max_request_size): the log says which.
    bool initialized() const;
    /// Blocks until initialized() (true) or `deadline` passes (false); false at once when closed.
    /// time_point::max() waits for ever.
    bool wait_initialized(std::chrono::steady_clock::time_point deadline);
    /// wait_initialized(deadline) for a time point of any other clock (or precision), converted once.
    template <class Clock, class Duration>
    bool wait_initialized(const std::chrono::time_point<Clock, Duration>& deadline) {
        return wait_initialized(detail::to_steady(deadline));
    }
    /// wait_initialized(deadline) with the deadline `timeout` from now (any std::chrono::duration;
    /// duration::max() waits for ever).
    template <class Rep, class Period>
    bool wait_initialized(const std::chrono::duration<Rep, Period>& timeout) {
        return wait_initialized(detail::deadline_after(timeout));
    }
    /// Completes when initialized() (at once if it is). Handler: void(zkr::error_code);
    /// errc::cancelled when the cache closes first or by per-operation cancellation (any type).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_wait_initialized(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            detail::initiation{get_executor(),
                               [impl = impl_](auto handler) { detail::start_wait_initialized(impl, std::move(handler)); }},
            token);
    }

    /// The node at `path` as cached, or std::nullopt (not in the subtree, not read yet, deleted).
    std::optional<cached_node> get(const std::string& path) const;
    /// The names of `path`'s cached children, sorted; empty when it has none or is not cached.
    std::vector<std::string> children(const std::string& path) const;
    /// How many nodes are cached (the path's own node included).
    std::size_t size() const;

    /// The cached subtree's path.
    const std::string& path() const noexcept;
    /// Where listeners and handlers run.
    executor_type get_executor() const { return detail::cache_executor(*impl_); }

private:
    // Its waits wait on this cache's machine as part of its own, which the observer hears instead.
    friend class group_member;
    bool wait_initialized_unobserved(std::chrono::steady_clock::time_point deadline);
    std::shared_ptr<detail::cache_impl> impl_;
};

}  // namespace zkr
