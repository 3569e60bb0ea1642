// cuBLASLt GEMMs with bias and bias-gradient epilogues (see gemm_epilogue.h).
//
// Layouts: row-major tensors are column-major transposes (as in linear.cu), so
//   forward   D[out, rows] = op_T(A = w, stored [in, out]) . B = x^T [in, rows], bias per row of D;
//   backward  D[in, out]   = A = x^T [in, rows] . op_T(B = dy^T, stored [out, rows]),
//             BGRADB reduces op(B) = dy [rows, out] over k = rows: db[out] (the columns of D).
// The handle is the thread's cuBLAS handle cast to cublasLtHandle_t (documented as valid). The
// workspace comes from the stream-ordered pool for each call (no cudaMalloc). Heuristic results are
// cached per (problem, dtype, epilogue): the query costs tens of microseconds of host time, and a
// training step repeats the same few shapes.
#include "kernels/cuda/gemm_epilogue.h"

#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>

#include "core/check.h"
#include "core/cuda_check.h"
#include "core/env_switch.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/scratch.cuh"

namespace tandem::kernels {

namespace {

constexpr size_t kWorkspaceBytes = size_t{4} << 20;  // what PyTorch gives cuBLASLt by default on Hopper-class GPUs

constinit EnvSwitch<CublasLtEpilogues, 3> g_switch{
    "TANDEM_CUBLASLT_EPILOGUES",
    {{"forward", CublasLtEpilogues::Forward}, {"0", CublasLtEpilogues::Off}, {"1", CublasLtEpilogues::All}}};

// Owns the descriptors of one problem.
struct LtProblem {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  ~LtProblem() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// A column-major [rows, cols] matrix with leading dimension ld.
cublasLtMatrixLayout_t layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  return l;
}

using Key = std::tuple<int, int64_t, int64_t, int64_t, int, int, int, uint32_t, int, int>;

// D[m, n] = op(A) . op(B) with `epilogue` writing/reading `vec`; the A, B, D layouts are the stored ones.
// A and B are of t, D of d_type, vec of vec_type.
bool run(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
         const void* b, int64_t ldb, void* d, int64_t ldd, cublasLtEpilogue_t epilogue, const void* vec, DType t,
         DType d_type, DType vec_type, int device, cudaStream_t stream) {
  const cudaDataType_t dt = cublas_data_type(t, "cuBLASLt linear"), ddt = cublas_data_type(d_type, "cuBLASLt linear");
  LtProblem p;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t opa = ta, opb = tb;
  const uint32_t epi = epilogue;
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)));
  const int32_t bias_type = cublas_data_type(vec_type, "cuBLASLt linear");  // the bias or its gradient
  TANDEM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  p.a = ta == CUBLAS_OP_N ? layout(dt, m, k, lda) : layout(dt, k, m, lda);
  p.b = tb == CUBLAS_OP_N ? layout(dt, k, n, ldb) : layout(dt, n, k, ldb);
  p.d = layout(ddt, m, n, ldd);

  cublasLtHandle_t lt = reinterpret_cast<cublasLtHandle_t>(cublas_handle(device, stream));
  // The heuristic depends on pointer alignment (of the bias too), so the key carries the pointers' low bits.
  const auto align = [](const void* q) { return static_cast<int>(reinterpret_cast<uintptr_t>(q) & 15); };
  const Key key{device, m, n, k, static_cast<int>(t), static_cast<int>(d_type), static_cast<int>(vec_type), epi,
                opa * 2 + opb, align(a) | align(b) << 4 | align(d) << 8 | align(vec) << 12};
  static std::mutex mu;
  static std::map<Key, std::optional<cublasLtMatmulAlgo_t>> cache;
  std::optional<cublasLtMatmulAlgo_t> algo;
  {
    std::lock_guard lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      algo = it->second;
    } else {
      cublasLtMatmulPreference_t pref = nullptr;
      TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t ws = kWorkspaceBytes;
      cublasStatus_t st =
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
      // Split-K partial sums are added in f32 or not at all. By default cuBLASLt may also add them in
      // the output type (or in place in D): in f16 that rounded the weight and bias gradients of a
      // long-k backward GEMM to 5-15 ulps off the f32-accumulated reference on an H200 (2026-11-27),
      // where cublasGemmEx's path is within tolerance.
      const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                  sizeof(schemes));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
      cublasLtMatmulPreferenceDestroy(pref);
      // NOT_SUPPORTED (or no result) means "no kernel for this problem": fall back, remember it.
      TANDEM_CHECK(st == CUBLAS_STATUS_SUCCESS || st == CUBLAS_STATUS_NOT_SUPPORTED,
                   "cuBLASLt heuristic for a {}x{}x{} GEMM: {}", m, n, k, cublas_status_name(st));
      if (st == CUBLAS_STATUS_SUCCESS && found > 0) algo = result.algo;
      cache.emplace(key, algo);
    }
  }
  if (!algo) return false;
  Scratch workspace(device, kWorkspaceBytes, stream);
  const float alpha = 1.0f, beta = 0.0f;
  TANDEM_CUBLAS_CHECK(cublasLtMatmul(lt, p.desc, &alpha, a, p.a, b, p.b, &beta, d, p.d, d, p.d, &*algo,
                                     workspace.as<void>(), kWorkspaceBytes, stream));
  return true;
}

}  // namespace

CublasLtEpilogues parse_cublaslt_epilogues(const char* v) { return g_switch.parse(v); }
CublasLtEpilogues cublaslt_epilogues() { return g_switch.value(); }
const char* cublaslt_epilogues_name(CublasLtEpilogues epilogues) { return g_switch.name(epilogues); }
void set_cublaslt_epilogues_for_testing(std::optional<CublasLtEpilogues> epilogues) {
  g_switch.force_for_testing(epilogues);
}

bool gemm_bias_lt(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t in, int64_t out,
                  DType t, int device, cudaStream_t stream) {
  return run(CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, w, in, x, in, y, out, CUBLASLT_EPILOGUE_BIAS, b, t, t, t,
             device, stream);
}

bool gemm_weight_bias_grad_lt(const void* dy, const void* x, void* dw, void* db, int64_t rows, int64_t in,
                              int64_t out, DType t, DType dw_dtype, DType db_dtype, int device, cudaStream_t stream) {
  return run(CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, in, dy, out, dw, in, CUBLASLT_EPILOGUE_BGRADB, db, t, dw_dtype,
             db_dtype, device, stream);
}

}  // namespace tandem::kernels
