#include "ddp/rank_agreement.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/tensor.h"

namespace tandem::ddp {

namespace {

std::string encode(const std::vector<Field>& fields) {
  std::string s;
  for (const Field& f : fields) {
    TANDEM_CHECK(f.name.find_first_of("\t\n") == std::string::npos && f.value.find('\n') == std::string::npos,
                 "rank agreement: field '{}' holds a tab or a newline", f.name);
    s += f.name + "\t" + f.value + "\n";
  }
  return s;
}

std::vector<Field> decode(const std::string& s) {
  std::vector<Field> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    size_t tab = line.find('\t');
    out.push_back(tab == std::string::npos ? Field{line, ""} : Field{line.substr(0, tab), line.substr(tab + 1)});
  }
  return out;
}

// Every rank's text, in rank order.
std::vector<std::string> all_gather_text(comm::ProcessGroup& group, const std::string& mine, Device where,
                                         std::chrono::milliseconds timeout, const std::string& what) {
  const int world = group.size();
  Tensor len = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(mine.size())}, {1}, DType::I64, where);
  Tensor lens = Tensor::zeros({world}, DType::I64, where);
  TANDEM_CHECK(group.all_gather(len, lens)->wait(timeout), "DDP (rank {}): timed out exchanging {} with the other ranks",
               group.rank(), what);
  std::vector<int64_t> all_lens = lens.to_int_vector();
  const int64_t max_len = *std::max_element(all_lens.begin(), all_lens.end());
  // One character per i32 element: every backend gathers i32 (byte tensors are not a collective dtype).
  std::vector<int64_t> chars(static_cast<size_t>(max_len), 0);
  for (size_t i = 0; i < mine.size(); ++i) chars[i] = static_cast<unsigned char>(mine[i]);
  Tensor text = Tensor::from_vector(chars, {max_len}, DType::I32, where);
  Tensor texts = Tensor::zeros({world * max_len}, DType::I32, where);
  TANDEM_CHECK(group.all_gather(text, texts)->wait(timeout),
               "DDP (rank {}): timed out exchanging {} with the other ranks", group.rank(), what);
  std::vector<int64_t> gathered = texts.to_int_vector();
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    std::string s(static_cast<size_t>(all_lens[static_cast<size_t>(r)]), '\0');
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(gathered[static_cast<size_t>(r * max_len) + i]);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

void check_ranks_agree(comm::ProcessGroup& group, const std::vector<Field>& fields, Device where,
                       std::chrono::milliseconds timeout, const std::string& what, const std::string& advice) {
  if (group.size() == 1) return;
  std::vector<std::string> texts = all_gather_text(group, encode(fields), where, timeout, what);
  const std::vector<Field> ref = decode(texts[0]);
  for (int r = 1; r < group.size(); ++r) {
    const std::vector<Field> other = decode(texts[static_cast<size_t>(r)]);
    for (size_t i = 0; i < std::max(ref.size(), other.size()); ++i) {
      // A list that ended early reads as "(none)" under the other list's field name.
      const Field a = i < ref.size() ? ref[i] : Field{other[i].name, "(none)"};
      const Field b = i < other.size() ? other[i] : Field{ref[i].name, "(none)"};
      if (a.name != b.name) {
        TANDEM_FAIL("DDP: {} differs between ranks: field {} is '{}' on rank 0 but '{}' on rank {} ({})", what, i,
                    a.name, b.name, r, advice);
      }
      TANDEM_CHECK(a.value == b.value, "DDP: {} differs between ranks: {} is '{}' on rank 0 but '{}' on rank {} ({})",
                   what, a.name, a.value, b.value, r, advice);
    }
  }
}

}  // namespace tandem::ddp
