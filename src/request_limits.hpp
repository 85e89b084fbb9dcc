// Internal: how many bytes a request takes as the server reads it, to refuse one over
// client_options::max_request_size before it is sent. A server drops the connection of a request
// over its jute.maxbuffer, and the C client would then send it again on every reconnection, for
// ever, while every hold of the client flips between held and uncertain.
#pragma once

#include "connect_string.hpp"
#include "zkr/client.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace zkr::detail {

/// Sizes in jute's encoding (what the server counts against its jute.maxbuffer: the whole packet
/// after its 4-byte length): every int and length 4 bytes, a bool 1, a string its length and 4.
class request_sizer {
public:
    explicit request_sizer(const client_options& o)
        : chroot_(connect_string_chroot(o.connect).size()), acl_(4), limit_(o.max_request_size) {
        for (const auto& e : o.default_acl) acl_ += 4 + 4 + e.scheme.size() + 4 + e.id.size();
    }

    // Requests (a 4-byte xid and a 4-byte type before each).
    std::size_t create(std::size_t path, std::size_t data) const { return header + create_body(path, data); }
    /// exists, get_data, get_children: a path and a watch flag.
    std::size_t read(std::size_t path) const { return header + path_size(path) + 1; }
    std::size_t remove(std::size_t path) const { return header + path_size(path) + 4; }
    std::size_t set_data(std::size_t path, std::size_t data) const { return header + path_size(path) + 4 + data + 4; }
    std::size_t multi(const std::vector<multi_op>& ops) const {
        std::size_t total = header + op_header;  // the last op header ends the list
        for (const auto& o : ops) total += op_header + op_body(o);
        return total;
    }

    /// client_options::max_request_size.
    std::size_t limit() const { return limit_; }
    bool fits(std::size_t request) const { return request <= limit_; }
    /// "" if `request` bytes fit, else why not (for messages).
    std::string problem(std::size_t request) const {
        if (fits(request)) return {};
        return "the request would be " + std::to_string(request) + " bytes, over client_options::max_request_size (" +
               std::to_string(limit_) + " bytes; the servers' jute.maxbuffer must allow it)";
    }

private:
    static constexpr std::size_t header = 8;     // xid, type
    static constexpr std::size_t op_header = 9;  // a multi's op: type, done flag, error
    // The C client puts the chroot before every path, alone for "/".
    std::size_t path_size(std::size_t path) const { return 4 + (chroot_ > 0 && path == 1 ? chroot_ : chroot_ + path); }
    std::size_t create_body(std::size_t path, std::size_t data) const { return path_size(path) + 4 + data + acl_ + 4; }
    std::size_t op_body(const multi_op& o) const {
        return std::visit(
            [&](const auto& x) -> std::size_t {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, op::create>) return create_body(x.path.size(), x.data.size());
                else if constexpr (std::is_same_v<T, op::set_data>) return path_size(x.path.size()) + 4 + x.data.size() + 4;
                else if constexpr (std::is_same_v<T, op::guard>) {
                    // A check per node, each with its own op header.
                    std::size_t total = path_size(x.path.size()) + 4;
                    for (const auto& more : x.also) total += op_header + path_size(more.size()) + 4;
                    return total;
                } else return path_size(x.path.size()) + 4;  // remove and check: a path and a version
            },
            o);
    }

    std::size_t chroot_;
    std::size_t acl_;
    std::size_t limit_;
};

/// Why a TTL create cannot be sent ("" when it can): ZooKeeper has TTL forms of the two
/// persistent modes only, and takes a TTL from 1 ms to client::max_ttl.
inline std::string ttl_problem(create_mode mode, std::chrono::milliseconds ttl) {
    if (mode != create_mode::persistent && mode != create_mode::persistent_sequential)
        return "a TTL node is persistent or persistent_sequential (ZooKeeper has no other TTL mode)";
    if (ttl.count() < 1 || ttl > client::max_ttl)
        return "the ttl must be from 1 ms to " + std::to_string(client::max_ttl.count()) + " ms (it is " +
               std::to_string(ttl.count()) + " ms)";
    return {};
}

}  // namespace zkr::detail
