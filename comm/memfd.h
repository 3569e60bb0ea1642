// An anonymous shared-memory file (memfd_create), sized and mapped read-write
// and shared: the memory the same-host transports share with their peers, who
// map the same file through the fd they are passed (comm/shm_ring.h) or through
// /proc/<pid>/fd/<fd> (comm/shared_buffers.h). A memfd has no name in any file
// system, so a process that dies leaves nothing behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem::comm {

struct MappedMemfd {
  int fd = -1;
  void* data = nullptr;
  uint64_t inode = 0;  // names the file across processes (fstat's st_ino)
};

// A memfd of `bytes` bytes (the caller rounds them to pages), mapped; `populate`
// faults every page in now (MAP_POPULATE). `what` names the memory in errors
// ("shared buffer of 100 bytes"); on an error nothing is left open or mapped.
MappedMemfd create_mapped_memfd(const char* name, size_t bytes, bool populate, const std::string& what);

}  // namespace tandem::comm
