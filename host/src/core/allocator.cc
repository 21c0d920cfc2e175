#include "core/allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace accelopt {

void TuneAllocatorForArrays() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
#endif
}

}  // namespace accelopt
