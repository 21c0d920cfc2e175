// tvm/ffi/tvm_ffi.h - accelopt-host's shim (docs/flashinfer.md): everything it provides.
#ifndef ACCELOPT_FIB_TVM_FFI_ALL_H_
#define ACCELOPT_FIB_TVM_FFI_ALL_H_
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#endif
