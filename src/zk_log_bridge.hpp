// Internal: routes the ZooKeeper C client's log lines into zkr's log sink.
#pragma once

namespace zkr::detail {

/// The C client's log callback (set per handle with zoo_set_log_callback).
void forward_c_client_log(const char* message);

/// Applies zkr's log threshold to the C client once per process (its level is global).
void init_c_client_log_level();

}  // namespace zkr::detail
