# GDR_FUZZ=ON: the libFuzzer targets of tests/fuzz (scripts/fuzz-smoke.sh configures it in
# build-fuzz). Every library is compiled with AddressSanitizer, UndefinedBehaviorSanitizer and
# libFuzzer's coverage hooks, so the fuzzers see into the project code they call; only the
# fuzzer executables link libFuzzer's main (tests/fuzz/CMakeLists.txt). Included before the
# source folders so that the flags reach all of them.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "GDR_FUZZ=ON needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
          "configure a separate tree with -DCMAKE_C_COMPILER=clang-14 "
          "-DCMAKE_CXX_COMPILER=clang++-14 (scripts/fuzz-smoke.sh does)")
endif()
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=fuzzer")
check_cxx_source_compiles("
  #include <cstddef>
  #include <cstdint>
  extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }"
  GDR_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NOT GDR_HAVE_LIBFUZZER)
  message(FATAL_ERROR "GDR_FUZZ=ON: ${CMAKE_CXX_COMPILER} cannot link -fsanitize=fuzzer "
          "(apt-get install libfuzzer-14-dev)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)
