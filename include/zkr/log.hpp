// One log sink for zkr and the ZooKeeper C client under it.
#pragma once

#include <functional>
#include <string_view>

namespace zkr::log {

enum class level { debug, info, warning, error };

/// Receives every log line at or above the threshold. It is called from one zkr thread,
/// one line at a time, never from the ZooKeeper C client's threads; keep it short.
using sink = std::function<void(level, std::string_view message)>;

/// Replaces the sink (an empty function restores the default: warnings and errors to stderr).
void set_sink(sink s);

/// Lines below this level are dropped before they reach the sink (default: warning).
/// Also sets the ZooKeeper C client's own log level.
void set_threshold(level threshold);
level threshold() noexcept;

/// Queues a line for the sink (thread-safe, never blocks on the sink).
void write(level l, std::string_view message);

/// Blocks until every line queued so far has reached the sink.
void flush();

const char* to_string(level l) noexcept;

}  // namespace zkr::log
