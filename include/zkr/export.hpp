#pragma once
// zkr's shared library exports only its public API (it is built with hidden visibility):
// ZKR_EXPORT marks each class and function of the API that the library defines.

#if defined(_WIN32)
#define ZKR_EXPORT
#elif defined(__GNUC__) || defined(__clang__)
#define ZKR_EXPORT __attribute__((visibility("default")))
#else
#define ZKR_EXPORT
#endif
