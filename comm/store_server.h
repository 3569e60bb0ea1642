// The rendezvous store's server: a TCP key-value service on Boost.Asio.
//
// One thread runs an Asio io_context; all state (the map and the parked
// waits) is touched only there, so there are no locks. It serves the
// operations in comm/store_wire.h. A Get or Wait whose keys are missing is
// parked with a timer and answered when a Set/Add/CompareSet provides them or
// when its timeout expires (a Wait's timeout answer lists the missing keys,
// which is how a rendezvous names the ranks that never arrived).
//
// It binds to loopback unless another host is given. With a token, every
// connection must authenticate first; any other request, a wrong token, a
// malformed or oversized message closes that connection. No client input can
// crash the server or make it allocate more than max_message_bytes at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/store_wire.h"

namespace tandem::comm {

class StoreServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";  // "0.0.0.0" to serve every interface
    int port = 0;                    // 0: a free port, see port()
    std::string token;               // empty: no authentication
    uint32_t max_message_bytes = wire::kMaxFrameBytes;
  };

  explicit StoreServer(Options options);  // listening when this returns; throws if it cannot bind
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const;
  const std::string& host() const;
  int open_connections() const;
  // Waits until every client has disconnected, at most `timeout`; true if they did.
  bool wait_until_idle(std::chrono::milliseconds timeout) const;

  struct Impl;  // opaque: keeps Asio out of this header

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::comm
