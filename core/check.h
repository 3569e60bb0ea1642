// Error reporting for the whole engine.
//
// Every failed precondition, CUDA, cuBLAS or NCCL call becomes a tandem::Error
// whose message starts with the source file and line that detected it, so a
// user never has to guess where a failure came from. Nothing in Tandem calls
// abort() on bad input; callers at the top (apps/) turn Error into a message and
// a non-zero exit.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#if !defined(__CUDACC__)
#include <fmt/format.h>
#endif

namespace tandem {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

namespace detail {
// nvcc's host pass cannot compile fmt 9's constexpr machinery, so .cu files
// format messages with this: each "{}" takes the next argument through
// operator<<. Host compilers use fmt, which also checks format strings.
inline void format_rest(std::ostringstream& out, std::string_view f) { out << f; }
template <class First, class... Rest>
void format_rest(std::ostringstream& out, std::string_view f, const First& first, const Rest&... rest) {
  size_t p = f.find("{}");
  if (p == std::string_view::npos) {
    out << f;
    return;
  }
  out << f.substr(0, p) << first;
  format_rest(out, f.substr(p + 2), rest...);
}
template <class... Args>
std::string braces_format(std::string_view f, const Args&... args) {
  std::ostringstream out;
  format_rest(out, f, args...);
  return out.str();
}
}  // namespace detail

}  // namespace tandem

#if defined(__CUDACC__)
#define TANDEM_FORMAT(...) ::tandem::detail::braces_format(__VA_ARGS__)
#else
#define TANDEM_FORMAT(...) ::fmt::format(__VA_ARGS__)
#endif

// TANDEM_CHECK(cond, "format {}", args...): throws tandem::Error naming file:line.
#define TANDEM_CHECK(cond, ...)                                                   \
  do {                                                                            \
    if (!(cond)) ::tandem::throw_error(__FILE__, __LINE__, TANDEM_FORMAT(__VA_ARGS__)); \
  } while (0)

#define TANDEM_FAIL(...) ::tandem::throw_error(__FILE__, __LINE__, TANDEM_FORMAT(__VA_ARGS__))
