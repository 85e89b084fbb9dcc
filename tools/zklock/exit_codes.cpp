#include "exit_codes.hpp"

namespace zklock {

const char* exit_code_table() noexcept {
    return "  0        success (run: the command's own status, whatever it is)\n"
           "  1        release-stale: refused without --yes (it listed what it would remove)\n"
           "  64       usage: bad arguments, lock path or connect string\n"
           "  69       unavailable: the ensemble could not be reached, or the connection was lost\n"
           "  70       run: the lock (or lease) was lost while the command ran (the command was\n"
           "           signalled)\n"
           "  71       an operating-system or unexpected error\n"
           "  75       run: the lock (or lease) was not acquired within --timeout (with 0: it was not\n"
           "           free)\n"
           "  77       ZooKeeper refused: authentication failed, or no permission on the path\n"
           "  126, 127 run: the command could not be executed / was not found\n"
           "  128+N    run: the command died of signal N, or zklock was interrupted by signal N\n"
           "           while it waited\n"
           "run passes its command's status through: a command that exits 69 looks like zklock's 69.\n";
}

}  // namespace zklock
