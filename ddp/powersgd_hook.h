// PowerSGD gradient compression (Vogels, Karimireddy, Jaggi, NeurIPS 2019) as a
// DDP comm hook, step for step PyTorch's powerSGD_hook
// (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py).
//
// Each gradient of a bucket that is a matrix M [n, m] (a tensor of rank >= 2
// viewed as shape[0] x the rest) is replaced by a rank-r approximation that
// all ranks agree on, sending (n + m) r numbers instead of n m:
//   P = M Q              (Q [m, r] from the previous step: warm start)
//   all-reduce P (sum), orthogonalize its columns (Gram-Schmidt)
//   Q = M^T P, all-reduce Q (sum), Q /= world
//   M = P Q^T            (= P P^T mean(M): the average projected on span(P))
// Vectors (biases, norms) and matrices too small to gain at least
// `min_compression_rate` ((n + m) r * rate >= n m) are all-reduced exactly,
// in one flat buffer. With error feedback, what compression lost on this rank
// (its input minus the result) is added to the bucket at the next step, so
// nothing is lost for good, only delayed. The first `start_powerSGD_iter`
// iterations use the plain average (PyTorch's advice: compressing from the
// first step hurts accuracy; and bucket indices only settle after DDP's
// rebuild at the end of iteration 1, which the per-bucket memory relies on).
//
// Where Tandem differs on purpose: the exact part and the P matrices travel in
// one all-reduce (PyTorch issues two back to back: same bytes, one latency
// less); Gram-Schmidt runs on the host in f64 with re-orthogonalisation and
// zeroes dependent columns (orthogonalize_columns; P is small: n x r); Q's first
// random values come from a counter-based generator seeded from random_seed,
// identical on every rank without a broadcast. The second all-reduce runs
// inside the bucket's `finish`, so a device bucket's finish waits on the host.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "ddp/comm_hook.h"

namespace tandem::ddp {

CommHook powerSGD_hook();

struct PowerSGDOptions {
  int64_t matrix_approximation_rank = 1;  // r; a matrix uses min(r, n, m)
  int64_t start_powerSGD_iter = 1000;     // plain all-reduce for the iterations before this one (0-based count)
  double min_compression_rate = 2;        // compress only where n m > (n + m) r * rate
  bool use_error_feedback = true;
  bool warm_start = true;                 // reuse each bucket's Q from the previous iteration
  double orthogonalization_epsilon = 0;   // added to each column norm before dividing (0: none)
  uint64_t random_seed = 0;
};

// The hook's state (DDPOptions::comm_hook_state): the iteration count, each
// bucket's error and Q, and what was sent. One per DDP model, the same options
// on every rank.
class PowerSGDState {
 public:
  // Throws Error naming the option when one is out of range (as PyTorch's
  // PowerSGDState does, start_powerSGD_iter must be > 1 with error feedback
  // or warm start: bucket indices change at DDP's rebuild after iteration 1).
  explicit PowerSGDState(PowerSGDOptions options);

  const PowerSGDOptions& options() const { return options_; }
  int64_t iteration() const { return iteration_; }
  // Elements of the buckets handed to the hook, and elements it all-reduced for them.
  int64_t numel_before_compression() const { return numel_before_; }
  int64_t numel_after_compression() const { return numel_after_; }
  // What compression has lost on this rank for bucket `index` and will add at its
  // next step (error feedback); undefined before the bucket was first compressed.
  Tensor error(int index) const;

 private:
  friend CommHook powerSGD_hook();
  struct BucketMemory {
    Tensor error;  // what compression lost on this rank at the previous step
    Tensor q;      // the bucket's Q matrices, flat
  };
  void count_iteration(const GradBucket& bucket);  // one more after the last bucket of an iteration

  PowerSGDOptions options_;
  int64_t iteration_ = 0;
  int64_t numel_before_ = 0, numel_after_ = 0;
  uint64_t draws_ = 0;  // random Q initialisations so far: the generator's subsequence
  std::map<int, BucketMemory> buckets_;
};

// `state` must be a PowerSGDState (a missing state is an Error).
CommHook powerSGD_hook();

// Gram-Schmidt on the columns of a row-major [rows, cols] matrix, in place: each
// column loses its components along the previous ones (twice, for orthogonality
// in floating point) and is divided by its norm plus epsilon. A column with no
// new direction (zero, or dependent to f64 rounding: a gradient of rank below r,
// as a small batch's is) becomes zero, so P P^T stays the projector onto the
// span. PyTorch's single modified pass divides such a column's rounding noise
// up to length 1 (or 0 by 0): the approximation then loses part of the
// gradient. Exposed for its test.
void orthogonalize_columns(std::vector<double>& matrix, int64_t rows, int64_t cols, double epsilon);

}  // namespace tandem::ddp
