#include "core/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/check.h"

namespace tandem {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;

const char* st_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

bool parse_st_dtype(const std::string& s, DType* out) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    if (s == st_dtype(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

}  // namespace

const Tensor* NamedTensors::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

void save_safetensors(const std::string& path, const NamedTensors& named) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!named.metadata.empty()) header["__metadata__"] = named.metadata;
  std::vector<Tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, t] : named.tensors) {
    TANDEM_CHECK(t.defined(), "save_safetensors {}: tensor '{}' is undefined", path, name);
    TANDEM_CHECK(name != "__metadata__" && !header.contains(name), "save_safetensors {}: duplicate or reserved name '{}'",
                 path, name);
    Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
    header[name] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + h.nbytes()}}};
    offset += h.nbytes();
    host.push_back(std::move(h));
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned

  write_file_atomically(path, [&](std::ostream& out) {
    uint64_t n = json.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    for (const Tensor& h : host) out.write(static_cast<const char*>(h.data_ptr()), static_cast<std::streamsize>(h.nbytes()));
  });
}

NamedTensors load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.good(), "cannot open safetensors file {}", path);
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  TANDEM_CHECK(file_size >= 8, "{}: not a safetensors file (only {} bytes)", path, file_size);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len[i]) << (8 * i);
  TANDEM_CHECK(header_len <= kMaxHeaderBytes && 8 + header_len <= file_size,
               "{}: header length {} does not fit the file ({} bytes)", path, header_len, file_size);
  std::string json(header_len, '\0');
  in.read(json.data(), static_cast<std::streamsize>(header_len));
  nlohmann::ordered_json header;
  try {
    header = nlohmann::ordered_json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    TANDEM_FAIL("{}: invalid JSON header: {}", path, e.what());
  }
  TANDEM_CHECK(header.is_object(), "{}: the header is not a JSON object", path);
  const uint64_t data_start = 8 + header_len, data_size = file_size - data_start;

  NamedTensors result;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& e = it.value();
    if (name == "__metadata__") {
      TANDEM_CHECK(e.is_object(), "{}: __metadata__ must be an object", path);
      for (auto m = e.begin(); m != e.end(); ++m) {
        TANDEM_CHECK(m.value().is_string(), "{}: __metadata__ value '{}' must be a string", path, m.key());
        result.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    try {
      DType dtype;
      TANDEM_CHECK(parse_st_dtype(e.at("dtype").get<std::string>(), &dtype), "{}: tensor '{}': unsupported dtype {}",
                   path, name, e.at("dtype").dump());
      Shape shape = e.at("shape").get<Shape>();
      for (int64_t d : shape) TANDEM_CHECK(d >= 0, "{}: tensor '{}': negative extent", path, name);
      auto offs = e.at("data_offsets").get<std::vector<uint64_t>>();
      TANDEM_CHECK(offs.size() == 2 && offs[0] <= offs[1] && offs[1] <= data_size,
                   "{}: tensor '{}': data_offsets outside the {}-byte data section", path, name, data_size);
      uint64_t need = static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype);
      TANDEM_CHECK(offs[1] - offs[0] == need, "{}: tensor '{}': {} bytes for shape {} of {} (needs {})", path, name,
                   offs[1] - offs[0], shape_str(shape), dtype_name(dtype), need);
      Tensor t = Tensor::empty(shape, dtype);
      in.seekg(static_cast<std::streamoff>(data_start + offs[0]));
      in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(need));
      TANDEM_CHECK(in.good(), "{}: tensor '{}': read failed", path, name);
      ranges.emplace_back(offs[0], offs[1]);
      result.tensors.emplace_back(name, std::move(t));
    } catch (const nlohmann::json::exception& ex) {
      TANDEM_FAIL("{}: tensor '{}': malformed entry: {}", path, name, ex.what());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    TANDEM_CHECK(ranges[i].first >= ranges[i - 1].second, "{}: tensors overlap in the data section", path);
  return result;
}

}  // namespace tandem
