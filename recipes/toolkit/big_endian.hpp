// The counters' wire format (Curator's DistributedAtomicLong and -Integer, SharedCount): a
// two's-complement integer, big-endian, 8 or 4 bytes; no data at all reads as 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zkr::detail {

template <class Int>
std::string encode_big_endian(Int value) {
    using U = std::make_unsigned_t<Int>;
    auto u = static_cast<U>(value);
    std::string out(sizeof(Int), '\0');
    for (std::size_t i = 0; i < sizeof(Int); ++i) out[sizeof(Int) - 1 - i] = static_cast<char>((u >> (8 * i)) & 0xff);
    return out;
}

/// The value, or nullopt when `data` is neither empty nor exactly sizeof(Int) bytes long.
template <class Int>
std::optional<Int> decode_big_endian(std::string_view data) {
    if (data.empty()) return Int{0};
    if (data.size() != sizeof(Int)) return std::nullopt;
    std::make_unsigned_t<Int> u = 0;
    for (unsigned char c : data) u = static_cast<std::make_unsigned_t<Int>>((u << 8) | c);
    return static_cast<Int>(u);
}

}  // namespace zkr::detail
