#include "requests.hpp"

#include "client_impl.hpp"

namespace zkr::detail {

zkr::stat to_stat(const Stat& s) noexcept {
    return {s.czxid, s.mzxid, s.ctime, s.mtime, s.version, s.cversion, s.aversion,
            s.ephemeralOwner, s.dataLength, s.numChildren, s.pzxid};
}

void request::replied(int rc) {
    client.untrack_in_flight(this);
    client.note_reply(*this, rc);
}

namespace {

int to_zoo_mode(create_mode m) {
    switch (m) {
        case create_mode::persistent: return ZOO_PERSISTENT;
        case create_mode::ephemeral: return ZOO_EPHEMERAL;
        case create_mode::persistent_sequential: return ZOO_PERSISTENT_SEQUENTIAL;
        case create_mode::ephemeral_sequential: return ZOO_EPHEMERAL_SEQUENTIAL;
        case create_mode::container: return ZOO_CONTAINER;
    }
    return ZOO_PERSISTENT;
}

event_type to_event_type(int type) {
    if (type == ZOO_CREATED_EVENT) return event_type::created;
    if (type == ZOO_DELETED_EVENT) return event_type::deleted;
    if (type == ZOO_CHANGED_EVENT) return event_type::changed;
    if (type == ZOO_CHILD_EVENT) return event_type::child;
    return event_type::not_watching;
}

// The C client calls this for every watch we set, on its completion thread: it only hands the
// event over.
void on_watch_event(zhandle_t*, int type, int /*state*/, const char* path, void* context) {
    // Session events go to every registered watcher and leave it registered; the session
    // machinery ends watches when their session ends.
    if (type == ZOO_SESSION_EVENT) return;
    auto* ws = static_cast<watch_state*>(context);
    client_impl* c = ws->client();
    (void)path;  // the watched path: the state has it
    ws->finish({}, to_event_type(type));
    c->watches().forget(ws);
}

// Every request of one kind: its arguments, its C call and its reply.
template <class... Values>
class typed_request : public request {
public:
    typed_request(client_impl& c, bool retry_allowed, completion<Values...> done)
        : request(c, retry_allowed), done_(std::move(done)) {}

    void fail(error_code ec) override { finish(ec, Values{}...); }

protected:
    void succeed(Values... values) { finish({}, std::move(values)...); }
    void finish(error_code ec, Values... values) {
        if (observe_id != 0) client.observe_finished(*this, ec);
        done_(ec, std::move(values)...);
        delete this;
    }
    // The reply to a request this object sent; records the server's answer for the lease.
    template <class Self>
    static Self* self(int rc, const void* data) {
        auto* r = static_cast<Self*>(const_cast<void*>(data));
        r->replied(rc);
        return r;
    }

private:
    completion<Values...> done_;
};

class create_request final : public typed_request<create_result> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::create; }
    std::string_view observed_path() const override { return path_; }
    create_request(client_impl& c, std::string path, std::string data, create_mode mode, completion<create_result> done,
                   std::chrono::milliseconds ttl)
        // A sequential create is never resent blindly: its first try may have made a node.
        : typed_request(c, !is_sequential(mode), std::move(done)),
          path_(std::move(path)), data_(std::move(data)), mode_(mode), ttl_(ttl) {}

    int send(zhandle_t* zh) override {
        if (ttl_.count() > 0)
            return zoo_acreate2_ttl(zh, path_.c_str(), data_.data(), static_cast<int>(data_.size()), client.acl(),
                                    is_sequential(mode_) ? ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL : ZOO_PERSISTENT_WITH_TTL,
                                    ttl_.count(), &on_reply, this);
        return zoo_acreate2(zh, path_.c_str(), data_.data(), static_cast<int>(data_.size()), client.acl(),
                            to_zoo_mode(mode_), &on_reply, this);
    }

private:
    static void on_reply(int rc, const char* created, const Stat* st, const void* data) {
        auto* r = self<create_request>(rc, data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        r->succeed(create_result{created ? created : "", st ? to_stat(*st) : zkr::stat{}});
    }
    std::string path_, data_;
    create_mode mode_;
    std::chrono::milliseconds ttl_;
};

class remove_request final : public typed_request<> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::remove; }
    std::string_view observed_path() const override { return path_; }
    remove_request(client_impl& c, std::string path, std::int32_t version, completion<> done)
        : typed_request(c, true, std::move(done)), path_(std::move(path)), version_(version) {}

    int send(zhandle_t* zh) override { return zoo_adelete(zh, path_.c_str(), version_, &on_reply, this); }

