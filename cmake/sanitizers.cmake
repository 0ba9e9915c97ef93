# GDR_SANITIZE: build every project target (daemon, client libraries, gdrctl, tests, bench) with
# gcc's sanitizers: "address,undefined" (ASan+LSan+UBSan) or "thread" (TSan); empty is off.
# Any report aborts the process (-fno-sanitize-recover=all) so it cannot scroll by as a warning.
# Debian's gRPC/protobuf/Abseil stay uninstrumented: ASan and UBSan still see every access the
# project's code makes; TSan cannot see Abseil's mutexes (see scripts/sanitize-tests.sh).
set(GDR_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined | thread | empty")
set_property(CACHE GDR_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
if(GDR_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(STATUS "gdrstored: sanitizers through ${CMAKE_CXX_COMPILER_ID}")
  endif()
  string(REPLACE "," ";" gdr_sanitizers "${GDR_SANITIZE}")
  foreach(s IN LISTS gdr_sanitizers)
    if(NOT s MATCHES "^(address|undefined|leak|thread)$")
      message(FATAL_ERROR "GDR_SANITIZE: unknown sanitizer '${s}'")
    endif()
  endforeach()
  if("thread" IN_LIST gdr_sanitizers AND ("address" IN_LIST gdr_sanitizers OR
                                          "leak" IN_LIST gdr_sanitizers))
    message(FATAL_ERROR "GDR_SANITIZE: thread cannot be combined with address or leak")
  endif()
  add_compile_options(-fsanitize=${GDR_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${GDR_SANITIZE})
  # For code that has to know it runs instrumented (nothing does yet). The integration harness
  # does not need it: it hands every child a sanitizer log_path either way.
  add_compile_definitions(GDR_SANITIZE="${GDR_SANITIZE}")
  message(STATUS "gdrstored: sanitizers=${GDR_SANITIZE}")
endif()
