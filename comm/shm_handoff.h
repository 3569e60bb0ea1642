// How two ring ranks find out that they share a host, and how the creator of
// a shared-memory ring (comm/shm_ring.h) hands its descriptors to the peer.
//
// host_identity() is what two processes must both have to share a ring: the
// same kernel boot (/proc/sys/kernel/random/boot_id), host name, IPC
// namespace and network namespace (the hand-off socket is an abstract Unix
// socket, which lives in the network namespace; two network namespaces on
// one machine count as two hosts, as they do for TCP). Empty when the kernel
// does not say, which never matches.
//
// ShmOffer: the creator listens on an abstract Unix socket (a name in the
// kernel only, gone when the socket closes or the process dies: nothing on
// the file system to clean up), the peer connects and proves it belongs to
// the group with the group's nonce, and receives the descriptors with
// SCM_RIGHTS. Every wait has a deadline and names the peer when it passes.
#pragma once

#include <cstdint>
#include <string>

#include "comm/shm_ring.h"
#include "comm/socket.h"

namespace tandem::comm {

std::string host_identity();

class ShmOffer {
 public:
  // Listens on a fresh abstract name (unique per process and group nonce).
  ShmOffer(uint64_t nonce, int rank);
  ~ShmOffer();
  ShmOffer(const ShmOffer&) = delete;
  ShmOffer& operator=(const ShmOffer&) = delete;

  const std::string& name() const { return name_; }  // printable, without the leading NUL
  // Waits for the peer's connection and sends it `ring`'s descriptors; stops listening.
  void give(const ShmRing& ring, Clock::time_point deadline, const std::string& peer);

 private:
  uint64_t nonce_;
  std::string name_;
  int fd_ = -1;
};

// The peer's side: a connection to `name` that proved the nonce, then the
// descriptors. Split in two so that every rank connects before any waits.
class ShmTake {
 public:
  ShmTake(const std::string& name, uint64_t nonce, Clock::time_point deadline, const std::string& peer);
  ~ShmTake();
  ShmTake(const ShmTake&) = delete;
  ShmTake& operator=(const ShmTake&) = delete;
  std::shared_ptr<ShmRing> take(Clock::time_point deadline);

 private:
  std::string peer_;
  int fd_ = -1;
};

}  // namespace tandem::comm
