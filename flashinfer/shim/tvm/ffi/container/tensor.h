// tvm/ffi/container/tensor.h - accelopt-host's shim of tvm-ffi's TensorView
// for FIB's `cuda`/`cpp` solutions with binding tvm-ffi (docs/flashinfer.md).
// Only what those solutions use: a non-owning view of a DLTensor.
#ifndef ACCELOPT_FIB_TVM_FFI_TENSOR_H_
#define ACCELOPT_FIB_TVM_FFI_TENSOR_H_

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>

#include <tvm/ffi/error.h>

namespace tvm {
namespace ffi {

/// The dims (or strides) of a tensor, indexable like tvm-ffi's ShapeView.
class ShapeView {
 public:
  ShapeView(const int64_t* data, int32_t size) : data_(data), size_(size) {}
  int64_t operator[](int64_t i) const { return data_[i]; }
  int64_t at(int64_t i) const {
    if (i < 0) i += size_;
    TVM_FFI_ICHECK(i >= 0 && i < size_) << "index out of range";
    return data_[i];
  }
  int64_t size() const { return size_; }
  const int64_t* data() const { return data_; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t Product() const {
    int64_t p = 1;
    for (int32_t i = 0; i < size_; ++i) p *= data_[i];
    return p;
  }

 private:
  const int64_t* data_;
  int32_t size_;
};

/// A non-owning view of one argument tensor (device memory on CUDA).
class TensorView {
 public:
  TensorView() = default;
  explicit TensorView(const DLTensor* tensor) : t_(tensor) {}
  void* data_ptr() const { return static_cast<char*>(t_->data) + t_->byte_offset; }
  int32_t ndim() const { return t_->ndim; }
  ShapeView shape() const { return ShapeView(t_->shape, t_->ndim); }
  ShapeView strides() const { return ShapeView(t_->strides ? t_->strides : Compact(), t_->ndim); }
  int64_t size(int64_t i) const { return shape().at(i); }
  int64_t stride(int64_t i) const { return strides().at(i); }
  int64_t numel() const { return shape().Product(); }
  DLDataType dtype() const { return t_->dtype; }
  DLDevice device() const { return t_->device; }
  const DLTensor* operator->() const { return t_; }
  const DLTensor* GetDLTensorPtr() const { return t_; }
  bool IsContiguous() const {
    if (t_->strides == nullptr) return true;
    int64_t expected = 1;
    for (int32_t i = t_->ndim - 1; i >= 0; --i) {
      if (t_->shape[i] != 1 && t_->strides[i] != expected) return false;
      expected *= t_->shape[i];
    }
    return true;
  }

 private:
  const int64_t* Compact() const {
    static thread_local int64_t strides[16];
    int64_t s = 1;
    for (int32_t i = t_->ndim - 1; i >= 0 && i < 16; --i) {
      strides[i] = s;
      s *= t_->shape[i];
    }
    return strides;
  }
  const DLTensor* t_ = nullptr;
};

/// tvm-ffi's owning Tensor is not provided; the view is all a kernel argument needs.
using Tensor = TensorView;

}  // namespace ffi
}  // namespace tvm

#endif  // ACCELOPT_FIB_TVM_FFI_TENSOR_H_
