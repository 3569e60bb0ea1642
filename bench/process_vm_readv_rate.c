/* How fast process_vm_readv copies compared with memcpy, the ceiling of the
 * ring's single-copy all_reduce (comm/single_copy.h). Copies S MiB within
 * this process in pieces of P KiB, with memcpy and with process_vm_readv from
 * its own pid (the kernel pins the source pages as it would a peer's), best
 * of R; with a 4th argument the buffers are advised for transparent huge
 * pages first (MADV_HUGEPAGE), as the allocator does by default.
 *
 *   cc -O2 -o /tmp/pvr bench/process_vm_readv_rate.c && /tmp/pvr 64 256 10 [huge]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MiB piece_KiB reps [huge]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)atol(argv[1]) << 20, piece = (size_t)atol(argv[2]) << 10;
  int reps = atoi(argv[3]);
  char *a, *b;
  if (posix_memalign((void**)&a, 2 << 20, bytes) || posix_memalign((void**)&b, 2 << 20, bytes)) return 1;
  if (argc > 4) {
    madvise(a, bytes, MADV_HUGEPAGE);
    madvise(b, bytes, MADV_HUGEPAGE);
  }
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double best_memcpy = 1e9, best_cma = 1e9;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    memcpy(b, a, bytes);
    double t1 = now();
    if (t1 - t0 < best_memcpy) best_memcpy = t1 - t0;
    t0 = now();
    for (size_t o = 0; o < bytes; o += piece) {
      size_t n = bytes - o < piece ? bytes - o : piece;
      struct iovec local = {b + o, n}, remote = {a + o, n};
      if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)n) {
        perror("process_vm_readv");
        return 1;
      }
    }
    t1 = now();
    if (t1 - t0 < best_cma) best_cma = t1 - t0;
  }
  printf("%zu MiB in %zu KiB pieces%s: memcpy %.2f GB/s, process_vm_readv %.2f GB/s\n", bytes >> 20, piece >> 10,
         argc > 4 ? ", huge pages" : "", bytes / best_memcpy / 1e9, bytes / best_cma / 1e9);
  return 0;
}
