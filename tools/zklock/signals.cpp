#include "signals.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <tuple>
#include <utility>

#include <pthread.h>

namespace zklock {
namespace {

constexpr std::pair<std::string_view, int> known_signals[] = {
    {"HUP", SIGHUP},     {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},       {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT},   {"BUS", SIGBUS},   {"FPE", SIGFPE},     {"KILL", SIGKILL},     {"USR1", SIGUSR1},
    {"SEGV", SIGSEGV},   {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},   {"ALRM", SIGALRM},     {"TERM", SIGTERM},
    {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},     {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN},   {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},       {"PWR", SIGPWR},
    {"SYS", SIGSYS},
};

// The catchable signals whose default action ends the process, but for the ones zklock gets
// for its own doing (see handled_signals()).
constexpr int forwarded_standard_signals[] = {SIGHUP,    SIGINT,  SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,  SIGALRM,
                                              SIGVTALRM, SIGPROF, SIGIO,   SIGPWR,  SIGSTKFLT};

sigset_t make_handled_set() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : forwarded_standard_signals) sigaddset(&set, s);
    for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) sigaddset(&set, s);
    sigaddset(&set, SIGTSTP);
    sigaddset(&set, SIGCHLD);
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

void block_handled_signals() {
    sigset_t blocked = handled_signals();
    sigaddset(&blocked, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &blocked, &started_with);
}

const sigset_t& original_signal_mask() { return started_with; }

void stop_self(int signal_number) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal_number);
    // One already pending (sent to the process while blocked) would stop us a second time as
    // soon as it is unblocked: it is this same request.
    timespec no_wait{};
    while (sigtimedwait(&one, nullptr, &no_wait) == signal_number) {}
    sigset_t previous;
    pthread_sigmask(SIG_UNBLOCK, &one, &previous);
    raise(signal_number);  // to this thread, which has it unblocked: stopped before raise returns
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

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
    // Real-time signals: RTMIN, RTMIN+k, RTMAX-k.
    for (auto [prefix, base, direction] : {std::tuple{"RTMIN", static_cast<int>(SIGRTMIN), 1},
                                           std::tuple{"RTMAX", static_cast<int>(SIGRTMAX), -1}}) {
        std::string_view rest(name);
        if (rest.substr(0, 5) != prefix) continue;
        rest.remove_prefix(5);
        int offset = 0;
        if (!rest.empty()) {
            if (rest.front() != (direction > 0 ? '+' : '-')) return std::nullopt;
            rest.remove_prefix(1);
            auto [at, error] = std::from_chars(rest.data(), rest.data() + rest.size(), offset);
            if (error != std::errc() || at != rest.data() + rest.size()) return std::nullopt;
        }
        int value = base + direction * offset;
        if (value < SIGRTMIN || value > SIGRTMAX) return std::nullopt;
        return value;
    }
    return std::nullopt;
}

std::string signal_name(int signal_number) {
    for (const auto& [known, value] : known_signals) {
        if (value == signal_number) return "SIG" + std::string(known);
    }
    if (signal_number == SIGRTMIN) return "SIGRTMIN";
    if (signal_number > SIGRTMIN && signal_number <= SIGRTMAX)
        return "SIGRTMIN+" + std::to_string(signal_number - SIGRTMIN);
    return "signal " + std::to_string(signal_number);
}

bool is_interruption(int signal_number) { return signal_number == SIGINT || signal_number == SIGTERM || signal_number == SIGHUP; }

}  // namespace zklock
