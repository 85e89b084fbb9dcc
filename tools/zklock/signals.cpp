#include "signals.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

namespace zklock {
namespace {

constexpr std::pair<std::string_view, int> known_signals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH},
};

sigset_t make_handled_set() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, s);
    return set;
}

sigset_t started_with = [] {
    sigset_t set;
    sigemptyset(&set);
    return set;
}();

}  // namespace

const sigset_t& handled_signals() {
    static const sigset_t set = make_handled_set();
    return set;
}

void block_handled_signals() { pthread_sigmask(SIG_BLOCK, &handled_signals(), &started_with); }

const sigset_t& original_signal_mask() { return started_with; }

std::optional<int> parse_signal(std::string_view text) {
    int number = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (ec == std::errc() && end == text.data() + text.size()) {
        if (number > 0 && number < NSIG) return number;
        return std::nullopt;
    }
    std::string name(text);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
    if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
    for (const auto& [known, value] : known_signals) {
        if (name == known) return value;
    }
    return std::nullopt;
}

std::string signal_name(int signal_number) {
    for (const auto& [known, value] : known_signals) {
        if (value == signal_number) return "SIG" + std::string(known);
    }
    return "signal " + std::to_string(signal_number);
}

}  // namespace zklock
