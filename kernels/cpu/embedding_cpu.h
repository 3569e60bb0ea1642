// CPU reference for token + position embedding.
//
// ids: [batch * seq] i32 or i64, row-major [batch, seq], every id in [0, vocab)
// (the caller checks with first_out_of_range_cpu). Tables: tok [vocab, dim],
// pos [>= seq, dim], out [batch * seq, dim], all of float dtype t.
// Arithmetic in acc_t (f32 for 16-bit types), one rounding per output.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tandem::kernels {

// out[b, s, :] = tok[ids[b, s], :] + pos[s, :]
void embedding_forward_cpu(const void* ids, DType id_type, const void* tok, const void* pos, void* out, int64_t batch,
                           int64_t seq, int64_t dim, DType t);

// dtok[v, :] = sum of dout[b, s, :] over the (b, s) with ids[b, s] == v, in
// increasing (b, s) order in acc_t, rounded once; rows of unused ids are 0.
// dpos[s, :] = sum over b of dout[b, s, :] for s < seq, 0 for seq <= s < positions.
// Either output may be null (not needed).
void embedding_backward_cpu(const void* dout, const void* ids, DType id_type, void* dtok, void* dpos, int64_t batch,
                            int64_t seq, int64_t dim, int64_t vocab, int64_t positions, DType t);

}  // namespace tandem::kernels