private:
    static void on_reply(int rc, const void* data) {
        auto* r = self<remove_request>(rc, data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        r->succeed();
    }
    std::string path_;
    std::int32_t version_;
};

// Reads that may leave a watch.
template <class Result>
class read_request : public typed_request<Result> {
public:
    std::string_view observed_path() const override { return path_; }
    read_request(client_impl& c, std::string path, std::shared_ptr<watch_state> watch, completion<Result> done)
        : typed_request<Result>(c, true, std::move(done)), path_(std::move(path)), watch_(std::move(watch)) {}
    ~read_request() override {
        // A read that failed for good leaves no watch at the C client (except exists on a
        // missing node, which hands its watch over before we get here).
        if (watch_) this->client.watches().forget(watch_.get());
    }
    void on_send(std::uint64_t generation) override {
        request::on_send(generation);
        if (watch_) watch_->generation = generation;
    }

protected:
    watcher_fn watcher() const { return watch_ ? &on_watch_event : nullptr; }
    void* watcher_context() const { return watch_.get(); }
    zkr::watch take_watch() {
        if (!watch_) return {};
        watch_->armed = true;
        return zkr::watch(std::move(watch_));
    }

    std::string path_;
    std::shared_ptr<watch_state> watch_;
};

class exists_request final : public read_request<exists_result> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::exists; }
    using read_request::read_request;
    int send(zhandle_t* zh) override {
        return zoo_awexists(zh, path_.c_str(), watcher(), watcher_context(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const Stat* st, const void* data) {
        auto* r = self<exists_request>(rc, data);
        if (rc == ZOK) return r->succeed(exists_result{true, st ? to_stat(*st) : zkr::stat{}, r->take_watch()});
        // No node is an answer, not an error; the watch now waits for its creation.
        if (rc == ZNONODE) return r->succeed(exists_result{false, {}, r->take_watch()});
        r->client.on_failure(r, rc);
    }
};

class get_data_request final : public read_request<data_result> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::get_data; }
    using read_request::read_request;
    int send(zhandle_t* zh) override {
        return zoo_awget(zh, path_.c_str(), watcher(), watcher_context(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const char* value, int length, const Stat* st, const void* data) {
        auto* r = self<get_data_request>(rc, data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        std::string bytes = value && length > 0 ? std::string(value, static_cast<std::size_t>(length)) : std::string();
        r->succeed(data_result{std::move(bytes), st ? to_stat(*st) : zkr::stat{}, r->take_watch()});
    }
};

class get_children_request final : public read_request<children_result> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::get_children; }
    using read_request::read_request;
    int send(zhandle_t* zh) override {
        return zoo_awget_children2(zh, path_.c_str(), watcher(), watcher_context(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const String_vector* names, const Stat* st, const void* data) {
        auto* r = self<get_children_request>(rc, data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        children_result result;
        if (names) {
            result.children.reserve(static_cast<std::size_t>(names->count));
            for (int i = 0; i < names->count; ++i) result.children.emplace_back(names->data[i]);
        }
        if (st) result.stat = to_stat(*st);
        result.watch = r->take_watch();
        r->succeed(std::move(result));
    }
};

class set_data_request final : public typed_request<zkr::stat> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::set_data; }
    std::string_view observed_path() const override { return path_; }
    set_data_request(client_impl& c, std::string path, std::string data, std::int32_t version, completion<zkr::stat> done)
        : typed_request(c, true, std::move(done)), path_(std::move(path)), data_(std::move(data)), version_(version) {}

    int send(zhandle_t* zh) override {
        return zoo_aset(zh, path_.c_str(), data_.data(), static_cast<int>(data_.size()), version_, &on_reply, this);
    }

private:
    static void on_reply(int rc, const Stat* st, const void* data) {
        auto* r = self<set_data_request>(rc, data);
        if (rc != ZOK) return r->client.on_failure(r, rc);
        r->succeed(st ? to_stat(*st) : zkr::stat{});
    }
    std::string path_, data_;
    std::int32_t version_;
};

bool has_sequential_create(const std::vector<multi_op>& ops) {
    for (const auto& o : ops) {
        if (auto* c = std::get_if<op::create>(&o); c && is_sequential(c->mode)) return true;
    }
    return false;
}

// Codes that say the request did not get an answer from the server (as opposed to an op's
// failure, which a server gives per op).
bool is_transport_failure(int rc) {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
           rc == ZINVALIDSTATE || rc == ZSESSIONMOVED;
}

class multi_request final : public typed_request<std::vector<multi_op_result>> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::multi; }
    std::string_view observed_path() const override { return ops_.empty() ? std::string_view() : std::visit([](const auto& o) { return std::string_view(o.path); }, ops_.front()); }
    multi_request(client_impl& c, std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done)
        : typed_request(c, !has_sequential_create(ops), std::move(done)), ops_(std::move(ops)) {}

    int send(zhandle_t* zh) override {
        // One op on the wire per op, but a guard: a check per node it covers. The C client writes
        // created paths and stats into these until the reply arrives.
        std::size_t n = 0;
        first_wire_.assign(ops_.size() + 1, 0);
        for (std::size_t i = 0; i < ops_.size(); ++i) {
            first_wire_[i] = n;
            auto* g = std::get_if<op::guard>(&ops_[i]);
            n += g ? 1 + g->also.size() : 1;
        }
        first_wire_[ops_.size()] = n;
        zoo_ops_.assign(n, zoo_op_t{});
        results_.assign(n, zoo_op_result_t{});
        path_buffers_.assign(n, std::string());
        stats_.assign(n, Stat{});
        for (std::size_t i = 0; i < ops_.size(); ++i) {
            std::size_t w = first_wire_[i];
            std::visit(
                [&](const auto& o) {
                    using T = std::decay_t<decltype(o)>;
                    if constexpr (std::is_same_v<T, op::create>) {
                        path_buffers_[w].assign(o.path.size() + 32, '\0');
                        zoo_create_op_init(&zoo_ops_[w], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                           client.acl(), to_zoo_mode(o.mode), path_buffers_[w].data(),
                                           static_cast<int>(path_buffers_[w].size()));
                    } else if constexpr (std::is_same_v<T, op::remove>) {
                        zoo_delete_op_init(&zoo_ops_[w], o.path.c_str(), o.version);
                    } else if constexpr (std::is_same_v<T, op::set_data>) {
                        zoo_set_op_init(&zoo_ops_[w], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                        o.version, &stats_[w]);
                    } else if constexpr (std::is_same_v<T, op::check>) {
                        zoo_check_op_init(&zoo_ops_[w], o.path.c_str(), o.version);
                    } else {
                        zoo_check_op_init(&zoo_ops_[w], o.path.c_str(), any_version);
                        for (std::size_t k = 0; k < o.also.size(); ++k)
                            zoo_check_op_init(&zoo_ops_[w + 1 + k], o.also[k].c_str(), any_version);
                    }
                },
                ops_[i]);
        }
        return zoo_amulti(zh, static_cast<int>(n), zoo_ops_.data(), results_.data(), &on_reply, this);
    }

