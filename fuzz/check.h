// The fuzz targets' assertion: a property that does not hold prints one line
// and aborts, which libFuzzer reports as a crash (the input is kept in the
// artifacts directory). scripts/fuzz.sh greps for "invariant violated".
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace walcut_fuzz {

[[noreturn]] inline void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz: invariant violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace walcut_fuzz

#define Check(cond, detail)                            \
  do {                                                 \
    if (!(cond)) ::walcut_fuzz::Fail(#cond, (detail)); \
  } while (0)
