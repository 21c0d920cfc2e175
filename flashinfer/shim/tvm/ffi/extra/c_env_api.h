/* tvm/ffi/extra/c_env_api.h - accelopt-host's shim of tvm-ffi's environment
 * API (docs/flashinfer.md): TVMFFIEnvGetStream returns the stream the runner
 * set for this call (accelopt_fib_set_stream), which is what FIB's
 * solutions launch their kernels on. */
#ifndef ACCELOPT_FIB_TVM_FFI_C_ENV_API_H_
#define ACCELOPT_FIB_TVM_FFI_C_ENV_API_H_

#include <stdint.h>

#ifdef __cplusplus
namespace accelopt_fib_shim {
inline void*& StreamSlot() {
  static void* stream = nullptr;
  return stream;
}
}  // namespace accelopt_fib_shim

/* The runner calls this before every call; one definition per library (weak). */
extern "C" __attribute__((weak, visibility("default"))) void accelopt_fib_set_stream(void* stream) {
  accelopt_fib_shim::StreamSlot() = stream;
}

inline void* TVMFFIEnvGetStream(int32_t device_type, int32_t device_id) {
  (void)device_type;
  (void)device_id;
  return accelopt_fib_shim::StreamSlot();
}
#endif

#endif /* ACCELOPT_FIB_TVM_FFI_C_ENV_API_H_ */