private:
    static void on_reply(int rc, const void* data) {
        auto* r = self<multi_request>(rc, data);
        std::vector<multi_op_result> out(r->ops_.size());
        int first_failure = ZOK;
        bool answered = rc == ZOK;
        error_code first_error;
        for (std::size_t i = 0; i < out.size(); ++i) {
            // An op's result: its wire op's, or for a guard the first of its checks that failed.
            std::size_t w = r->first_wire_[i];
            int err = r->results_[w].err;
            for (std::size_t k = w; k < r->first_wire_[i + 1]; ++k) {
                if (r->results_[k].err != ZOK && r->results_[k].err != ZRUNTIMEINCONSISTENCY) {
                    err = r->results_[k].err;
                    break;
                }
                if (r->results_[k].err != ZOK) err = r->results_[k].err;
            }
            out[i].error = make_zk_error_code(err);
            // A guard's node gone: the hold it stands for is lost, whatever its holder believes.
            if (err == ZNONODE && std::holds_alternative<op::guard>(r->ops_[i])) out[i].error = make_error_code(errc::lock_lost);
            if (err != ZOK && err != ZRUNTIMEINCONSISTENCY && first_failure == ZOK) {
                first_failure = err;
                first_error = out[i].error;
            }
            if (err != ZOK) answered = true;
            if (err == ZOK && std::holds_alternative<op::create>(r->ops_[i]))
                out[i].path = r->path_buffers_[w].c_str();
            if (err == ZOK && std::holds_alternative<op::set_data>(r->ops_[i])) out[i].stat = to_stat(r->stats_[w]);
        }
        // A transport failure may be retried; an op's failure is final. libzookeeper_mt 3.8 fills
        // every op's result with the transport error too (a connection loss reads as -4 on each
        // op), so those codes never count as the server's answer.
        if (is_transport_failure(rc)) answered = false;
        if (rc != ZOK && !answered) return r->client.on_failure(r, rc);
        error_code ec = first_failure != ZOK ? first_error : make_zk_error_code(rc);
        r->finish(ec, std::move(out));
    }

    std::vector<multi_op> ops_;
    std::vector<std::size_t> first_wire_;  // op i is wire ops [first_wire_[i], first_wire_[i + 1])
    std::vector<zoo_op_t> zoo_ops_;
    std::vector<zoo_op_result_t> results_;
    std::vector<std::string> path_buffers_;
    std::vector<Stat> stats_;
};

