// The one assertion of the fuzz targets: a property that does not hold aborts, which libFuzzer
// reports as a crash and saves the input as a reproducer. Unlike assert() it survives NDEBUG.
#pragma once

#include <cstdio>
#include <cstdlib>

#define GDR_FUZZ_CHECK(cond)                                                        \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                          \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
