// tvm/ffi/dtype.h - accelopt-host's shim (docs/flashinfer.md): DLDataType comparisons.
#ifndef ACCELOPT_FIB_TVM_FFI_DTYPE_H_
#define ACCELOPT_FIB_TVM_FFI_DTYPE_H_
#include <dlpack/dlpack.h>
inline bool operator==(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }
inline bool operator!=(DLDataType a, DLDataType b) { return !(a == b); }
#endif
