// Who this process is in the job: rank, world size, local rank, and where
// the rendezvous store lives, read from the environment a launcher set.
//
// Sources, in the order they are tried:
//   - `tandem launch` and torchrun (`--no-python`): RANK, WORLD_SIZE,
//     LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//   - Open MPI (`mpirun`): OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;
//   - SLURM (`srun`): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID
//     and SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE) for the local size.
// Under MPI and SLURM, MASTER_ADDR/MASTER_PORT still win when set; otherwise
// the address is the first host of SLURM_STEP_NODELIST/SLURM_JOB_NODELIST
// (SLURM) or 127.0.0.1 when the job is on one node (MPI), and the port is
// 29500. A missing, malformed or inconsistent variable is an Error naming it.
//
// The store: rank 0 hosts it on MASTER_ADDR:MASTER_PORT unless
// TANDEM_STORE_HOSTED=1 says the launcher already does (tandem launch).
// Under torchrun, whose agent keeps its own store on MASTER_PORT, ours uses
// MASTER_PORT + 1. TANDEM_STORE_TOKEN, when set, authenticates every client.
#pragma once

#include <functional>
#include <string>

namespace tandem::comm {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int store_port = 29500;            // where the store listens (see above)
  bool store_hosted_externally = false;
  std::string store_token;
  std::string source = "default";    // "tandem launch", "torchrun", "env", "openmpi", "slurm", "default"

  std::string str() const;  // "rank 2/4 (local 0/2) from slurm, store 10.0.0.1:29500"
};

using GetEnv = std::function<const char*(const char*)>;

// Reads the variables above through `getenv` (the process environment by default).
// With no launcher variables at all, a single-process job (rank 0 of 1) is assumed.
RankInfo rank_info_from_env(const GetEnv& getenv = nullptr);

// Expands a SLURM tasks-per-node list such as "2(x3),1" and returns the entry for node `node`.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node);
// The first host name of a SLURM node list such as "gpu[07-09,12],login1" ("gpu07").
std::string slurm_first_host(const std::string& nodelist);

}  // namespace tandem::comm
