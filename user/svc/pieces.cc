#include "svc/pieces.hpp"

#include <unistd.h>

namespace mrc::svc {

size_t page_size() {
  static const size_t p = [] {
    const long v = ::sysconf(_SC_PAGESIZE);
    return v > 0 ? size_t(v) : size_t(4096);
  }();
  return p;
}

}  // namespace mrc::svc
