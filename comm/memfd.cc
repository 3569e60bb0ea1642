#include "comm/memfd.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace tandem::comm {

MappedMemfd create_mapped_memfd(const char* name, size_t bytes, bool populate, const std::string& what) {
  const int fd = ::memfd_create(name, MFD_CLOEXEC);
  TANDEM_CHECK(fd >= 0, "{}: memfd_create failed: {}", what, std::strerror(errno));
  // Closes fd and fails with errno's reason.
  const auto fail = [&](const char* step) {
    const int e = errno;
    ::close(fd);
    TANDEM_FAIL("{}: {} failed: {}", what, step, std::strerror(e));
  };
  struct stat st {};
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || ::fstat(fd, &st) != 0) fail("sizing its memfd");
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  if (p == MAP_FAILED) fail("mmap");
  return MappedMemfd{fd, p, static_cast<uint64_t>(st.st_ino)};
}

}  // namespace tandem::comm
