// What the benchmark drivers share (zkr_bench, zkr_cache_bench, zkr_coordination_bench,
// zkr_observer_bench): the servers' counters read through the test kit's four-letter words,
// percentiles, and the client settings every driver uses. The Python runners share
// bench/bench_common.py.
#pragma once

#include <zkr/client.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace zkr::bench {

/// The host:port of every server of a connect string (its chroot dropped). Throws
/// std::invalid_argument when it names none.
std::vector<std::string> servers_of(const std::string& connect);

/// The answer of `server` ("host:port") to a four-letter word (the test kit's
/// four_letter_word). Throws std::runtime_error when the server does not answer.
std::string four_letter(const std::string& server, const std::string& word);

/// One numeric mntr value of one server ("host:port"). Throws std::runtime_error when the server
/// does not answer or has no such key.
std::int64_t mntr_value(const std::string& server, const std::string& key);

/// One mntr value summed over every server of a connect string: a request sent to a follower is
/// counted there, not again on the leader it is forwarded to.
std::int64_t mntr_sum(const std::string& connect, const std::string& key);

/// Requests the servers of `connect` have received so far (mntr zk_packets_received, every
/// session's, summed).
inline std::int64_t server_packets(const std::string& connect) { return mntr_sum(connect, "zk_packets_received"); }

/// Sessions watching `path` on the first server of `connect` (wchp lists each watched path,
/// then its sessions indented).
int watchers_of(const std::string& connect, const std::string& path);

/// The nearest-rank percentile `q` (0..1) of `xs`; 0 for none.
template <class T>
double percentile(std::vector<T> xs, double q) {
    if (xs.empty()) return 0;
    std::sort(xs.begin(), xs.end());
    auto i = static_cast<std::size_t>(q * static_cast<double>(xs.size() - 1) + 0.5);
    return static_cast<double>(xs[std::min(i, xs.size() - 1)]);
}

/// The client settings of every driver: `connect`, a 10 s session (Curator's drivers use the same).
zkr::client_options client_options(const std::string& connect);

}  // namespace zkr::bench
