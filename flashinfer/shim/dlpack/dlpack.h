/* dlpack/dlpack.h - the DLPack tensor structs FIB's tvm-ffi solutions see
 * (accelopt-host's shim, docs/flashinfer.md; layout as DLPack 0.8's
 * unversioned DLTensor). */
#ifndef ACCELOPT_FIB_DLPACK_H_
#define ACCELOPT_FIB_DLPACK_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;

typedef struct {
  int32_t device_type; /* DLDeviceType */
  int32_t device_id;
} DLDevice;

typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6, kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12, kDLFloat4_e2m1fn = 17 } DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

#ifdef __cplusplus
}
#endif
#endif /* ACCELOPT_FIB_DLPACK_H_ */
