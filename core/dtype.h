// Element types a Tensor can hold.
//
// f32 is the training type; f64 exists for gradient checks on the CPU; f16 and
// bf16 are compute/communication types (stored as raw 16-bit patterns, converted
// with round-to-nearest-even, see core/half.h); i32, i64 and u8 hold token ids,
// labels and masks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

enum class DType : uint8_t { F32, F64, F16, BF16, I32, I64, U8 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "bf16", ...
// Parses a name produced by dtype_name (also accepts "float32", "float16",
// "bfloat16", "fp16", "fp32"); throws Error naming the text otherwise.
DType parse_dtype(std::string_view name);
bool is_floating(DType t);

}  // namespace tandem
