// zkr::group_member: a persistent_node (ephemeral, "<group>/<id>") and a tree_cache of depth 1
// on the group, as Curator's GroupMember builds it from PersistentNode and CuratorCache.
#include "zkr/group_member.hpp"

#include "completion.hpp"
#include "nodes/unobserved_waits.hpp"
#include "toolkit/recipe_path.hpp"
#include "zkr/path.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <mutex>
#include <stdexcept>

namespace zkr {

namespace {
std::string member_path(const std::string& group, const std::string& id) {
    validate_path(group);  // std::invalid_argument naming the rule, before join_path
    return join_path(group, detail::checked_node_name(id, "zkr::group_member", "member id"));
}
}  // namespace

group_member::group_member(client& c, std::string group_path, std::string id, std::string payload)
    : path_(group_path),
      id_(id),
      node_(c, member_path(group_path, id), create_mode::ephemeral, std::move(payload)),
      cache_(c, group_path, tree_cache_options{.max_depth = 1}) {}

group_member::~group_member() { close(); }

void group_member::start() {
    node_.start();
    cache_.start();
}

bool group_member::wait_joined(std::chrono::steady_clock::time_point deadline) {
    return detail::observed_blocking_wait(detail::observed_group_wait(*cache_.impl_), deadline, [&] {
        return node_.wait_created_unobserved(deadline) && cache_.wait_initialized_unobserved(deadline);
    });
}

std::map<std::string, std::string> group_member::members() const {
    std::map<std::string, std::string> out;
    for (const auto& name : cache_.children(path_)) {
        if (auto n = cache_.get(join_path(path_, name))) out.emplace(name, std::move(n->data));
    }
    out[id_] = node_.data();
    return out;
}

void group_member::set_payload(std::string payload) { node_.set_data(std::move(payload)); }

subscription group_member::on_change(std::function<void(const cache_event&)> fn) { return cache_.on_change(std::move(fn)); }

void group_member::close() {
    node_.close();
    cache_.close();
}

}  // namespace zkr

namespace zkr::detail {
namespace asio = boost::asio;

namespace {
// The node made, then the group read: two waits of their own machines, one after the other. One
// cancellation signal reaches whichever is waiting; it is emitted, and each wait started, under
// `mutex` (a leaf but for the machines' own locks, taken inside it), as Asio's signals are not
// thread-safe. Each step's handler is zkr's own, posted to the client's executor.
struct joined_wait {
    std::shared_ptr<cache_impl> cache;
    std::mutex mutex;
    asio::cancellation_signal signal;
    std::optional<completion<>> done;
    bool cancelled = false;

    void finish(error_code ec) {
        auto d = [&]() -> std::optional<completion<>> {
            std::lock_guard lock(mutex);
            if (!done) return std::nullopt;
            std::optional<completion<>> taken(std::move(*done));
            done.reset();
            return taken;
        }();
        if (d) (*d)(ec);
    }
};
}  // namespace

void start_wait_joined(const std::shared_ptr<persistent_node_impl>& node, const std::shared_ptr<cache_impl>& cache,
                       joined_handler handler) {
    auto op = std::make_shared<joined_wait>();
    op->cache = cache;
    auto slot = asio::get_associated_cancellation_slot(handler);
    op->done.emplace(observed_completion(observed_group_wait(*cache), completion<>(std::move(handler), cache_executor(*cache))));
    if (slot.is_connected()) {
        slot.assign([weak = std::weak_ptr<joined_wait>(op)](asio::cancellation_type type) {
            if (auto o = weak.lock()) {
                std::lock_guard lock(o->mutex);
                o->cancelled = true;
                o->signal.emit(type);
            }
        });
    }
    std::lock_guard lock(op->mutex);
    start_unobserved_wait_created(node, asio::bind_cancellation_slot(op->signal.slot(), [op](error_code ec) {
        if (ec) return op->finish(ec);
        std::unique_lock lock(op->mutex);
        if (op->cancelled) {
            lock.unlock();
            return op->finish(make_error_code(errc::cancelled));
        }
        start_unobserved_wait_initialized(op->cache,
                                          asio::bind_cancellation_slot(op->signal.slot(), [op](error_code ec) { op->finish(ec); }));
    }));
}

}  // namespace zkr::detail
