// allocator.h - glibc malloc settings for array-heavy work.
#pragma once

namespace accelopt {

/// Keeps freed memory of NumPy-sized buffers in the process for reuse.
///
/// By default glibc returns every freed block above its (dynamic) mmap
/// threshold to the kernel, so the next array of that size page-faults all
/// its pages in again, zero-filled. Emulating and judging kernels allocates
/// and frees such arrays per instruction and per candidate: on the 2-core
/// reference machine the host spent about as much system time on those page
/// faults as user time on the work (docs/isolation.md, "Benchmarks"). Sets
/// M_MMAP_THRESHOLD to 32 MiB (glibc's maximum; larger blocks are still
/// mapped and unmapped) and M_TRIM_THRESHOLD to 1 GiB (free heap kept before
/// it is returned). Call once at start-up, before threads exist. No effect
/// with other C libraries.
void TuneAllocatorForArrays();

}  // namespace accelopt
