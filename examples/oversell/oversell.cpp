// The classic oversell: several worker processes sell from one stock kept in ZooKeeper. Each
// reads the stock, thinks for a moment, and writes back one less. Without a lock two workers
// read the same count and both sell the last items: more is sold than there was. With zkr::mutex
// around read-and-write, exactly the stock is sold.
//
//   oversell CONNECT [WORKERS=4] [STOCK=20]
//   (internally re-runs itself as: oversell --worker locked|unlocked CONNECT ROOT)
#include <zkr/zkr.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace std::chrono_literals;

namespace {

zkr::client_options options_for(const std::string& connect) {
    zkr::client_options o;
    o.connect = connect;
    o.session_timeout = 10s;
    return o;
}

// One worker: sells until the stock is gone; prints how many it sold.
int run_worker(bool locked, const std::string& connect, const std::string& root) {
    zkr::client client(options_for(connect));
    client.wait_connected(15s);
    zkr::mutex lock(client, root + "/lock");
    int sold = 0;
    for (;;) {
        std::unique_lock guard(lock, std::defer_lock);
        if (locked) guard.lock();
        int stock = std::stoi(client.get_data(root + "/stock").data);
        if (stock <= 0) break;
        std::this_thread::sleep_for(2ms);  // checking payment, say: time for others to read the same stock
        client.set_data(root + "/stock", std::to_string(stock - 1));
        ++sold;
    }
    std::printf("%d\n", sold);
    return 0;
}

struct outcome {
    int sold = 0;
    int stock_left = 0;
};

outcome run_sale(bool locked, const std::string& connect, int workers, int stock) {
    std::string root = "/examples/oversell-" + std::to_string(getpid()) + (locked ? "-locked" : "-unlocked");
    {
        zkr::client setup(options_for(connect));
        setup.wait_connected(15s);
        setup.create_parents(root);
        setup.create(root + "/stock", std::to_string(stock));
    }
    std::vector<std::pair<pid_t, int>> children;
    for (int i = 0; i < workers; ++i) {
        int fds[2];
        if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], STDOUT_FILENO);
            close(fds[0]);
            close(fds[1]);
            execl("/proc/self/exe", "oversell", "--worker", locked ? "locked" : "unlocked", connect.c_str(), root.c_str(),
                  nullptr);
            _exit(127);
        }
        close(fds[1]);
        children.emplace_back(pid, fds[0]);
    }
    outcome result;
    for (auto [pid, fd] : children) {
        char buf[64] = {};
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        int status = 0;
        waitpid(pid, &status, 0);
        if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("a worker failed");
        result.sold += std::atoi(buf);
    }
    zkr::client check(options_for(connect));
    result.stock_left = std::stoi(check.get_data(root + "/stock").data);
    // Leave nothing behind.
    for (const auto& child : check.get_children(root).children) {
        zkr::error_code ec;
        check.remove(root + "/" + child, zkr::any_version, ec);
    }
    zkr::error_code ec;
    check.remove(root, zkr::any_version, ec);
    return result;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 5 && std::string(argv[1]) == "--worker") return run_worker(std::string(argv[2]) == "locked", argv[3], argv[4]);
        if (argc < 2) {
            std::fprintf(stderr, "usage: %s CONNECT [WORKERS] [STOCK]\n", argv[0]);
            return 2;
        }
        std::string connect = argv[1];
        int workers = argc > 2 ? std::atoi(argv[2]) : 4;
        int stock = argc > 3 ? std::atoi(argv[3]) : 20;
        if (workers < 1 || stock < 1) {
            std::fprintf(stderr, "WORKERS and STOCK must be positive\n");
            return 2;
        }
        std::cout << workers << " worker processes sell from a stock of " << stock << " items kept in ZooKeeper.\n\n";

        outcome unlocked = run_sale(false, connect, workers, stock);
        std::cout << "Without a lock:    sold " << unlocked.sold << " of " << stock << " items"
                  << (unlocked.sold > stock ? "  <- OVERSOLD by " + std::to_string(unlocked.sold - stock) : std::string())
                  << "\n";

        outcome locked = run_sale(true, connect, workers, stock);
        std::cout << "With zkr::mutex:   sold " << locked.sold << " of " << stock << " items"
                  << (locked.sold == stock ? "  <- exact" : "  <- WRONG") << ", stock left " << locked.stock_left << "\n";
        return locked.sold == stock && locked.stock_left == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "oversell: %s\n", e.what());
        return 1;
    }
}
