#include "core/dtype.h"

#include "core/check.h"

namespace tandem {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  TANDEM_FAIL("unknown dtype {}", static_cast<int>(t));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
  }
  TANDEM_FAIL("unknown dtype {}", static_cast<int>(t));
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::F32;
  if (name == "f64" || name == "fp64" || name == "float64") return DType::F64;
  if (name == "f16" || name == "fp16" || name == "float16") return DType::F16;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  if (name == "i32" || name == "int32") return DType::I32;
  if (name == "i64" || name == "int64") return DType::I64;
  if (name == "u8" || name == "uint8") return DType::U8;
  TANDEM_FAIL("unknown dtype '{}' (expected one of f32, f64, f16, bf16, i32, i64, u8)", name);
}

bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}

}  // namespace tandem
