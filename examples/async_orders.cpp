// An order service's checkout, asynchronous: coroutines on a thread pool sell from one stock
// record, each sale under one zkr::mutex. The hold belongs to the sale (a zkr::lock_hold), not to
// a thread: a coroutine that resumes on another pool thread still owns it and releases it there,
// and two sales on one thread exclude each other.
//
// The stock lives in a znode and is written back unversioned, so only the lock keeps two sales
// from both seeing the last item. The ledger below stands for a resource that checks fencing
// tokens: it refuses a write whose token is lower than one it has already seen, so a holder whose
// session was lost behind its back (a long pause, a partition) cannot write over a newer holder.
//
//   async_orders [CONNECT]      (default: $ZK_CONNECT, else 127.0.0.1:2181)
// Exit status 0 when every item was sold exactly once and no two sales overlapped.
#include <zkr/zkr.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// A resource that checks fencing tokens (a database row with a "last token" column, say).
class ledger {
public:
    /// Records a sale unless a newer holder has already written: false means "you are stale".
    bool record_sale(std::int64_t token) {
        std::lock_guard guard(mutex_);
        if (token < highest_token_) return false;
        highest_token_ = token;
        ++sales_;
        return true;
    }
    int sales() {
        std::lock_guard guard(mutex_);
        return sales_;
    }

private:
    std::mutex mutex_;
    std::int64_t highest_token_ = 0;
    int sales_ = 0;
};

constexpr const char* stock_path = "/examples/async-orders/stock";
constexpr int initial_stock = 20;
constexpr int customers = 8;
constexpr int orders_per_customer = 4;  // 32 orders for 20 items: 12 must be turned away

std::atomic<int> inside{0}, most_inside{0}, sold{0}, turned_away{0}, stale{0}, failed_checkouts{0};

asio::awaitable<void> checkout(zkr::client& client, zkr::mutex& lock, ledger& books) {
    for (int order = 0; order < orders_per_customer; ++order) {
        zkr::lock_hold hold = co_await lock.async_lock(asio::use_awaitable);
        int now_inside = ++inside;
        most_inside = std::max(most_inside.load(), now_inside);

        auto stock = co_await client.async_get_data(stock_path, asio::use_awaitable);  // may resume elsewhere
        int left = std::stoi(stock.data);
        if (left == 0) {
            ++turned_away;
        } else if (hold.state() != zkr::lock_state::held || !books.record_sale(hold.fencing_token())) {
            ++stale;  // lost the lock meanwhile: sell nothing
        } else {
            co_await client.async_set_data(stock_path, std::to_string(left - 1), zkr::any_version, asio::use_awaitable);
            ++sold;
        }

        --inside;
        co_await hold.async_unlock(asio::use_awaitable);  // completes once the node is gone
    }
}

}  // namespace

int main(int argc, char** argv) {
    const char* env = std::getenv("ZK_CONNECT");
    zkr::client_options options;
    options.connect = argc > 1 ? argv[1] : env ? env : "127.0.0.1:2181";
    options.session_timeout = 10s;
    asio::thread_pool pool(4);
    options.executor = pool.get_executor();  // handlers and coroutines run on the pool
    zkr::client client(options);
    client.wait_connected(15s);

    client.create_parents(stock_path);
    zkr::error_code ec;
    client.create(stock_path, std::to_string(initial_stock), zkr::create_mode::persistent, ec);
    client.set_data(stock_path, std::to_string(initial_stock));

    zkr::mutex lock(client, "/examples/async-orders/lock");
    ledger books;
    std::atomic<int> finished{0};
    for (int i = 0; i < customers; ++i) {
        asio::co_spawn(pool, checkout(client, lock, books), [&](std::exception_ptr failure) {
            if (failure) {
                try {
                    std::rethrow_exception(failure);
                } catch (const std::exception& e) {  // zkr::system_error among others
                    std::cerr << "a checkout failed: " << e.what() << "\n";
                }
                ++failed_checkouts;
            }
            ++finished;
        });
    }
    // Each checkout is done within seconds; a hang is a failure, not a wait for ever.
    auto deadline = std::chrono::steady_clock::now() + 120s;
    while (finished < customers && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    if (finished < customers) {
        std::cerr << "only " << finished << " of " << customers << " checkouts finished within 120 s\n";
        std::_Exit(1);  // the pool's threads may still be blocked: do not wait for them
    }

    int left = std::stoi(client.get_data(stock_path).data);
    std::cout << "sold " << sold << ", turned away " << turned_away << ", stale " << stale << ", left " << left
              << ", ledger " << books.sales() << ", most sales inside the lock at once " << most_inside << "\n";
    bool exact = sold == initial_stock && left == 0 && books.sales() == initial_stock &&
                 turned_away == customers * orders_per_customer - initial_stock && most_inside == 1 &&
                 failed_checkouts == 0;
    std::cout << (exact ? "every item sold exactly once" : "OVERSOLD OR LOST SALES") << "\n";
    client.close();
    pool.join();
    return exact ? 0 : 1;
}
