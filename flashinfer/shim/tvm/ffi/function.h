// tvm/ffi/function.h - accelopt-host's shim of tvm-ffi's typed-function
// export (docs/flashinfer.md). TVM_FFI_DLL_EXPORT_TYPED_FUNC(name, fn)
// exports the C symbol `accelopt_fib_export_<name>`:
//
//   int accelopt_fib_export_<name>(const AccelFibArg* args, int32_t num_args,
//                                  char* error, size_t error_size);
//
// which converts each argument to the parameter type of `fn` (TensorView;
// integers, floating point and bool from scalar arguments), calls it and
// returns 0, or returns -1 with the exception's message in `error`. Only the
// host's runner (accelopt-fib-cuda-run) calls it.
#ifndef ACCELOPT_FIB_TVM_FFI_FUNCTION_H_
#define ACCELOPT_FIB_TVM_FFI_FUNCTION_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>

extern "C" {
/// One argument from the runner: a tensor (kind 0) or a scalar (1: int64, 2: double, 3: bool).
typedef struct {
  int32_t kind;
  const DLTensor* tensor;
  int64_t i;
  double d;
} AccelFibArg;
}

namespace accelopt_fib_shim {

template <class T>
T Convert(const AccelFibArg& arg, int index) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, tvm::ffi::TensorView>) {
    if (arg.kind != 0) TVM_FFI_THROW(TypeError) << "argument " << index << " must be a tensor";
    return tvm::ffi::TensorView(arg.tensor);
  } else if constexpr (std::is_same_v<U, bool>) {
    return arg.kind == 2 ? arg.d != 0 : arg.i != 0;
  } else if constexpr (std::is_integral_v<U>) {
    if (arg.kind == 0) TVM_FFI_THROW(TypeError) << "argument " << index << " must be a scalar";
    return static_cast<U>(arg.kind == 2 ? static_cast<int64_t>(arg.d) : arg.i);
  } else if constexpr (std::is_floating_point_v<U>) {
    if (arg.kind == 0) TVM_FFI_THROW(TypeError) << "argument " << index << " must be a scalar";
    return static_cast<U>(arg.kind == 2 ? arg.d : static_cast<double>(arg.i));
  } else {
    static_assert(sizeof(U) == 0, "accelopt-host's tvm-ffi shim passes TensorView, integers, floats and bool only");
  }
}

template <class R, class... Args, size_t... I>
void CallWith(R (*fn)(Args...), const AccelFibArg* args, std::index_sequence<I...>) {
  fn(Convert<Args>(args[I], static_cast<int>(I))...);
}

template <class R, class... Args>
int Invoke(R (*fn)(Args...), const AccelFibArg* args, int32_t num_args, char* error, size_t error_size) {
  try {
    if (num_args != static_cast<int32_t>(sizeof...(Args)))
      TVM_FFI_THROW(TypeError) << "expects " << sizeof...(Args) << " arguments, got " << num_args;
    CallWith(fn, args, std::index_sequence_for<Args...>{});
    return 0;
  } catch (const std::exception& e) {
    if (error && error_size) {
      std::strncpy(error, e.what(), error_size - 1);
      error[error_size - 1] = '\0';
    }
    return -1;
  }
}

}  // namespace accelopt_fib_shim

#define TVM_FFI_DLL_EXPORT_TYPED_FUNC(ExportName, Function)                                                  \
  extern "C" __attribute__((visibility("default"))) int accelopt_fib_export_##ExportName(                      \
      const AccelFibArg* args, int32_t num_args, char* error, size_t error_size) {                             \
    return ::accelopt_fib_shim::Invoke(&Function, args, num_args, error, error_size);                          \
  }

#endif  // ACCELOPT_FIB_TVM_FFI_FUNCTION_H_