// The C client's per-watcher removal only checks the server (CHECK_WATCHES) and leaves the
// server's watch in place, so REMOVE_WATCHES (all of the kind on the path) is used when no
// other local watcher needs that server watch.
class remove_watches_request final : public typed_request<> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::remove_watches; }
    std::string_view observed_path() const override { return watch_->path; }
    remove_watches_request(client_impl& c, std::shared_ptr<watch_state> ws, completion<> done)
        : typed_request(c, true, std::move(done)), watch_(std::move(ws)) {}

    int send(zhandle_t* zh) override {
        return zoo_aremove_all_watches(zh, watch_->path.c_str(),
                                       watch_->kind == watch_kind::child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA, 0,
                                       // The C API declares a pointer to the callback but uses it as the callback.
                                       reinterpret_cast<void_completion_t*>(reinterpret_cast<void*>(&on_reply)), this);
    }

private:
    static void on_reply(int rc, const void* data) {
        auto* r = self<remove_watches_request>(rc, data);
        // A retry that finds nothing means our first try got through.
        if (rc == ZOK || (rc == ZNOWATCHER && !r->watch_->done && r->retries > 0)) {
            r->watch_->finish(make_error_code(errc::watch_removed), event_type::changed);
            r->client.watches().forget(r->watch_.get());
            // Local watchers that armed on this path meanwhile lost their registration too.
            r->client.watches().end_sharing(*r->watch_, event_type::not_watching);
            return r->succeed();
        }
        r->client.on_failure(r, rc);
    }
    std::shared_ptr<watch_state> watch_;
};

class heartbeat_request final : public typed_request<> {
public:
    zkr::operation observed_operation() const override { return zkr::operation::exists; }
    std::string_view observed_path() const override { return "/"; }
    explicit heartbeat_request(client_impl& c)
        : typed_request(c, false, completion<>(completion<>::inline_fn([](error_code) {}))) {
        session_own = true;
    }
    int send(zhandle_t* zh) override { return zoo_aexists(zh, "/", 0, &on_reply, this); }

private:
    static void on_reply(int rc, const Stat*, const void* data) {
        auto* r = self<heartbeat_request>(rc, data);
        r->finish(make_zk_error_code(rc == ZNONODE ? ZOK : rc));
    }
};

}  // namespace

request* make_create(client_impl& c, std::string path, std::string data, create_mode mode, completion<create_result> done,
                     std::chrono::milliseconds ttl) {
    return new create_request(c, std::move(path), std::move(data), mode, std::move(done), ttl);
}
request* make_remove(client_impl& c, std::string path, std::int32_t version, completion<> done) {
    return new remove_request(c, std::move(path), version, std::move(done));
}
request* make_exists(client_impl& c, std::string path, std::shared_ptr<watch_state> watch, completion<exists_result> done) {
    return new exists_request(c, std::move(path), std::move(watch), std::move(done));
}
request* make_get_data(client_impl& c, std::string path, std::shared_ptr<watch_state> watch, completion<data_result> done) {
    return new get_data_request(c, std::move(path), std::move(watch), std::move(done));
}
request* make_get_children(client_impl& c, std::string path, std::shared_ptr<watch_state> watch,
                           completion<children_result> done) {
    return new get_children_request(c, std::move(path), std::move(watch), std::move(done));
}
request* make_set_data(client_impl& c, std::string path, std::string data, std::int32_t version, completion<zkr::stat> done) {
    return new set_data_request(c, std::move(path), std::move(data), version, std::move(done));
}
request* make_multi(client_impl& c, std::vector<multi_op> ops, completion<std::vector<multi_op_result>> done) {
    return new multi_request(c, std::move(ops), std::move(done));
}
request* make_remove_all_watches(client_impl& c, std::shared_ptr<watch_state> ws, completion<> done) {
    return new remove_watches_request(c, std::move(ws), std::move(done));
}
request* make_heartbeat(client_impl& c) { return new heartbeat_request(c); }

int remove_watch_locally(zhandle_t* zh, watch_state& ws) {
    return zoo_remove_watches(zh, ws.path.c_str(), ws.kind == watch_kind::child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA,
                              &on_watch_event, &ws, 1);
}

}  // namespace zkr::detail
