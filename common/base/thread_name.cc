#include "common/base/thread_name.h"

#include <pthread.h>

#include <cstring>
#include <string>

namespace gdr {

void SetThreadName(const char* name) {
  // pthread_setname_np refuses (ERANGE) rather than cuts a name over 15 characters.
  const std::string cut(name, strnlen(name, 15));
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace gdr
