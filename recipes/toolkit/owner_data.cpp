#include "owner_data.hpp"

#include <charconv>

#include <sys/syscall.h>
#include <unistd.h>

namespace zkr::detail {
namespace {

constexpr std::string_view prefix = "zkr:1;";

std::string sanitize(std::string_view host) {
    std::string out(host);
    for (char& c : out) {
        if (c == ';' || c == '=') c = '_';
    }
    return out;
}

std::int64_t int64_or_zero(std::string_view s) {
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    return ec == std::errc() && end == s.data() + s.size() ? value : 0;
}

}  // namespace

std::string encode_owner(std::string_view host, std::int64_t pid, std::int64_t thread, bool async) {
    return std::string(prefix) + "host=" + sanitize(host) + ";pid=" + std::to_string(pid) +
           ";thread=" + std::to_string(thread) + (async ? ";async=1" : "");
}

lock_owner decode_owner(std::string_view data) {
    lock_owner owner;
    owner.raw = std::string(data);
    if (data.substr(0, prefix.size()) != prefix) return owner;
    lock_owner parsed = owner;
    std::string_view rest = data.substr(prefix.size());
    while (!rest.empty()) {
        std::size_t end = rest.find(';');
        std::string_view field = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        std::size_t eq = field.find('=');
        if (eq == std::string_view::npos) return owner;
        std::string_view key = field.substr(0, eq), value = field.substr(eq + 1);
        if (key == "host") parsed.host = std::string(value);
        else if (key == "pid") parsed.pid = int64_or_zero(value);
        else if (key == "thread") parsed.thread = int64_or_zero(value);
        else if (key == "async") parsed.async = value == "1";
        // Unknown keys are for later versions: skip them.
    }
    return parsed.pid != 0 ? parsed : owner;
}

std::string holding_mark(std::string_view owner_data) { return std::string(owner_data) + ";held=1"; }

bool is_zkr_owner_data(std::string_view data) { return data.substr(0, prefix.size()) == prefix; }

bool is_marked_holding(std::string_view data) {
    if (data.substr(0, prefix.size()) != prefix) return false;
    constexpr std::string_view mark = ";held=1";
    return data.size() >= mark.size() && data.substr(data.size() - mark.size()) == mark;
}

std::string current_owner_data(bool async) {
    static const std::string host = [] {
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        return std::string(name);
    }();
    thread_local const std::string blocking =
        encode_owner(host, static_cast<std::int64_t>(getpid()), static_cast<std::int64_t>(syscall(SYS_gettid)), false);
    thread_local const std::string async_data =
        encode_owner(host, static_cast<std::int64_t>(getpid()), static_cast<std::int64_t>(syscall(SYS_gettid)), true);
    return async ? async_data : blocking;
}

}  // namespace zkr::detail
