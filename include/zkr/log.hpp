/// \file
/// One log sink for zkr and the ZooKeeper C client under it.
#pragma once
#include "zkr/export.hpp"

#include <functional>
#include <string_view>

/// One log sink for zkr's own lines and the ZooKeeper C client's: set_sink(), set_threshold().
namespace zkr::log {

/// How serious a line is, least first.
enum class level { debug, info, warning, error };

/// Receives every log line at or above the threshold. It is called from one zkr thread,
/// one line at a time, never from the ZooKeeper C client's threads; keep it short.
using sink = std::function<void(level, std::string_view message)>;

/// Replaces the sink (an empty function restores the default: warnings and errors to stderr).
ZKR_EXPORT void set_sink(sink s);

/// Lines below this level are dropped before they reach the sink (default: warning).
/// Also sets the ZooKeeper C client's own log level.
ZKR_EXPORT void set_threshold(level threshold);
/// The current threshold.
ZKR_EXPORT level threshold() noexcept;

/// Queues a line for the sink, unless it is below the threshold (thread-safe, never blocks on the
/// sink; a full queue drops the line and counts it).
ZKR_EXPORT void write(level l, std::string_view message);

/// Blocks until every line queued so far has reached the sink.
ZKR_EXPORT void flush();

/// The level's name ("debug", "info", "warning", "error").
ZKR_EXPORT const char* to_string(level l) noexcept;

}  // namespace zkr::log
