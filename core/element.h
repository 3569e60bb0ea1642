// Element types in kernels: the C++ type of each DType, the type arithmetic
// is done in (f32 for 16-bit floats, f64 for f64), and dispatch macros that
// instantiate a kernel body once per dtype. Usable from .cc and .cu files.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/dtype.h"
#include "core/half.h"

namespace tandem {

template <class T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};
template <class T>
using acc_t = typename Acc<T>::type;

// Converts any element type to double/float and back. 16-bit floats round to nearest even.
template <class T>
TANDEM_HD inline float to_float(T v) {
  if constexpr (std::is_same_v<T, Half>) return f16_bits_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return bf16_bits_to_float(v.bits);
  else return static_cast<float>(v);
}

template <class T>
TANDEM_HD inline double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<double>(to_float(v));
  else return static_cast<double>(v);
}

template <class T>
TANDEM_HD inline T from_float(float v) {
  if constexpr (std::is_same_v<T, Half>) return Half{float_to_f16_bits(v)};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{float_to_bf16_bits(v)};
  else return static_cast<T>(v);
}

template <class T>
TANDEM_HD inline T from_double(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return from_float<T>(static_cast<float>(v));
  else return static_cast<T>(v);
}

// Arithmetic-type round trip used by kernels: load to acc_t<T>, store from acc_t<T>.
template <class T>
TANDEM_HD inline acc_t<T> load(T v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return to_float(v);
}
template <class T>
TANDEM_HD inline T store(acc_t<T> v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else return from_float<T>(v);
}

}  // namespace tandem

#define TANDEM_DTYPE_CASE(DT, CT, ...) \
  case ::tandem::DType::DT: {          \
    using scalar_t = CT;               \
    __VA_ARGS__();                     \
    break;                             \
  }

// TANDEM_DISPATCH_FLOAT(dtype, "op", [&] { ... scalar_t ... }) for f32, f64, f16, bf16.
#define TANDEM_DISPATCH_FLOAT(dtype, op_name, ...)                                                    \
  switch (dtype) {                                                                                    \
    TANDEM_DTYPE_CASE(F32, float, __VA_ARGS__)                                                        \
    TANDEM_DTYPE_CASE(F64, double, __VA_ARGS__)                                                       \
    TANDEM_DTYPE_CASE(F16, ::tandem::Half, __VA_ARGS__)                                               \
    TANDEM_DTYPE_CASE(BF16, ::tandem::BFloat16, __VA_ARGS__)                                          \
    default: TANDEM_FAIL("{}: dtype {} is not supported (floating types only)", op_name, ::tandem::dtype_name(dtype)); \
  }

// Same as TANDEM_DISPATCH_FLOAT without f64 (CUDA kernels: f64 exists for CPU gradient checks only).
#define TANDEM_DISPATCH_FLOAT_NO_F64(dtype, op_name, ...)                                             \
  switch (dtype) {                                                                                    \
    TANDEM_DTYPE_CASE(F32, float, __VA_ARGS__)                                                        \
    TANDEM_DTYPE_CASE(F16, ::tandem::Half, __VA_ARGS__)                                               \
    TANDEM_DTYPE_CASE(BF16, ::tandem::BFloat16, __VA_ARGS__)                                          \
    default: TANDEM_FAIL("{}: dtype {} is not supported on CUDA (f32, f16, bf16)", op_name, ::tandem::dtype_name(dtype)); \
  }

#define TANDEM_DISPATCH_ALL(dtype, op_name, ...)                                                      \
  switch (dtype) {                                                                                    \
    TANDEM_DTYPE_CASE(F32, float, __VA_ARGS__)                                                        \
    TANDEM_DTYPE_CASE(F64, double, __VA_ARGS__)                                                       \
    TANDEM_DTYPE_CASE(F16, ::tandem::Half, __VA_ARGS__)                                               \
    TANDEM_DTYPE_CASE(BF16, ::tandem::BFloat16, __VA_ARGS__)                                          \
    TANDEM_DTYPE_CASE(I32, int32_t, __VA_ARGS__)                                                      \
    TANDEM_DTYPE_CASE(I64, int64_t, __VA_ARGS__)                                                      \
    TANDEM_DTYPE_CASE(U8, uint8_t, __VA_ARGS__)                                                       \
    default: TANDEM_FAIL("{}: unknown dtype", op_name);                                               \
  }
