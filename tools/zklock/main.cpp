// zklock — ZooKeeper locks from the command line: run a command under a lock (like flock(1)),
// show a lock's queue, watch it, and release a hung session's nodes. See README.md.
#include "command_process.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "options.hpp"
#include "session.hpp"
#include "signals.hpp"

#include <zkr/error.hpp>

#include <exception>
#include <stdexcept>
#include <iostream>
#include <type_traits>
#include <variant>

int main(int argc, char** argv) {
    using namespace zklock;
    // Before zkr starts any thread: every thread then leaves these signals to the event loop.
    block_handled_signals();
    remember_inherited_descriptors();
    try {
        auto command = parse_command_line(argc, argv);
        return std::visit(
            [](const auto& o) -> int {
                using options = std::decay_t<decltype(o)>;
                if constexpr (std::is_same_v<options, print_and_exit>) {
                    std::cout << o.text << std::flush;
                    return to_int(exit_code::success);
                } else if constexpr (std::is_same_v<options, run_options>) {
                    return run_command(o);
                } else if constexpr (std::is_same_v<options, status_options>) {
                    return status_command(o);
                } else if constexpr (std::is_same_v<options, watch_options>) {
                    return watch_command(o);
                } else if constexpr (std::is_same_v<options, tree_options>) {
                    return tree_command(o);
                } else {
                    return release_stale_command(o);
                }
            },
            command);
    } catch (const failure& e) {
        std::cerr << "zklock: " << e.what() << std::endl;
        return e.code();
    } catch (const zkr::system_error& e) {
        std::cerr << "zklock: " << e.what() << std::endl;
        return to_int(exit_code_for(e.code()));
    } catch (const std::invalid_argument& e) {
        // The library refused the input (a lock path under /zookeeper, or too long): a usage error.
        std::cerr << "zklock: " << e.what() << std::endl;
        return to_int(exit_code::usage);
    } catch (const std::exception& e) {
        std::cerr << "zklock: unexpected error: " << e.what() << std::endl;
        return to_int(exit_code::internal);
    }
}
