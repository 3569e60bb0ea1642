// Token + position embedding on the GPU, forward and deterministic backward.
//
// Forward: out[r] = tok[ids[r]] + pos[r % seq], one thread per 16-byte vector
// column walking rows. Traffic: read a token row, a position row (L2-resident
// for small tables) and write the output row.
//
// Backward, dtok: no floating-point atomics, so the bits are the same on
// every run. (1) A kernel turns ids into 32-bit sort keys (an out-of-range id
// becomes the key `vocab`, sorted last and skipped, and is reported) and
// positions 0..n-1; (2) CUB's stable radix sort orders (key, position) pairs,
// so each id's occurrences form a segment in increasing position order;
// (3) segments are cut into pieces at every multiple of kPiece sorted
// positions, one thread block per piece summing its (at most kPiece) dout rows
// in f32 with 4 row lanes combined in a fixed order: a whole segment writes its
// dtok row directly, the first piece of a longer segment goes to that window's
// "tail" slot and every later piece to its window's "head" slot; (4) one block
// per window whose last segment continues past it adds tail + following heads in
// order. A frequent id (padding, [CLS], "the") is thus spread over many blocks
// in (3), but (4) adds its pieces one after another.
// dtok is zeroed first (rows of unused ids). Traffic: read dout once, write dtok
// once (memset included), plus 16 bytes per id for the sort and the piece slots.
// That is TANDEM_EMBEDDING_BACKWARD=pieces. The default, windows (faster in every
// row the H200 timed, 2026-11-28), replaces (3) and (4) with the window walk of
// kernels/cuda/embedding_kernels.cuh: a warp per 32 sorted positions, and a long
// segment's partial rows dealt to lanes.
//
// Backward, dpos: dpos[s] = sum over b of dout[b, s], one thread per (s,
// vector column) adding the batch in order; rows s >= seq are zeroed.
// Numerics: f32 sums, one rounding per output.
#include <cub/cub.cuh>

#include "core/cuda_check.h"
#include "core/element.h"
#include "kernels/cuda/embedding_cuda.h"
#include "kernels/cuda/embedding_kernels.cuh"
#include "kernels/cuda/index_error_cuda.h"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/row_vectors.cuh"
#include "kernels/cuda/scratch.cuh"

namespace tandem::kernels {

namespace {

constexpr int kPiece = 64;    // sorted positions per window
constexpr int kRowLanes = 4;  // row lanes of a piece block
constexpr int kMaxTx = 128;

template <class T, int V, class I>
__global__ void forward_kernel(const I* __restrict__ ids, const T* __restrict__ tok, const T* __restrict__ pos,
                               T* __restrict__ out, int64_t rows, int64_t seq, int64_t dim, int64_t vocab,
                               IndexErrorRecord* err) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  for (int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; r < rows;
       r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t id = static_cast<int64_t>(ids[r]);
    float v[V];
    load_vec<V>(pos + (r % seq) * dim + c * V, v);
    if (id >= 0 && id < vocab) {
      float t[V];
      load_vec<V>(tok + id * dim + c * V, t);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] += t[k];
    } else if (c == 0) {
      report_index_error(err, IndexErrorOp::EmbeddingIds, r, id, vocab);
    }
    store_vec<V>(out + r * dim + c * V, v);
  }
}

template <class I>
__global__ void sort_keys_kernel(const I* __restrict__ ids, uint32_t* __restrict__ keys, int32_t* __restrict__ rows,
                                 int64_t n, int64_t vocab, IndexErrorRecord* err) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    const bool ok = id >= 0 && id < vocab;
    if (!ok) report_index_error(err, IndexErrorOp::EmbeddingIds, i, id, vocab);
    keys[i] = static_cast<uint32_t>(ok ? id : vocab);
    rows[i] = static_cast<int32_t>(i);
  }
}

