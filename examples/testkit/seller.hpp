// The service under test in the testkit examples: a seller that takes units from a stock counter
// kept in ZooKeeper, one seller at a time. It sells only while its lock is `held`, and fences each
// write with the lock (a transaction that fails once the lock's node is gone), so a seller cut
// off from ZooKeeper stops at once and a stale one is refused by the server itself.
#pragma once

#include <zkr/zkr.hpp>

#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

class seller {
public:
    seller(zkr::client& c, std::string stock) : client_(c), stock_(std::move(stock)), lock_(c, stock_ + "-lock") {
        lost_ = lock_.on_lost([this](const std::string&) { ++losses_; });
    }

    /// Waits up to `timeout` for the lock; true once this seller may sell.
    bool start(std::chrono::milliseconds timeout) {
        auto f = lock_.async_lock(boost::asio::use_future);
        if (f.wait_for(timeout) != std::future_status::ready) return false;
        hold_ = f.get();
        return true;
    }

    /// Sells one unit: false when the lock is not certainly ours, or the server refused the write.
    bool sell() {
        if (!hold_ || hold_->state() != zkr::lock_state::held) return false;
        zkr::error_code ec;
        auto stock = client_.get_data(stock_, ec);
        if (ec) return false;
        int left = std::stoi(stock.data);
        if (left <= 0) return false;
        client_.multi({hold_->guard(), zkr::op::set_data{stock_, std::to_string(left - 1), stock.stat.version}}, ec);
        return !ec;
    }

    zkr::lock_state standing() const { return hold_ ? hold_->state() : zkr::lock_state::not_held; }
    int losses() const { return losses_.load(); }

private:
    zkr::client& client_;
    std::string stock_;
    zkr::mutex lock_;
    std::optional<zkr::lock_hold> hold_;
    std::atomic<int> losses_{0};
    zkr::subscription lost_;
};
