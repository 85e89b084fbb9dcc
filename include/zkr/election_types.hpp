/// \file
/// What zkr's election recipes report about themselves and their participants.
#pragma once

#include <string>

namespace zkr {

/// One participant of an election, as its node says.
struct election_participant {
    std::string id;       ///< the participant's id: its node's data
    std::string node;     ///< its node's name
    bool leader = false;  ///< first in the queue: it leads
};

/// What closing an election participant tells its listeners (Curator's CloseMode).
enum class close_mode {
    silent,         ///< nothing: the leader's on_not_leader does not run
    notify_leader,  ///< on_not_leader runs if it was leading
};

}  // namespace zkr