// Block a handles the piece starting at sorted position a, if one starts there.
template <class T, int V>
__global__ void pieces_kernel(const T* __restrict__ dout, const uint32_t* __restrict__ keys,
                              const int32_t* __restrict__ rows, T* __restrict__ dtok, float* __restrict__ head,
                              float* __restrict__ tail, int64_t n, int64_t dim, uint32_t vocab) {
  __shared__ float lanes[kRowLanes][kMaxTx * 8];
  const int64_t a = blockIdx.x;
  const uint32_t key = keys[a];
  if (key == vocab) return;
  const bool seg_start = a == 0 || keys[a - 1] != key;
  if (!seg_start && a % kPiece != 0) return;
  int64_t e = a + 1;
  while (e < n && e % kPiece != 0 && keys[e] == key) ++e;
  const bool seg_end = e == n || keys[e] != key;
  const int64_t nvec = dim / V;
  for (int64_t c0 = 0; c0 < nvec; c0 += blockDim.x) {
    const int64_t c = c0 + threadIdx.x;
    float acc[V];
    fill(acc, 0.0f);
    if (c < nvec)
      for (int64_t j = a + threadIdx.y; j < e; j += kRowLanes) {
        float v[V];
        load_vec<V>(dout + static_cast<int64_t>(rows[j]) * dim + c * V, v);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += v[k];
      }
#pragma unroll
    for (int k = 0; k < V; ++k) lanes[threadIdx.y][threadIdx.x * V + k] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0 && c < nvec) {
      float s[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        s[k] = 0.0f;
#pragma unroll
        for (int l = 0; l < kRowLanes; ++l) s[k] += lanes[l][threadIdx.x * V + k];
      }
      if (seg_start && seg_end) {
        store_vec<V>(dtok + static_cast<int64_t>(key) * dim + c * V, s);
      } else {
        float* slot = (seg_start ? tail : head) + (a / kPiece) * dim + c * V;
#pragma unroll
        for (int k = 0; k < V; ++k) slot[k] = s[k];
      }
    }
    __syncthreads();
  }
}

// Block m finishes the segment holding window m's last position if it continues
// into window m + 1 and starts inside window m: tail[m] + head[m + 1] + ...
template <class T>
__global__ void combine_kernel(const uint32_t* __restrict__ keys, const float* __restrict__ head,
                               const float* __restrict__ tail, T* __restrict__ dtok, int64_t n, int64_t dim,
                               uint32_t vocab) {
  const int64_t m = blockIdx.x;
  const int64_t last = (m + 1) * kPiece - 1;
  if (last + 1 >= n) return;
  const uint32_t key = keys[last];
  if (key == vocab || keys[last + 1] != key) return;
  if (m > 0 && keys[m * kPiece - 1] == key) return;  // started in an earlier window: that block does it
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    float s = tail[m * dim + d];
    for (int64_t w = m + 1; w * kPiece < n && keys[w * kPiece] == key; ++w) s += head[w * dim + d];
    dtok[static_cast<int64_t>(key) * dim + d] = from_f32<T>(s);
  }
}

template <class T, int V>
__global__ void position_grad_kernel(const T* __restrict__ dout, T* __restrict__ dpos, int64_t batch, int64_t seq,
                                     int64_t dim) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c * V >= dim) return;
  for (int64_t s = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; s < seq;
       s += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    float acc[V];
    fill(acc, 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
      float v[V];
      load_vec<V>(dout + (b * seq + s) * dim + c * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += v[k];
    }
    store_vec<V>(dpos + s * dim + c * V, acc);
  }
}

template <class F>
void with_id_type(DType t, F&& f) {
  if (t == DType::I32) f(int32_t{});
  else if (t == DType::I64) f(int64_t{});
  else TANDEM_FAIL("embedding ids must be i32 or i64, got {}", dtype_name(t));
}

int bits_for(uint64_t v) {
  int b = 1;
  while (b < 32 && (v >> b) != 0) ++b;
  return b;
}

