// metrics_service — a service whose zkr locks Prometheus can see: zkr::metrics as the clients'
// observer, served on /metrics by prometheus-cpp's exposer beside the service's own metrics.
//
//   metrics_service [CONNECT] [--port P] [--seconds S] [--check]
//
// Four workers take turns on one zkr::mutex (an order's stock, as in the README) and count their
// sales in a metric of the service's own. Scrape http://localhost:P/metrics (default 9464) to see
// zkr_lock_acquire_seconds, zkr_lock_hold_seconds, zkr_requests_total... beside orders_sold_total.
// --seconds: stops selling after S seconds (default: never). --check: sells 40 orders, scrapes its own /metrics once (port 0: any free port), checks that zkr's
// numbers are there and add up, and exits (0 if they do); this is how ctest runs it.
#include <zkr/metrics.hpp>
#include <zkr/mutex.hpp>
#include <zkr/prometheus.hpp>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

// GET /metrics from this process's exposer, the way a Prometheus server would.
std::string scrape(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("cannot reach /metrics");
    timeval timeout{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    ::send(fd, request.data(), request.size(), 0);
    std::string reply;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    return reply;
}

// The value of the sample line that starts with `prefix` (-1 if none).
double sample(const std::string& text, const std::string& prefix) {
    auto at = text.find("\n" + prefix);
    if (at == std::string::npos) return -1;
    auto line_end = text.find('\n', at + 1);
    auto line = text.substr(at + 1, line_end - at - 1);
    return std::stod(line.substr(line.rfind(' ') + 1));
}

}  // namespace

int main(int argc, char** argv) try {
    std::string connect = std::getenv("ZK_CONNECT") ? std::getenv("ZK_CONNECT") : "127.0.0.1:2181";
    int port = 9464;
    bool check = false;
    double seconds = 0;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--check") check = true;
        else if (a == "--port" && i + 1 < argc) port = std::stoi(argv[++i]);
        else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
        else connect = a;
    }
    if (check) port = 0;

    // zkr's metrics: one zkr::metrics, the observer of every client of the service.
    auto metrics = std::make_shared<zkr::metrics>();
    zkr::client_options options;
    options.connect = connect;
    options.observer = metrics;
    zkr::client client(options);
    client.wait_connected(15s);

    // The service's own metrics, and zkr's beside them, on one endpoint.
    prometheus::Exposer exposer{"127.0.0.1:" + std::to_string(port)};
    auto registry = std::make_shared<prometheus::Registry>();
    auto& sold = prometheus::BuildCounter().Name("orders_sold_total").Help("Orders sold.").Register(*registry).Add({});
    auto zkr_metrics = std::make_shared<zkr::prometheus_collector>(metrics);
    exposer.RegisterCollectable(registry);
    exposer.RegisterCollectable(zkr_metrics);  // held weakly by the exposer: zkr_metrics lives as long
    std::cout << "metrics on http://127.0.0.1:" << exposer.GetListeningPorts().front() << "/metrics" << std::endl;

    std::string path = "/examples/metrics-service/stock-" + std::to_string(::getpid());
    const int workers = 4, per_worker = check ? 10 : 1'000'000'000;
    auto stop_at = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                          std::chrono::duration<double>(seconds > 0 ? seconds : 1e9));
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w) {
        pool.emplace_back([&] {
            zkr::mutex stock(client, path);
            for (int i = 0; i < per_worker && std::chrono::steady_clock::now() < stop_at; ++i) {
                std::lock_guard hold(stock);
                sold.Increment();
            }
        });
    }
    for (auto& t : pool) t.join();
    if (!check) return 0;

    client.flush_observer(10s);  // every lock's events have reached the metrics
    auto text = scrape(exposer.GetListeningPorts().front());
    double acquired = sample(text, "zkr_lock_acquire_seconds_count{recipe=\"mutex\",outcome=\"acquired\"}");
    double held = sample(text, "zkr_lock_hold_seconds_count{recipe=\"mutex\"}");
    double own = sample(text, "orders_sold_total");
    double creates = sample(text, "zkr_requests_total{op=\"create\",result=\"ok\"}");
    std::cout << "scraped: " << acquired << " acquisitions, " << held << " holds, " << own << " orders, " << creates
              << " creates" << std::endl;
    int expected = workers * per_worker;
    if (acquired != expected || held != expected || own != expected || creates < expected) {
        std::cerr << "metrics_service: the numbers do not add up; the scrape was:\n" << text << std::endl;
        return 1;
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "metrics_service: " << e.what() << std::endl;
    return 1;
}
