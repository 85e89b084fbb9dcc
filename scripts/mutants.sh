#!/usr/bin/env bash
# Proves the tests bite: hand-written mutations of the lock engine, the recipe toolkit and the
# session layer, each applied to a scratch copy of the committed tree, built, and run against the
# tests that should catch it. A mutant is killed when those tests fail (or time out). Prints one
# line per mutant and exits 1 if any survived.
#   scripts/mutants.sh            every mutant
#   scripts/mutants.sh NAME...    only these
# Needs what scripts/test.sh needs (scripts/setup.sh installs it). Takes about 20 minutes on 2 cores;
# not in CI (it would not fit the 40 minutes), run it when the engine or the session layer changes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=${ZKR_MUTANTS_DIR:-/tmp/zkr-mutants}

# name ~ file ~ exact text (must occur once; \n for a new line) ~ replacement ~ the tests that
# must catch it: unit:<catch filter> or integration:<catch filter>
mutants=$(cat <<'EOF'
watch-lowest~recipes/toolkit/sequence_queue.cpp~        if (it->name != ignore && counts(*it)) return {false, it->name};~        if (it->name != ignore && counts(*it)) return {false, queue.front().name};~unit:[queue_fsm]
no-session-check~recipes/toolkit/protected_create.cpp~    if (!r.exists || session == 0 || r.stat.ephemeral_owner != session) return false;~    if (!r.exists) return false;~unit:*
uncertain-as-held~recipes/toolkit/hold.cpp~        case session_health::suspect: return lock_state::uncertain;~        case session_health::suspect: return lock_state::held;~integration:the lease: a holder cut off*
no-on-lost~recipes/toolkit/hold.cpp~                l->fn(node);~                (void)node;~integration:a mutex hold whose node someone else deletes*
no-delete-retry~recipes/toolkit/cleanup.cpp~        ++self->delete_retries_;~        return finish(ec);~integration:release during an outage longer than the retry policy*
departure-as-mark~recipes/toolkit/queue_fsm.cpp~    bool known_first = watched_holds_ && !watched_reads_;~    bool known_first = !watched_reads_;~unit:[queue_fsm]
token-unordered~recipes/lock/lock_ops.cpp~    return h->czxid;\n}\n\nnamespace {~    return 1;\n}\n\nnamespace {~integration:holder session expired: it is told*
lost-reply-as-success~src/requests.cpp~        if (rc != ZOK) return r->client.on_failure(r, rc);\n        r->succeed();\n    }\n    std::string path_;\n    std::int32_t version_;~        if (rc != ZOK && rc != ZCONNECTIONLOSS) return r->client.on_failure(r, rc);\n        r->succeed();\n    }\n    std::string path_;\n    std::int32_t version_;~integration:release during connection loss*
deadline-ignored~recipes/toolkit/fsm_runner.hpp~                timer->expires_at(deadline);~                timer->expires_at(deadline + std::chrono::seconds(3));~integration:try_lock_until: false by its deadline*
answer-before-delete~recipes/toolkit/queue_fsm.cpp~    if (phase_ == phase::waiting) {\n        delete_ours(deletes);~    if (phase_ == phase::waiting) {~unit:*
no-own-node-watch~recipes/toolkit/queue_fsm.cpp~    return ask(step::watch{create_.full(watched_), want_mark_, create_.node_path()});~    return ask(step::watch{create_.full(watched_), want_mark_, std::string()});~integration:a waiter whose node someone deletes*
no-hold-node-watch~recipes/toolkit/hold.cpp~    watch_node(h);~    (void)h;~integration:a mutex hold whose node someone else deletes*
listing-unshared~recipes/toolkit/listing_coalescer.cpp~        if (!first) {~        if (false) {~integration:[listing_share]
listing-stale~recipes/toolkit/listing_coalescer.cpp~                    next = std::move(it->second.next);\n                }\n                self->send(std::move(path), std::move(next));~                    next = std::move(it->second.next);\n                    self->in_flight_.erase(it);\n                }\n                for (auto& a : next) a(ec, answer);~integration:[listing_share]
no-watch-limit~src/watch_registry.cpp~        if (it == distinct_.end() && set_watches_fixed + watched_bytes_ + bytes > max_request) return nullptr;~        (void)it;~integration:[watch_limit]
known-node-kept-at-abandon~recipes/toolkit/queue_fsm.cpp~    if (phase_ == phase::listing || phase_ == phase::setting_watch || phase_ == phase::removing_watch ||\n        (phase_ == phase::creating && create_known_)) {~    if (phase_ == phase::listing || phase_ == phase::setting_watch || phase_ == phase::removing_watch) {~unit:*
known-leases-kept-at-abandon~recipes/semaphore/lease_fsm.cpp~    if (phase_ == phase::counting || phase_ == phase::removing_watch || (phase_ == phase::creating && nodes_known_))\n        delete_ours(deletes);~    if (phase_ == phase::counting || phase_ == phase::removing_watch) delete_ours(deletes);~unit:*
spent-lease-watch-waited-on~recipes/semaphore/lease_fsm.cpp~        if (phase_ == phase::counting && (r.child_watch || r.error)) watch_armed_ = false;~        (void)r;~unit:[lease_fsm]
listing-error-to-one~recipes/toolkit/listing_coalescer.cpp~                for (auto& a : batch) a(ec, answer);~                if (!ec) for (auto& a : batch) a(ec, answer); else batch.front()(ec, answer);~integration:a listing shared by waiters*
untaken-outcome-kept~recipes/toolkit/fsm_runner.hpp~        return hooks_.answer(reason, outcome, machine_);~        hooks_.answer(reason, outcome, machine_);\n        return true;~integration:[fsm_runner]
guard-checks-one-part~src/requests.cpp~zoo_check_op_init(&zoo_ops_[w + 1 + k], o.also[k].c_str(), any_version);~zoo_check_op_init(&zoo_ops_[w + 1 + k], o.path.c_str(), any_version);~integration:multi-lock: the async form*
suspended-read-as-connected~src/client_impl.cpp~    if (live != ZOO_CONNECTED_STATE || c_client_down_.load() == ((generation_ << 1) | 1)) return session_health::suspect;~    if (live != ZOO_CONNECTED_STATE) return session_health::suspect;~integration:[issue33]
health-from-report~src/client_impl.cpp~    if (live != ZOO_CONNECTED_STATE || c_client_down_.load() == ((generation_ << 1) | 1)) return session_health::suspect;~    if (live != ZOO_CONNECTED_STATE || !connected_.load()) return session_health::suspect;~integration:[issue33]
late-event-of-old-handle~src/session_lifecycle.cpp~    while ((seen >> 1) <= generation && !c_client_down_.compare_exchange_weak(seen, mine)) {~    while (!c_client_down_.compare_exchange_weak(seen, mine)) {~integration:[issue33]
latch-leads-while-uncertain~recipes/leader/leader_latch.cpp~            now = read == lock_state::held;~            now = read != lock_state::lost;~integration:[issue33]
latch-await-from-flag~recipes/leader/leader_latch.cpp~        return !closed_ && leading_ && leading_now_locked();~        return leading_;~integration:[issue33]
uncertain-not-rechecked~recipes/toolkit/hold_monitor.cpp~    if (acted_on == lock_state::uncertain || now == lock_state::uncertain) {~    if (false) {~integration:suspect window: a leadership whose lease*
lease-end-not-watched~recipes/toolkit/hold_monitor.cpp~    } else if (now == lock_state::held) {~    } else if (false) {~integration:suspect window: a selector's term is stopped*
cache-compares-version~recipes/cache/tree_sync.cpp~        } else if (stat.mzxid > e->stat.mzxid) {~        } else if (stat.version > e->stat.version) {~unit:[tree_sync]
cache-listing-keeps-gone~recipes/cache/tree_sync.cpp~        for (const auto& name : gone) remove_subtree(child_path(parent, name));~        (void)gone;~unit:[tree_sync]
cache-initialized-early~recipes/cache/tree_sync.cpp~ || !failed_.empty() || unreadable_ > 0) return;~) return;~unit:[tree_sync]
cache-no-resync~recipes/cache/tree_cache.cpp~                        sync_.new_session();~                        (void)0;~integration:tree cache: after a session loss*
cache-close-keeps-watches~recipes/cache/tree_cache.cpp~            for (auto& [raw, ws] : armed_) armed.push_back(ws);~            (void)armed;~integration:tree cache: close removes*
node-adopts-foreign~recipes/nodes/persistent_node_fsm.cpp~    if (owner == 0 || owner == session) {~    if (true) {~integration:persistent node: another session's node*
node-sequence-not-kept~recipes/nodes/persistent_node_fsm.cpp~create_mode persistent_node_fsm::creation_mode() const { return actual_.empty() ? mode_ : without_sequence(mode_); }~create_mode persistent_node_fsm::creation_mode() const { return mode_; }~integration:persistent node: a sequential node keeps*
node-not-made-on-new-session~recipes/nodes/persistent_node.cpp~                case connection_state::connected: self->feed([&](std::int64_t s) { return self->fsm_.ensure(s); }); break;~                case connection_state::connected: break;~integration:persistent node: back after its session expires*
node-fsm-adopts-foreign~recipes/nodes/persistent_node_fsm.cpp~    if (owner == 0 || owner == session) {~    if (true) {~unit:persistent node machine: a fault at any request*
node-fsm-sequential-resent-blindly~recipes/nodes/persistent_node_fsm.cpp~        in_doubt_ = true;~~unit:persistent node machine: a fault at any request*
node-fsm-stale-data-kept~recipes/nodes/persistent_node_fsm.cpp~    if (sent_gen_ != data_gen_) {~    if (false) {~unit:persistent node machine: a fault at any request*
node-fsm-writes-unowned~recipes/nodes/persistent_node_fsm.cpp~    return owned_ ? actual_ : std::string();~    return actual_;~unit:persistent node machine: a fault at any request*
node-fsm-close-deletes-unowned~recipes/nodes/persistent_node_fsm.cpp~    if (owned_) {\n        out.node = actual_;~    if (!actual_.empty()) {\n        out.node = actual_;~unit:persistent node machine: a fault at any request*
node-fsm-close-removes-others~recipes/nodes/persistent_node_fsm.cpp~        if (!ec && exists && (owner == 0 || owner == session)) return node_step::remove{sent_path_, owner};~        if (!ec && exists) return node_step::remove{sent_path_, session};~unit:persistent node machine: a fault at any request*
node-fsm-open-create-unsettled~recipes/nodes/persistent_node_fsm.cpp~    if (ec == errc::client_closed || ec == errc::no_node) return node_step::idle{};  // nothing made, or nothing more to do~    return node_step::idle{};~unit:persistent node machine: a fault at any request*
node-fsm-session-of-send~recipes/nodes/persistent_node_fsm.cpp~    const std::int64_t of = is_ephemeral(sent_mode_) ? (owner ? owner : session) : 0;~    const std::int64_t of = is_ephemeral(sent_mode_) ? sent_session_ : 0;~unit:persistent node machine: a fault at any request*
node-fsm-write-unbound~recipes/nodes/persistent_node_fsm.hpp~    std::int64_t node_session() const noexcept { return node_session_; }~    std::int64_t node_session() const noexcept { return 0; }~unit:persistent node machine: a fault at any request*
delete-resent-on-new-session~src/client_impl.cpp~    r->only_on_session = session;\n    submit(r);\n}\n\nvoid client_impl::set_data_on_session~    (void)session;\n    submit(r);\n}\n\nvoid client_impl::set_data_on_session~integration:guaranteed delete: a delete sent while its session expires unnoticed*
write-resent-on-new-session~src/client_impl.cpp~    r->only_on_session = session;\n    submit(r);\n}\n\nvoid client_impl::get_children~    (void)session;\n    submit(r);\n}\n\nvoid client_impl::get_children~integration:persistent node: a write sent while its session expires unnoticed*
node-fsm-idle-close-unsettled~recipes/nodes/persistent_node_fsm.cpp~    if (busy_ || !created_any_) return out;~    return out;~unit:persistent node machine: a fault at any request*
node-fsm-lost-session-still-owned~recipes/nodes/persistent_node_fsm.cpp~    if (is_ephemeral(mode_)) owned_ = false;~    (void)0;~unit:persistent node machine: a fault at any request*
node-fsm-landed-after-close-kept~recipes/nodes/persistent_node_fsm.cpp~            return node_step::remove{made_path, of};  // landed after close()~            return node_step::idle{};~unit:persistent node machine: a fault at any request*
node-fsm-taken-after-close-kept~recipes/nodes/persistent_node_fsm.cpp~            return node_step::remove{sent_path_, take_session_};  // ours since the write: deleted with the rest~            return node_step::idle{};~unit:persistent node machine: a fault at any request*
node-fsm-rewatches-own-not-watched~recipes/nodes/persistent_node_fsm.cpp~    return watch_node(watched_path_);~    if (actual_.empty()) { busy_ = false; return node_step::idle{}; } return watch_node(actual_);~unit:persistent node machine: a fault at any request*
node-fsm-gone-not-remade~recipes/nodes/persistent_node_fsm.cpp~    if (!exists) return step_done(session, false, true);  // gone already: make it again~    if (!exists) return step_done(session, false);~unit:persistent node machine: a fault at any request*
cache-reads-recurse~recipes/cache/tree_cache.cpp~    void send_all(std::vector<cache_read> reads) {\n        {~    void send_all(std::vector<cache_read> reads) {\n        if ((true)) { for (auto& r : reads) send(r); return; }\n        {~integration:tree cache: a subtree too large*
multi-transport-answered~src/requests.cpp~        if (is_transport_failure(rc)) answered = false;~        (void)0;~integration:a multi whose reply is lost*
counter-blind-after-lost-reply~recipes/atomic/atomic_fsm.cpp~    if (failed == 0 && r.error == errc::bad_version) {~    if (false) {~integration:atomic long: an increment whose reply is lost*
counter-doubt-always-settled~recipes/atomic/atomic_fsm.cpp~        if (memory_.cache->mzxid == *doubt_mzxid_) {~        if (true) {~integration:atomic long: a session lost*
counter-doubt-never-settled~recipes/atomic/atomic_fsm.cpp~        if (memory_.cache->mzxid == *doubt_mzxid_) {~        if (false) {~integration:atomic long: a session lost*
counter-objects-race~recipes/atomic/atomic_engine.cpp~    queue_ = per_client<counter_queues>(*p)->of(path_);~    queue_ = std::make_shared<counter_queue>();~integration:atomic long: objects of one client*
counter-fsm-blind-resend~recipes/atomic/atomic_fsm.cpp~    if (failed == 0 && r.error == errc::bad_version) {~    if (false) {~unit:atomic machine: a fault at any request of an add*
counter-record-orphaned~recipes/atomic/atomic_fsm.cpp~outlive the call.\n        if (r.error) return fail(r.error, "creating " + quoted_path(record_path_), {record_path_});~outlive the call.\n        if (r.error) return fail(r.error, "creating " + quoted_path(record_path_));~unit:atomic machine: a fault at any request of an add*
ids-reserved-twice~recipes/atomic/atomic.cpp~            if (reserving_) return;~~integration:id generator: async_next*
dbarrier-through-without-node~recipes/barrier/double_barrier_fsm.cpp~    if (!ours) {~    if (false) {~unit:double barrier machine: a fault at any request of an enter*
dbarrier-failure-keeps-node~recipes/barrier/double_barrier_fsm.cpp~answer_after_own_delete(barrier_step::done{false, ec,~request(barrier_step::done{false, ec,~unit:double barrier machine: a fault at any request of an enter*
dbarrier-give-up-keeps-node~recipes/barrier/double_barrier_fsm.cpp~answer_after_own_delete(barrier_step::done{false, reason ==~request(barrier_step::done{false, reason ==~unit:double barrier machine: three of four never pass*
dbarrier-ready-kept~recipes/barrier/double_barrier_fsm.cpp~        return finish(true, ready_);  // everyone has left~        return finish(true);  // everyone has left~unit:double barrier machine: a fault at any request of a leave*
dbarrier-orphan-kept~recipes/barrier/double_barrier.cpp~        if (orphan_in) member_->delete_node();~        (void)orphan_in;~integration:double barrier: an async enter times out or is cancelled*
dbarrier-give-up-during-create~recipes/barrier/double_barrier_fsm.cpp~phase_ != phase::idle && phase_ != phase::creating_own &&~phase_ != phase::idle &&~unit:double barrier machine: a fault at any request of an enter*
dbarrier-last-leaver-cut-off~recipes/barrier/double_barrier_fsm.cpp~    if (leaving_) return phase_ == phase::watching || phase_ == phase::waiting;~    if (leaving_) return true;~unit:double barrier machine: the last one out*
dbarrier-give-up-before-start~recipes/barrier/double_barrier_fsm.cpp~    return phase_ != phase::idle && phase_ != phase::creating_own~    return phase_ != phase::creating_own~unit:double barrier machine: the last one out*
counter-doubt-read-failure-told-plainly~recipes/atomic/atomic_fsm.cpp~            if (r.error && r.error != errc::bad_arguments)~            if (false)~unit:atomic machine: a change whose session was lost*
counter-queue-recursion~recipes/atomic/atomic_engine.cpp~        if (draining == this) {~        if (false) {~integration:atomic long: many async changes queued*
latch-count-down-unkeyed~recipes/barrier/count_down_fsm.cpp~    if (r.error == errc::node_exists && failed == 0) return finish();  // our first try was applied; its reply was lost~    if (r.error == errc::node_exists && failed == 0) { key_ += "-again"; return read_again(); }~integration:count-down latch: a count-down whose reply is lost*
latch-release-apart~recipes/barrier/count_down_fsm.cpp~    if (left == 1) ops.push_back(op::create{released_, "", create_mode::persistent});~    (void)0;~integration:count-down latch: set once*
barrier-timeout-keeps-watch~recipes/toolkit/blocking.cpp~    drop_watch(port, w);\n    return watch_end::timed_out;~    return watch_end::timed_out;~integration:barrier: a wait that times out*
async-cancel-keeps-watch~recipes/toolkit/node_wait.cpp~        drop(ws);\n        finish(make_error_code(errc::cancelled));~        finish(make_error_code(errc::cancelled));~integration:barrier and latch: async*
observe-lost-release~recipes/toolkit/hold.cpp~        observe = h->observer && !h->lost && !h->node_gone;~        observe = h->observer != nullptr;~integration:observer: an expired session counts once*
observe-try-as-acquired~recipes/lock/lock_engine.cpp~            tell(m.options().path, d->error ? outcome_of(d->error) : acquire_outcome::timed_out);~            tell(m.options().path, d->error ? outcome_of(d->error) : acquire_outcome::acquired);~integration:observer: a try_lock_for that times out*
observe-no-retry~src/client_impl.cpp~    if (r->observe_id != 0)\n        observer_events_->retry(~    if (false)\n        observer_events_->retry(~integration:observer: a request whose reply is lost*
observe-hook-throw-escapes~src/observer_channel.cpp~    } catch (...) {\n        if (!std::exchange(throw_reported_, true))~    } catch (const int&) {\n        throw;\n    } catch (...) {\n        if (!std::exchange(throw_reported_, true))~integration:observer: a hook that throws*
observe-label-unescaped~src/metrics.cpp~        if (c == '\\') out += "\\\\";~        if (false) out += "\\\\";~unit:[metrics]
observe-semaphore-mutex-counted~recipes/semaphore/semaphore.cpp~                                            self->mutex_held(ec, std::move(claim));\n                                        });~                                            self->mutex_held(ec, std::move(claim));\n                                        }, recipe_kind::mutex);~integration:observer: a semaphore's leases*
observe-flush-counts-drops~src/observer_channel.cpp~            ++dropped_;  // neither queued nor handed over: flush() waits for neither~            ++dropped_; ++pushed_; ++handed_;~integration:observer: a hook that blocks*
observe-leases-as-one-hold~src/metrics.cpp~    if (o == acquire_outcome::acquired) s.held += static_cast<std::int64_t>(r.holds);~    if (o == acquire_outcome::acquired) ++s.held;~integration:observer: a semaphore acquisition of several leases*
observe-given-up-uncounted~src/session_lifecycle.cpp~    if (expiry) count_expiry(id, cause == loss_cause::server_expired ? expiry_cause::server : expiry_cause::given_up);~    if (cause == loss_cause::server_expired) count_expiry(id, expiry_cause::server);~integration:observer: a partition past the session timeout*
own-watch-not-delayed~recipes/toolkit/hold.cpp~    if (own_watch_delay.count() == 0) return send_watch_once(h);~    if ((true)) return send_watch_once(h);~integration:[server_cost]
own-watch-never-sent~recipes/toolkit/hold.cpp~        if (self && h) self->send_watch_once(h);~        (void)self;~integration:[server_cost]
own-watch-sent-twice~recipes/toolkit/hold.cpp~        if (h->released || h->lost || h->node_gone || std::exchange(h->watch_sent, true)) return;~        if (h->released || h->lost || h->node_gone) return;~integration:[server_cost]
node-gone-reported-at-once~recipes/toolkit/hold.cpp~    if (!port) return node_gone_because(h, loss_cause::session);~    if ((true)) return node_gone_because(h, loss_cause::node_deleted);~integration:observer: a hold whose node goes with its expiring session*
node-gone-reason-unasked~recipes/toolkit/hold.cpp~self->node_gone_because(h, ec ? loss_cause::session : loss_cause::node_deleted);~self->node_gone_because(h, loss_cause::node_deleted);~integration:observer: a hold whose node goes with its expiring session*
node-gone-always-session~recipes/toolkit/hold.cpp~self->node_gone_because(h, ec ? loss_cause::session : loss_cause::node_deleted);~self->node_gone_because(h, loss_cause::session);~integration:observer: a hold whose node someone deletes*
ttl-ignored~src/requests.cpp~        if (ttl_.count() > 0)~        if (false)~integration:create_ttl: a TTL node*
ttl-never-renewed~recipes/nodes/ttl_node.cpp~        retry_.arm(period_, [weak] {\n            if (auto self = weak.lock()) self->renew();\n        });~        (void)weak;~integration:ttl node: a container and a TTL child*
not-empty-resent~recipes/toolkit/cleanup.cpp~        if (ec == errc::not_empty) return finish(ec);\n        if (session == 0) {\n            // A node of no session outlives them all: resent on the next, unless nothing can help.\n            if (!is_retryable(ec) && !is_session_lost(ec)) return finish(ec);~        if (session == 0) {\n            if (!is_retryable(ec) && !is_session_lost(ec) && ec != errc::not_empty) return finish(ec);~integration:ttl node: two keepers*
observe-deadline-as-cancel~recipes/toolkit/node_wait.cpp~        op->deadline_passed();~        (void)0;~integration:observer: barrier and count-down latch waits*
observe-double-barrier-unreported~recipes/barrier/double_barrier.cpp~        observed_.finish(d.error ? d.error : d.passed ? error_code{} : make_error_code(errc::timed_out));~        (void)0;~integration:observer: a double barrier's enters and leaves*
observe-double-barrier-timeout-as-done~recipes/barrier/double_barrier.cpp~d.passed ? error_code{} : make_error_code(errc::timed_out)~error_code{}~integration:observer: a double barrier's enters and leaves*
observe-group-wait-as-node-wait~recipes/nodes/group_member.cpp~node_.wait_created_unobserved(deadline)~node_.wait_created(deadline)~integration:observer: the waits of caches, nodes and group members*
observe-cache-wait-unreported~recipes/cache/tree_cache.cpp~detail::observed_blocking_wait(detail::observed_wait(impl_->port(), recipe_kind::tree_cache, impl_->path()),~detail::observed_blocking_wait(detail::observed_operation{},~integration:observer: the waits of caches, nodes and group members*
observe-throwing-wait-uncounted~recipes/toolkit/observed_operation.hpp~        observed.finish(operation_outcome::failed);\n        throw;~        throw;~integration:observer: a TTL node's wait on a server without TTL nodes*
observe-count-down-unreported~recipes/barrier/count_down_latch.cpp~            observed.finish(d->error);~            (void)0;~integration:observer: barrier and count-down latch waits*
ttl-container-wait-kept~recipes/nodes/ttl_node.cpp~self->stop_wait_.emit(asio::cancellation_type::all);~(void)self;~integration:ttl node: closed while it waits*
ttl-existing-child-not-touched~recipes/nodes/ttl_node.cpp~                             if (ec == errc::node_exists) return self->touch();~                             (void)0;~integration:ttl node: a renewal whose reply is lost*
probe-never~src/stall_probe.hpp~        if (after_.count() <= 0) return false;~        return false;~integration:stall probe: a reply the server holds*
probe-no-backoff~src/stall_probe.hpp~        return base * (1 << std::min(probes_, max_doublings));~        return base;~unit:[stall_probe]
probe-reset-on-any-answer~src/stall_probe.hpp~        if (probes_ > 0 && (!in.oldest_unanswered || *in.oldest_unanswered > last_probe_)) probes_ = 0;~        if (probes_ > 0 && in.last_reply > last_probe_) probes_ = 0;~unit:[stall_probe]
probe-ignores-round-trips~src/stall_probe.hpp~        duration base = std::max<duration>(after_, round_trip_floor * round_trips_waited);~        duration base = after_;~unit:[stall_probe]
probe-waits-on-own-requests~src/client_impl.cpp~        if (r->sent_generation == generation && !r->session_own) return r->sent_at;~        if (r->sent_generation == generation) return r->sent_at;~integration:stall probe: an idle session on a slow link*
probe-while-answers-stream~src/stall_probe.hpp~        if (in.now - in.last_sent < wait || in.now - in.last_reply < wait) return false;~        if (in.now - in.last_sent < wait) return false;~unit:[stall_probe]
promoted-never~recipes/atomic/atomic_fsm.cpp~        if (promote_attempts_ == 0 || promoted_) return finish(false, seen.value, seen.value);~        return finish(false, seen.value, seen.value);~integration:atomic long promoted to a lock*
promoted-lock-kept~recipes/atomic/atomic_engine.cpp~    if (held) release_hold(op->locks, held);~    (void)held;~integration:atomic long promoted to a lock: a change that lost*
promoted-stale-read~recipes/atomic/atomic_fsm.cpp~        phase_ = phase::promoted_read;  // under the lock: what the last writer left~        return loop(s, true);~integration:atomic long promoted to a lock: a change that lost*
countdown-fsm-key-as-race~recipes/barrier/count_down_fsm.cpp~    if (r.error == errc::node_exists && failed == 0) return finish();  // our first try was applied; its reply was lost~~unit:count-down machine*
countdown-fsm-unversioned~recipes/barrier/count_down_fsm.cpp~encode_big_endian<std::int64_t>(left - 1), version}};~encode_big_endian<std::int64_t>(left - 1), any_version}};~unit:count-down machine*
dbarrier-join-unchecked~recipes/barrier/double_barrier_fsm.cpp~    return barrier_step::join{path_, version_, node_};~    return barrier_step::join{path_, any_version, node_};~unit:reusable double barrier machine*
dbarrier-close-unguarded~recipes/barrier/double_barrier_fsm.cpp~                if (static_cast<int>(group.size()) >= member_count_) break;~                break;~unit:reusable double barrier machine*
dbarrier-passes-unjoined~recipes/barrier/double_barrier_fsm.cpp~        if (!ours && ready && joined_) return finish(true);~        if (!ours && ready) return finish(true);~unit:reusable double barrier machine*
dbarrier-reusable-ignored~recipes/barrier/double_barrier.cpp~    member_->reusable = options.reusable;~    member_->reusable = false;~integration:double barrier: a member that comes while a round is in*
pnode-refused-watch-unretried~recipes/nodes/persistent_node_fsm.cpp~    if (ec) return step_done(session, is_retryable(ec) || ec == errc::too_many_watches);~    if (ec) return step_done(session, is_retryable(ec));~integration:persistent node: a node whose watch is refused*
promoted-doubt-unchecked~recipes/atomic/atomic_fsm.cpp~        if (memory_.cache->mzxid == *doubt_mzxid_) {~        if (true) {~integration:atomic long promoted to a lock: the lock lost*
dbarrier-rejoin-passes-on-version~recipes/barrier/double_barrier_fsm.cpp~            round_moved_ = true;\n            return list_again();~            if (joined_) return finish(true);\n            return list_again();~unit:reusable double barrier machine: a rejoin*
dbarrier-close-in-doubt-fails~recipes/barrier/double_barrier_fsm.cpp~        if (may_have_been_applied(r.error)) return list_again();~~unit:reusable double barrier machine*
dbarrier-ready-event-ignored~recipes/barrier/double_barrier_fsm.cpp~        if (ours && (ready || r.ready_created)) return finish(true);~        if (ours && ready) return finish(true);~unit:[issue44]
dbarrier-drop-unchecked~recipes/barrier/double_barrier_fsm.cpp~        if (!ready_armed_ || r.drops != armed_drops_ || gap_) {~        if (!ready_armed_ || gap_) {~integration:double barrier: zkr members cut off at each phase*
dbarrier-ready-taken-from-any~recipes/barrier/double_barrier_fsm.cpp~ && kazoo_name(members.front()) &&~ &&~unit:[issue44]
dbarrier-cut-always-unknown~recipes/barrier/double_barrier_fsm.cpp~    if (passing < 1) return false;~    if (passing < 1) return true;~unit:[issue44]
dbarrier-late-ready-kept~recipes/barrier/double_barrier_fsm.cpp~    if (!reusable_ && ours == members.end() && members.size() == 1 && ready_removals_ < 3 && kazoo_name(members.front()) &&~    if (false && ours == members.end() && members.size() == 1 && ready_removals_ < 3 && kazoo_name(members.front()) &&~integration:double barrier: zkr members cut off at each phase*
dbarrier-empty-round-kept~recipes/barrier/double_barrier_fsm.cpp~            if (made_round_ && children.empty()) {~            if (false) {~unit:reusable double barrier machine*
countdown-fsm-closed-as-unsent~recipes/barrier/count_down_fsm.cpp~    if (may_have_been_applied(r.error)) {~    if (may_have_been_applied(r.error) && r.error != errc::client_closed) {~unit:count-down machine*
in-doubt-drops-connection-loss~src/error.cpp~        case errc::connection_loss:    // its reply lost with the connection: applied~        case errc::nothing:~integration:in doubt: a write whose reply was lost*
in-doubt-drops-operation-timeout~src/error.cpp~        case errc::operation_timeout:  // the connection timed out with it unanswered: applied~        case errc::nothing:~integration:in doubt: a write unanswered when*
in-doubt-drops-session-expired~src/error.cpp~        case errc::session_expired:    // refused on the next session after a try whose reply was lost: applied~        case errc::nothing:~integration:in doubt: a write bound to its session*
in-doubt-drops-client-closed~src/error.cpp~        case errc::client_closed:      // in flight when the client closed: applied~        case errc::nothing:~integration:in doubt: a write in flight when its client closed*
in-doubt-counts-throttled~src/error.cpp~        case errc::session_moved:      // not made by a test~        case errc::throttled_op:\n        case errc::session_moved:      // not made by a test~unit:[in_doubt]
final-failure-forgets-doubt~src/requests.hpp~    if (doubt && !may_have_been_applied(last) && is_retryable(last)) return doubt;~    (void)doubt;~unit:[in_doubt]
EOF
)

only=("$@")
want() {
    [ ${#only[@]} -eq 0 ] && return 0
    local n
    for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done
    return 1
}

scripts/setup.sh >/dev/null
rm -rf "$work"
mkdir -p "$work/src"
git archive HEAD | tar -x -C "$work/src"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZKR_BUILD_BENCH=OFF >/dev/null
echo "mutants: building the unmutated tree in $work"
cmake --build "$work/build" -j"$(nproc)" --target zkr_unit_tests zkr_integration_tests zkr_testkit_cli >/dev/null
"$work/build/testkit/zkr-testkit" start "$work/zk" 1 >/dev/null
trap '"$work/build/testkit/zkr-testkit" destroy "$work/zk" >/dev/null 2>&1 || true' EXIT

run_tests() {  # $1: unit:<filter> or integration:<filter>
    local kind=${1%%:*} filter=${1#*:}
    case "$kind" in
        unit) timeout 300 "$work/build/tests/zkr_unit_tests" "$filter" ;;
        integration) ZKR_TEST_CONNECT_FILE="$work/zk/connect" timeout 300 "$work/build/integration/zkr_integration_tests" "$filter" ;;
    esac
}

survived=0 killed=0
while IFS='~' read -r name file text replacement tests; do
    [ -n "$name" ] || continue
    want "$name" || continue
    target="$work/src/$file"
    cp "$target" "$target.orig"
    if ! python3 - "$target" "$text" "$replacement" <<'PY'
import sys
path, old, new = sys.argv[1], sys.argv[2].replace('\\n', '\n'), sys.argv[3].replace('\\n', '\n')
s = open(path).read()
if s.count(old) != 1:
    sys.exit(f"the mutated text occurs {s.count(old)} times in {path}")
open(path, 'w').write(s.replace(old, new))
PY
    then
        echo "mutant $name: STALE (its text is not in $file once): fix scripts/mutants.sh"
        survived=$((survived + 1))
        mv "$target.orig" "$target"
        continue
    fi
    kind=${tests%%:*}
    if ! cmake --build "$work/build" -j"$(nproc)" --target "zkr_${kind}_tests" >"$work/$name.build.log" 2>&1; then
        echo "mutant $name: killed (does not build)"
        killed=$((killed + 1))
    elif run_tests "$tests" >"$work/$name.log" 2>&1; then
        echo "mutant $name: SURVIVED ($tests passed; $file)"
        survived=$((survived + 1))
    else
        echo "mutant $name: killed by $tests"
        killed=$((killed + 1))
    fi
    mv "$target.orig" "$target"
    touch "$target"
done <<<"$mutants"
echo "mutants: $killed killed, $survived survived"
[ "$survived" -eq 0 ]
