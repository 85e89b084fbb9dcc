#pragma once
// zkr::testkit's shared library exports only its API (it is built with hidden visibility):
// ZKR_TESTKIT_EXPORT marks each class and function it defines.

#if defined(_WIN32)
#define ZKR_TESTKIT_EXPORT
#elif defined(__GNUC__) || defined(__clang__)
#define ZKR_TESTKIT_EXPORT __attribute__((visibility("default")))
#else
#define ZKR_TESTKIT_EXPORT
#endif
