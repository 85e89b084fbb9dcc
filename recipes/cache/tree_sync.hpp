// The tree cache's sans-io machine: what the cache knows of the subtree, which reads it needs
// next, and the events a reply or a watch produces. No I/O and no threads: the driver
// (tree_cache.cpp) sends the reads, each with a watch, and feeds back replies, watch events and
// session events; the unit tests feed it a model server with faults instead.
//
// The rules (TreeCache's algorithm on one-shot watches, with its bugs fixed):
// - every cached node is read with a data watch and, above max_depth, listed with a child watch;
//   the path's own node, while missing, is watched with exists (never created);
// - a listing adds the children it has not seen and drops those it no longer shows (with their
//   subtrees), so a deletion is never missed even if its own watch event was;
// - data is taken when its mzxid is newer than what is cached: a node deleted and made again has
//   a newer mzxid too (it is its new czxid), whatever its version;
// - replies and watch events name the node entry (and session epoch) they were for: one for an
//   entry since dropped, or an earlier session, changes nothing (Curator's DEAD guard);
// - a watch event asks for a read only if none of that kind is queued or in flight for the node;
// - a new session walks the tree again from the path down (the earlier session's watches are
//   gone); a reconnection on the same session only resends reads that failed (the server replays
//   the watches' missed events); `initialized` after every walk, when nothing of it is left
//   (never while a read failed for good: no_auth, too_many_watches);
// - at most `window` reads in flight, the rest queued in order.
#pragma once

#include "zkr/error.hpp"
#include "zkr/tree_cache.hpp"
#include "zkr/types.hpp"
#include "zkr/watch.hpp"

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace zkr::detail {

/// One read the cache asks for, always with a watch.
struct cache_read {
    enum class kind : std::uint8_t {
        data,      ///< get_data with a data watch
        children,  ///< get_children with a child watch
        exists,    ///< exists with a watch: the path's own node, while it is missing
    };
    kind what = kind::data;
    std::string path;
    std::uint64_t node = 0;   ///< the entry it is for (0: the missing path's node)
    std::uint64_t epoch = 0;  ///< the session walk it belongs to
};

class tree_sync {
public:
    /// `root`: the cached path; `max_depth` as tree_cache_options; `window`: reads in flight at most.
    tree_sync(std::string root, int max_depth, std::size_t window);

    // --- inputs ---
    /// A session to read on: the first, or a new one after a loss. Walks the tree again.
    void new_session();
    /// The session is lost: not initialized until the next walk ends.
    void session_lost();
    /// The connection is back on the same session: reads that failed are queued again.
    void retry_failed();
    void data_read(const cache_read& r, error_code ec, std::string data, const zkr::stat& stat);
    void children_read(const cache_read& r, error_code ec, std::vector<std::string> names, const zkr::stat& stat);
    void exists_read(const cache_read& r, error_code ec, bool exists);
    /// The watch the read `origin` left fired with `type`.
    void watch_fired(const cache_read& origin, event_type type);

    // --- outputs ---
    /// The reads to send now: as many queued ones as the window allows (each counted in flight
    /// until its reply is fed back).
    std::vector<cache_read> next_reads();
    /// The events produced since the last call, in order.
    std::vector<cache_event> take_events();
    /// Reads that failed for connection trouble wait for retry_failed().
    bool has_failed_reads() const noexcept { return !failed_.empty(); }
    /// Reads of this session that failed for good (no_auth, too_many_watches): the walk cannot
    /// end, so `initialized` does not come until a new session walks again.
    std::size_t unreadable() const noexcept { return unreadable_; }
    /// The first of them, "path: error".
    const std::string& first_unreadable() const noexcept { return first_unreadable_; }

    // --- what is cached ---
    bool initialized() const noexcept { return initialized_; }
    bool walking() const noexcept { return epoch_ > 0; }
    std::optional<cached_node> get(const std::string& path) const;
    std::vector<std::string> children(const std::string& path) const;
    std::size_t size() const noexcept { return loaded_; }
    std::size_t in_flight() const noexcept { return in_flight_; }
    std::size_t queued() const noexcept { return queue_.size(); }
    /// Every cached path (tests).
    std::vector<std::string> paths() const;

private:
    struct entry {
        std::uint64_t id = 0;
        std::uint64_t walked = 0;  // the epoch it was last asked to read in
        int depth = 0;
        bool loaded = false;
        bool data_pending = false, children_pending = false;
        std::string data;
        zkr::stat stat;
        std::vector<std::string> children;  // names, sorted: what the last listing showed
    };

    entry* live(const cache_read& r);
    void answered(const cache_read& r);
    void refresh(const std::string& path, entry& e);
    void queue_data(const std::string& path, entry& e);
    void queue_children(const std::string& path, entry& e);
    void queue_exists();
    bool lists(const entry& e) const noexcept { return max_depth_ < 0 || e.depth < max_depth_; }
    void add_root();
    void remove_subtree(const std::string& path);
    bool failed(const cache_read& r, error_code ec);  // true: kept to send again
    void check_initialized();
    std::string child_path(const std::string& parent, const std::string& name) const;

    const std::string root_;
    const int max_depth_;
    const std::size_t window_;

    std::unordered_map<std::string, entry> nodes_;
    std::size_t loaded_ = 0;
    std::uint64_t next_id_ = 0;
    std::uint64_t epoch_ = 0;
    bool exists_pending_ = false;
    bool initialized_ = false;
    std::size_t unreadable_ = 0;
    std::string first_unreadable_;

    std::deque<cache_read> queue_;
    std::vector<cache_read> failed_;
    std::size_t in_flight_ = 0;          // sent and not answered, any epoch (the window)
    std::size_t in_flight_current_ = 0;  // of them, this epoch's
    std::vector<cache_event> events_;
};

}  // namespace zkr::detail
