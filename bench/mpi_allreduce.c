/* MPI_Allreduce timing for bench/allreduce_compare.py: float sum, out of
 * place, sizes from MINBYTES to MAXBYTES (x2), ITERS timed calls after
 * WARMUP untimed ones; prints "bytes time_us" per size from rank 0, where
 * time is the slowest rank's mean. Build: mpicc -O2 mpi_allreduce.c. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 5) {
    fprintf(stderr, "usage: mpi_allreduce MINBYTES MAXBYTES ITERS WARMUP\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long lo = atol(argv[1]), hi = atol(argv[2]);
  int iters = atoi(argv[3]), warmup = atoi(argv[4]);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  float* in = malloc((size_t)hi);
  float* out = malloc((size_t)hi);
  for (long i = 0; i < hi / 4; ++i) in[i] = (float)((rank + i) % 5);
  for (long bytes = lo; bytes <= hi; bytes *= 2) {
    int count = (int)(bytes / 4);
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters, tmax = 0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.3f\n", bytes, tmax * 1e6);
    fflush(stdout);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
