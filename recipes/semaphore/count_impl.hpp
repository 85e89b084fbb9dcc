// The state behind zkr::shared_count (shared_count.cpp), also read by the semaphore.
#pragma once

#include "zkr/shared_count.hpp"

#include "session_port.hpp"

#include <boost/asio/strand.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace zkr::detail {

/// Curator's SharedCount encoding: a 4-byte big-endian int.
std::string encode_count(std::int32_t value);
std::optional<std::int32_t> decode_count(std::string_view data);

class count_impl : public std::enable_shared_from_this<count_impl> {
public:
    count_impl(session_port& port, std::string path);
    /// Makes the node with `seed` if missing and reads it (blocking); then keeps it fresh.
    void start(session_port& port, std::int32_t seed);
    std::int32_t get() const;
    std::int32_t version() const;
    /// Value and version, read together.
    versioned_count snapshot() const;
    /// Reads the node again (and sets its watch again).
    void read();
    /// set_data at `version` (any_version: unconditional), blocking; the value is taken on success.
    error_code write(std::int32_t value, std::int32_t version);
    /// User listeners: on the client's executor, in order.
    subscription listen(std::function<void(std::int32_t)> fn);
    /// zkr's own (the semaphore): called where the change is read; must not block.
    subscription listen_inline(std::function<void(std::int32_t)> fn);
    void close();
    const std::string& path() const noexcept { return path_; }

private:
    struct listener {
        std::function<void(std::int32_t)> fn;
        std::atomic<bool> active{true};
    };
    void on_read(error_code ec, data_result r);
    void update(std::int32_t value, std::int32_t version);

    std::weak_ptr<session_port> port_;
    boost::asio::strand<boost::asio::any_io_executor> strand_;
    const std::string path_;
    subscription session_subscription_;
    mutable std::mutex mutex_;  // a leaf
    std::int32_t value_ = 0, version_ = -1;
    bool reading_ = false, read_again_ = false, closed_ = false;
    std::uint64_t next_key_ = 0;
    std::map<std::uint64_t, std::shared_ptr<listener>> listeners_;
    std::map<std::uint64_t, std::function<void(std::int32_t)>> internal_;
};

}  // namespace zkr::detail