// The pieces walk (TANDEM_EMBEDDING_BACKWARD=pieces): pieces_kernel, then combine_kernel.
template <class T>
void piece_walk(const void* dout, const Scratch& keys, const Scratch& rows, void* dtok, int64_t n, int64_t dim,
                int64_t vocab, bool vec, int device, cudaStream_t s) {
  const int64_t windows = (n + kPiece - 1) / kPiece;
  Scratch slots(device, static_cast<size_t>(2 * windows * dim) * sizeof(float), s);
  float* head = slots.as<float>();
  float* tail = head + windows * dim;
  with_width<T>(vec, [&]<int V>() {
    const int64_t nvec = dim / V;
    const int tx = nvec >= kMaxTx ? kMaxTx : round_up_32(nvec);
    pieces_kernel<T, V><<<static_cast<unsigned>(n), dim3(tx, kRowLanes), 0, s>>>(
        static_cast<const T*>(dout), keys.as<uint32_t>(), rows.as<int32_t>(), static_cast<T*>(dtok), head, tail, n,
        dim, static_cast<uint32_t>(vocab));
    TANDEM_CUDA_CHECK_LAUNCH();
  });
  combine_kernel<T><<<static_cast<unsigned>(windows), 128, 0, s>>>(keys.as<uint32_t>(), head, tail,
                                                                  static_cast<T*>(dtok), n, dim,
                                                                  static_cast<uint32_t>(vocab));
  TANDEM_CUDA_CHECK_LAUNCH();
}

// The window walk (TANDEM_EMBEDDING_BACKWARD=windows, the default; kernels/cuda/embedding_kernels.cuh):
// window_kernel, then window_combine_kernel.
template <class T>
void window_walk(const void* dout, const Scratch& keys, const Scratch& rows, void* dtok, int64_t n, int64_t dim,
                 int64_t vocab, bool vec, int device, cudaStream_t s) {
  const int64_t windows = embedding_windows(n);
  Scratch slots(device, static_cast<size_t>(2 * windows * dim) * sizeof(float), s);
  float* head = slots.as<float>();
  float* tail = head + windows * dim;
  with_width<T>(vec, [&]<int V>() {
    TANDEM_CHECK(dim / V <= int64_t{65535} * kEmbeddingWindow, "embedding on CUDA: d_model {} is too large", dim);
    const EmbeddingWindowLaunch l = embedding_window_launch(n, dim / V);
    window_kernel<T, V><<<l.grid, l.block, 0, s>>>(static_cast<const T*>(dout), keys.as<uint32_t>(),
                                                   rows.as<int32_t>(), static_cast<T*>(dtok), head, tail, n, dim,
                                                   static_cast<uint32_t>(vocab));
    TANDEM_CUDA_CHECK_LAUNCH();
  });
  auto combine = [&]<int V>() {
    const EmbeddingWindowLaunch l = embedding_window_launch(n, dim / V);
    window_combine_kernel<T, V><<<l.combine_grid, l.combine_block, 0, s>>>(
        keys.as<uint32_t>(), head, tail, static_cast<T*>(dtok), n, dim, static_cast<uint32_t>(vocab));
    TANDEM_CUDA_CHECK_LAUNCH();
  };
  if (dim % 4 == 0) combine.template operator()<4>();  // the slots are 16-byte aligned rows of f32
  else combine.template operator()<1>();
}

}  // namespace

void embedding_forward_cuda(const void* ids, DType id_type, const void* tok, const void* pos, void* out, int64_t batch,
                            int64_t seq, int64_t dim, int64_t vocab, DType t, void* stream) {
  const int64_t rows = batch * seq;
  if (rows == 0 || dim == 0) return;
  IndexErrorRecord* err = index_error_record();
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "embedding_forward_cuda", [&] {
    const bool vec = rows_vectorizable(dim, sizeof(scalar_t), {tok, pos, out});
    with_width<scalar_t>(vec, [&]<int V>() {
      with_id_type(id_type, [&](auto id_tag) {
        using I = decltype(id_tag);
        const dim3 block = column_block(dim / V, rows);
        const dim3 grid(blocks_for(dim / V, block.x, INT32_MAX), blocks_for(rows, block.y * 4, 65535));
        forward_kernel<scalar_t, V, I><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const I*>(ids), static_cast<const scalar_t*>(tok), static_cast<const scalar_t*>(pos),
            static_cast<scalar_t*>(out), rows, seq, dim, vocab, err);
        TANDEM_CUDA_CHECK_LAUNCH();
      });
    });
  });
}

