// The rendezvous store's client: what ranks use to find each other.
//
// A Store is one authenticated TCP connection to a StoreServer (see
// comm/store_server.h). Calls are synchronous and thread-safe (serialised on
// the connection). Every call is bounded: blocking reads (get, wait) by the
// timeout they are given, everything else by the store's default timeout.
// Values are byte strings; add() treats a value as a decimal integer.
//
// A process that hosts the server for its peers (rank 0) keeps it alive
// through its client: see host().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/socket.h"

namespace tandem::comm {

class StoreServer;

struct StoreOptions {
  std::chrono::milliseconds timeout{30000};  // connecting, and the default for waits
  std::string token;                         // must match the server's, if it has one
};

class Store {
 public:
  // Connects (retrying until the timeout, the server may start later) and authenticates.
  Store(const std::string& host, int port, StoreOptions options = {});
  ~Store();

  // Starts a server on host:port (0: a free port) and connects to it; the
  // server lives as long as the returned client.
  static std::shared_ptr<Store> host(const std::string& host, int port, StoreOptions options = {});

  void set(const std::string& key, const std::string& value);
  // The value of `key`, waiting for it to be set; throws naming the key after the timeout.
  std::string get(const std::string& key);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  int64_t add(const std::string& key, int64_t delta);
  // Sets `key` to `desired` if its value is `expected` (an empty `expected`
  // also matches a missing key); returns the value after the call.
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired);
  // Waits until every key exists. Returns the keys still missing when the
  // timeout passed (empty: all arrived), so callers can say who is late.
  std::vector<std::string> wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  bool check(const std::vector<std::string>& keys);
  bool remove(const std::string& key);  // true if it existed

  const std::string& address() const { return address_; }  // "host:port"
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // The address of this end of the connection as the server sees it: an
  // interface of this host that can reach the store's host (and so, usually,
  // the other ranks).
  std::string local_address() const { return socket_.local_address(); }

 private:
  std::string request(const std::string& frame, std::chrono::milliseconds server_wait);

  StoreOptions options_;
  std::string address_;
  Socket socket_;
  std::mutex mutex_;
  std::shared_ptr<StoreServer> hosted_;
};

}  // namespace tandem::comm
