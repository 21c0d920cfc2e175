// tvm/ffi/error.h - accelopt-host's shim of tvm-ffi's checks and errors
// (docs/flashinfer.md): TVM_FFI_ICHECK(cond) << "message" and
// TVM_FFI_THROW(Kind) << "message" throw tvm::ffi::Error, which the exported
// entry point turns into an error message for the runner.
#ifndef ACCELOPT_FIB_TVM_FFI_ERROR_H_
#define ACCELOPT_FIB_TVM_FFI_ERROR_H_

#include <sstream>
#include <stdexcept>
#include <string>

namespace tvm {
namespace ffi {

class Error : public std::runtime_error {
 public:
  Error(const std::string& kind, const std::string& message) : std::runtime_error(kind + ": " + message) {}
};

namespace details {
/// Collects `<< message` and throws when it goes out of scope.
class ErrorBuilder {
 public:
  ErrorBuilder(const char* kind, const char* file, int line) : kind_(kind) { stream_ << file << ":" << line << ": "; }
  ~ErrorBuilder() noexcept(false) { throw Error(kind_, stream_.str()); }
  template <class T>
  ErrorBuilder& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::string kind_;
  std::ostringstream stream_;
};
struct Voidify {
  void operator&(ErrorBuilder&) {}
};
}  // namespace details

}  // namespace ffi
}  // namespace tvm

#define TVM_FFI_THROW(ErrorKind) ::tvm::ffi::details::ErrorBuilder(#ErrorKind, __FILE__, __LINE__)
#define TVM_FFI_ICHECK(cond) \
  (cond) ? (void)0 : ::tvm::ffi::details::Voidify() & ::tvm::ffi::details::ErrorBuilder("InternalError", __FILE__, __LINE__) << "Check failed: " #cond " "
#define TVM_FFI_CHECK(cond, ErrorKind) \
  (cond) ? (void)0 : ::tvm::ffi::details::Voidify() & ::tvm::ffi::details::ErrorBuilder(#ErrorKind, __FILE__, __LINE__) << "Check failed: " #cond " "
#define TVM_FFI_ICHECK_EQ(a, b) TVM_FFI_ICHECK((a) == (b))
#define TVM_FFI_ICHECK_NE(a, b) TVM_FFI_ICHECK((a) != (b))
#define TVM_FFI_ICHECK_LT(a, b) TVM_FFI_ICHECK((a) < (b))
#define TVM_FFI_ICHECK_LE(a, b) TVM_FFI_ICHECK((a) <= (b))
#define TVM_FFI_ICHECK_GT(a, b) TVM_FFI_ICHECK((a) > (b))
#define TVM_FFI_ICHECK_GE(a, b) TVM_FFI_ICHECK((a) >= (b))

#endif  // ACCELOPT_FIB_TVM_FFI_ERROR_H_
