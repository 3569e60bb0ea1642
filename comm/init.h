// Creating the process group of a job.
//
// init_process_group connects this rank to the job's store (hosting it on
// rank 0 unless the launcher does, see comm/rank_env.h) and builds the
// backend:
//   "ring"  our TCP ring (comm/ring_process_group.h): CPU tensors, and CUDA
//           tensors through pinned host memory; several ranks may share a GPU;
//   "nccl"  NCCL on this rank's GPU (device = local rank); needs a build
//           with NCCL (CMake's TANDEM_NCCL) and one GPU per local rank;
//   "auto"  nccl when every rank of the job has its own GPU, otherwise ring
//           (decided together through the store, so all ranks agree).
// Everything is bounded by options.timeout; a rank that never arrives makes
// the others fail naming it.
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.h"
#include "comm/rank_env.h"
#include "comm/store.h"

namespace tandem::comm {

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, const RankInfo& info,
                                                 ProcessGroupOptions options = {});

// The pieces, for callers that already hold a store (tests, several groups in one job).
std::shared_ptr<Store> connect_store(const RankInfo& info, std::chrono::milliseconds timeout);
std::shared_ptr<ProcessGroup> make_process_group(const std::string& backend, std::shared_ptr<Store> store,
                                                 const RankInfo& info, ProcessGroupOptions options = {});

// Whether this build (with NCCL) and machine can give this rank its own GPU (the auto rule, one rank's half).
bool has_own_gpu(const RankInfo& info);

// The NCCL library's version as loaded at run time ("2.28.9"), or "" in a build without the nccl backend.
std::string nccl_version();

}  // namespace tandem::comm