void embedding_backward_cuda(const void* dout, const void* ids, DType id_type, void* dtok, void* dpos, int64_t batch,
                             int64_t seq, int64_t dim, int64_t vocab, int64_t positions, DType t, int device,
                             void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t n = batch * seq;
  TANDEM_CHECK(n < INT32_MAX && vocab < INT32_MAX, "embedding on CUDA: {} ids or a vocabulary of {} is too large", n,
               vocab);
  TANDEM_DISPATCH_FLOAT_NO_F64(t, "embedding_backward_cuda", [&] {
    const size_t es = sizeof(scalar_t);
    const bool vec = rows_vectorizable(dim, es, {dout, dtok, dpos});
    if (dtok) {
      TANDEM_CUDA_CHECK(cudaMemsetAsync(dtok, 0, static_cast<size_t>(vocab * dim) * es, s));
      if (n > 0 && dim > 0) {
        const size_t nb = static_cast<size_t>(n);
        Scratch keys_in(device, nb * 4, s), keys(device, nb * 4, s), rows_in(device, nb * 4, s), rows(device, nb * 4, s);
        IndexErrorRecord* err = index_error_record();
        with_id_type(id_type, [&](auto id_tag) {
          using I = decltype(id_tag);
          sort_keys_kernel<I><<<blocks_for(n, 256, 132 * 16), 256, 0, s>>>(
              static_cast<const I*>(ids), keys_in.as<uint32_t>(), rows_in.as<int32_t>(), n, vocab, err);
          TANDEM_CUDA_CHECK_LAUNCH();
        });
        const int end_bit = bits_for(static_cast<uint64_t>(vocab));  // keys are in [0, vocab]
        size_t temp_bytes = 0;
        TANDEM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.as<uint32_t>(),
                                                          keys.as<uint32_t>(), rows_in.as<int32_t>(),
                                                          rows.as<int32_t>(), static_cast<int>(n), 0, end_bit, s));
        Scratch temp(device, std::max<size_t>(temp_bytes, 16), s);  // non-null: null means "query the size"
        TANDEM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.as<void>(), temp_bytes, keys_in.as<uint32_t>(),
                                                          keys.as<uint32_t>(), rows_in.as<int32_t>(),
                                                          rows.as<int32_t>(), static_cast<int>(n), 0, end_bit, s));
        if (embedding_backward_kernel() == EmbeddingBackwardKernel::Windows)
          window_walk<scalar_t>(dout, keys, rows, dtok, n, dim, vocab, vec, device, s);
        else
          piece_walk<scalar_t>(dout, keys, rows, dtok, n, dim, vocab, vec, device, s);
      }
    }
    if (dpos) {
      if (positions > seq)
        TANDEM_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(dpos) + static_cast<size_t>(seq * dim) * es, 0,
                                          static_cast<size_t>((positions - seq) * dim) * es, s));
      if (seq > 0 && dim > 0) {
        with_width<scalar_t>(vec, [&]<int V>() {
          const dim3 block = column_block(dim / V, seq);
          const dim3 grid(blocks_for(dim / V, block.x, INT32_MAX), blocks_for(seq, block.y, 65535));
          position_grad_kernel<scalar_t, V><<<grid, block, 0, s>>>(static_cast<const scalar_t*>(dout),
                                                                   static_cast<scalar_t*>(dpos), batch, seq, dim);
          TANDEM_CUDA_CHECK_LAUNCH();
        });
      }
    }
  });
}

}  // namespace tandem::kernels
