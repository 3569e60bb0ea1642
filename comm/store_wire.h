// The store's wire format, shared by the server and the client.
//
// Every message is a frame: a little-endian u32 payload length, then the
// payload. A request payload is an Op byte followed by its fields; a response
// payload is a Status byte followed by the op's results. Fields are i64
// (little-endian) or byte strings (u32 length + bytes). A Reader checks every
// length against what is left, so a truncated or lying message becomes an
// Error, never an out-of-bounds read. Frames above the size limit are refused
// before any allocation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::comm::wire {

constexpr uint32_t kMaxFrameBytes = 64u << 20;  // the default limit on one message

enum class Op : uint8_t {
  Auth = 1,        // token                          -> Ok
  Set = 2,         // key, value                     -> Ok
  Get = 3,         // key, timeout_ms                -> Ok value | Timeout
  Add = 4,         // key, delta                     -> Ok new value (i64) | BadRequest
  CompareSet = 5,  // key, expected, desired         -> Ok value after the op
  Wait = 6,        // n, n keys, timeout_ms          -> Ok | Timeout n missing keys
  Check = 7,       // n, n keys                      -> Ok all-present (i64 0/1)
  Delete = 8,      // key                            -> Ok deleted (i64 0/1)
};

enum class Status : uint8_t { Ok = 0, Timeout = 1, Unauthorized = 2, BadRequest = 3 };

class Writer {
 public:
  Writer& u8(uint8_t v);
  Writer& i64(int64_t v);
  Writer& bytes(std::string_view s);
  // The payload with its length prefix.
  std::string frame() const;

 private:
  std::string payload_;
};

class Reader {
 public:
  explicit Reader(std::string_view payload) : rest_(payload) {}
  uint8_t u8();
  int64_t i64();
  std::string bytes();
  bool done() const { return rest_.empty(); }

 private:
  std::string_view take(size_t n);
  std::string_view rest_;
};

uint32_t decode_length(const unsigned char header[4]);

}  // namespace tandem::comm::wire
