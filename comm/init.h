// Creating the process group of a job.
//
// init_process_group connects this rank to the job's store (hosting it on
// rank 0 unless the launcher does, see comm/rank_env.h) and builds the
// backend:
//   "ring"  our TCP ring (comm/ring_process_group.h): CPU tensors, and CUDA
//           tensors through pinned host memory; several ranks may share a GPU;
//   "nccl"  NCCL on this rank's GPU (device_for_local_rank); needs a build
//           with NCCL (CMake's TANDEM_NCCL) and a GPU no other rank uses;
//   "auto"  nccl when every rank of the job has NCCL and a GPU of its own
//           (told apart by UUID, so one visible GPU per rank counts), otherwise
//           ring (decided together through the store, so all ranks agree).
// Everything is bounded by options.timeout; a rank that never arrives makes
// the others fail naming it. With TANDEM_DISTRIBUTED_DEBUG (or
// TORCH_DISTRIBUTED_DEBUG) set to DETAIL the backend comes wrapped in a
// DebugProcessGroup, which checks every collective against the other ranks'
// before it runs (comm/debug_process_group.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

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

// The GPU a rank computes on: its local rank modulo the visible devices, so
// that both one node-wide device list (GPU = local rank) and one visible GPU
// per rank (SLURM --gpus-per-task, CUDA_VISIBLE_DEVICES set per rank) work.
// -1 when there is no device.
int device_for_local_rank(int local_rank, int device_count);
int device_for_local_rank(int local_rank);  // with this machine's device count

// The auto rule over what every rank reported: the UUID of its GPU, or "" when
// it has no GPU or this build has no NCCL. nccl when every rank has a GPU no
// other rank has; otherwise ring (which lets ranks share GPUs).
std::string choose_backend(const std::vector<std::string>& gpu_of_rank);

// The NCCL library's version as loaded at run time ("2.28.9"), or "" in a build without the nccl backend.
std::string nccl_version();

}  // namespace tandem::comm
