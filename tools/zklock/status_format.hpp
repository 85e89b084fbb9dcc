// A lock queue, or a semaphore's leases, shown to people (a table) or to programs (JSON).
#pragma once

#include "queue_status.hpp"
#include "semaphore_status.hpp"

#include <string>

namespace zklock {

/// Header line, then one row per node: state, role, sequence, session, age, owner, node; and a
/// note when nodes of several recipes (separate locks) share the path. Text from ZooKeeper is
/// escaped: one line per node, nothing a terminal would act on (see 'zklock status --help').
std::string format_text(const queue_snapshot& snapshot);

/// One JSON object on one line: {"path", "exists", "holders", "waiters", "recipes", "nodes": [...]}.
std::string format_json(const queue_snapshot& snapshot);

/// "PATH: semaphore, K of N leases held, W waiting" (K leases held without --max), then one row
/// per lease node: state (holds, or waits: made by the waiting acquirer), sequence, session,
/// age, owner, node.
std::string format_text(const semaphore_snapshot& snapshot);

/// One JSON object on one line: {"path", "exists", "semaphore": true, "leases", "max", "waiting",
/// "nodes": [...]}.
std::string format_json(const semaphore_snapshot& snapshot);

/// Text from ZooKeeper for a terminal, on one line: quotes, backslashes and control characters
/// escaped, and every character a terminal would act on (see 'zklock status --help').
std::string terminal_safe(std::string_view text);

/// "0x1000a3b2c0004": session ids as ZooKeeper prints them.
std::string format_session_id(std::int64_t session);

/// A string as a JSON string literal, quotes included. Bytes that are not well-formed UTF-8
/// (overlong forms and surrogates included) come out as \u00XX (their Latin-1 reading), so the
/// output is valid JSON, and valid UTF-8, whatever the bytes.
std::string json_string(std::string_view text);

}  // namespace zklock
