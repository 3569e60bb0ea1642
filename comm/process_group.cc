#include "comm/process_group.h"

#include "core/check.h"

namespace tandem::comm {

namespace {
void check_tensor(const char* op, const Tensor& t, const char* which) {
  TANDEM_CHECK(t.defined(), "{}: the {} tensor is undefined", op, which);
  DType d = t.dtype();
  TANDEM_CHECK(d == DType::F32 || d == DType::F64 || d == DType::F16 || d == DType::BF16 || d == DType::I32 ||
                   d == DType::I64,
               "{}: dtype {} of {} is not supported (f32, f64, f16, bf16, i32, i64)", op, dtype_name(d), t.str());
}

void check_pair(const char* op, const Tensor& in, const Tensor& out) {
  check_tensor(op, in, "input");
  check_tensor(op, out, "output");
  TANDEM_CHECK(in.dtype() == out.dtype() && in.device() == out.device(),
               "{}: input {} and output {} differ in dtype or device", op, in.str(), out.str());
}
}  // namespace

namespace {
// An enum's names, in one table per enum, for both directions.
template <class E, size_t N>
struct Names {
  std::pair<E, std::string_view> items[N];
  std::string_view kind;  // "a ring transport"

  std::string_view name(E v) const {
    for (const auto& [e, s] : items)
      if (e == v) return s;
    return "?";
  }
  E parse(std::string_view text, std::string_view where) const {
    std::string list;
    for (const auto& [e, s] : items) {
      if (text == s) return e;
      list += (list.empty() ? "" : ", ") + std::string(s);
    }
    TANDEM_FAIL("{}: '{}' is not {} ({})", where, text, kind, list);
  }
};

constexpr Names<RingTransport, 3> kTransports{
    {{RingTransport::Auto, "auto"}, {RingTransport::Tcp, "tcp"}, {RingTransport::Shm, "shm"}}, "a ring transport"};
constexpr Names<RingSingleCopy, 3> kSingleCopy{
    {{RingSingleCopy::Auto, "auto"}, {RingSingleCopy::Off, "off"}, {RingSingleCopy::On, "on"}},
    "a ring single-copy mode"};
constexpr Names<RingSharedBuffers, 3> kSharedBuffers{
    {{RingSharedBuffers::Auto, "auto"}, {RingSharedBuffers::Off, "off"}, {RingSharedBuffers::On, "on"}},
    "a ring shared-buffers mode"};
}  // namespace

std::string_view ring_transport_name(RingTransport t) { return kTransports.name(t); }
RingTransport parse_ring_transport(std::string_view name, std::string_view where) {
  return kTransports.parse(name, where);
}
std::string_view ring_single_copy_name(RingSingleCopy m) { return kSingleCopy.name(m); }
RingSingleCopy parse_ring_single_copy(std::string_view name, std::string_view where) {
  return kSingleCopy.parse(name, where);
}
std::string_view ring_shared_buffers_name(RingSharedBuffers m) { return kSharedBuffers.name(m); }
RingSharedBuffers parse_ring_shared_buffers(std::string_view name, std::string_view where) {
  return kSharedBuffers.parse(name, where);
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::Sum;
  if (name == "avg") return ReduceOp::Avg;
  if (name == "max") return ReduceOp::Max;
  TANDEM_FAIL("unknown reduce op '{}' (sum, avg, max)", name);
}

ProcessGroup::ProcessGroup(int rank, int size) : rank_(rank), size_(size) {
  TANDEM_CHECK(size >= 1 && rank >= 0 && rank < size, "process group: rank {} of size {} is invalid", rank, size);
}

void ProcessGroup::check_all_reduce(const Tensor& in, const Tensor& out) const {
  check_pair("all_reduce", in, out);
  TANDEM_CHECK(in.numel() == out.numel(), "all_reduce: input {} and output {} differ in size", in.str(), out.str());
}

void ProcessGroup::check_broadcast(const Tensor& t, int root) const {
  check_tensor("broadcast", t, "");
  TANDEM_CHECK(root >= 0 && root < size_, "broadcast: root {} is not a rank of this group (size {})", root, size_);
}

void ProcessGroup::check_all_gather(const Tensor& in, const Tensor& out) const {
  check_pair("all_gather", in, out);
  TANDEM_CHECK(out.numel() == in.numel() * size_, "all_gather: output {} must hold world size {} x input {}",
               out.str(), size_, in.str());
}

void ProcessGroup::check_reduce_scatter(const Tensor& in, const Tensor& out) const {
  check_pair("reduce_scatter", in, out);
  TANDEM_CHECK(in.numel() == out.numel() * size_, "reduce_scatter: input {} must hold world size {} x output {}",
               in.str(), size_, out.str());
}

}  // namespace tandem::comm
