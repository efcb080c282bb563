// WALCUT_ASSERT(condition, message): an internal invariant, checked in every
// build type (NDEBUG does not switch it off, unlike assert). It guards state
// the code itself maintains (a transaction's state in the simulated runtime, a
// scheduler slot), where a wrong state would otherwise go unnoticed and
// produce wrong output. Bad input is never asserted: it is a Status.
//
// A failure is a bug in walcut: it writes "FILE:LINE: internal error:
// CONDITION: MESSAGE" to stderr and aborts. This is the one place library code
// writes to stderr; there is no caller left to return an error to that could
// trust the state.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace walfmt {

[[noreturn, gnu::cold]] inline void AssertionFailed(const char* file, int line, const char* condition,
                                                    const char* message) {
  std::fprintf(stderr, "%s:%d: internal error: %s: %s\n", file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace walfmt

#define WALCUT_ASSERT(condition, message)            \
  (__builtin_expect(static_cast<bool>(condition), 1) \
       ? static_cast<void>(0)                        \
       : ::walfmt::AssertionFailed(__FILE__, __LINE__, #condition, (message)))
