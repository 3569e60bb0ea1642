// Ranks start correctly from other launchers' variables: SLURM (srun) and
// Open MPI (mpirun) as those launchers set them, and the real torchrun and
// mpirun when they are installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>

#include "tests/comm/run_job.h"

namespace tandem {
namespace {

using testing::run_job;

// Replaces tandem launch's variables with another launcher's, then runs the worker.
std::vector<std::string> as_other_launcher(const std::string& assignments) {
  return {"/bin/sh", "-c",
          "exec env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u MASTER_ADDR -u TANDEM_LAUNCH " +
              assignments + " " + TANDEM_COMM_WORKER + " rendezvous"};
}

TEST(OtherLaunchers, SlurmVariablesFormTheJob) {
  auto run = run_job(3, as_other_launcher("SLURM_PROCID=$RANK SLURM_NTASKS=$WORLD_SIZE SLURM_LOCALID=$LOCAL_RANK "
                                          "SLURM_NODEID=0 SLURM_STEP_TASKS_PER_NODE=$WORLD_SIZE "
                                          "SLURM_STEP_NODELIST=localhost"));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.output();
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(run.output_of(r).find("rendezvous ok (rank " + std::to_string(r) + "/3 (local " + std::to_string(r) +
                                    "/3) from slurm, store localhost:"),
              std::string::npos)
        << run.output();
}

TEST(OtherLaunchers, OpenMpiVariablesFormTheJob) {
  auto run = run_job(2, as_other_launcher("OMPI_COMM_WORLD_RANK=$RANK OMPI_COMM_WORLD_SIZE=$WORLD_SIZE "
                                          "OMPI_COMM_WORLD_LOCAL_RANK=$LOCAL_RANK "
                                          "OMPI_COMM_WORLD_LOCAL_SIZE=$LOCAL_WORLD_SIZE"));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.message << "\n" << run.output();
  EXPECT_NE(run.output_of(1).find("rendezvous ok (rank 1/2 (local 1/2) from openmpi"), std::string::npos)
      << run.output();
}

int shell(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, k);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool have(const std::string& probe) {
  std::string ignored;
  return shell(probe + " >/dev/null", &ignored) == 0;
}

// A port unlikely to be busy, different per test process.
std::string port_for(int offset) { return std::to_string(20000 + (::getpid() * 7 + offset) % 20000); }

TEST(OtherLaunchers, RealTorchrunNoPython) {
  if (!have("python3 -c 'import torch.distributed.run'")) GTEST_SKIP() << "torch is not installed";
  std::string out;
  int code = shell("timeout 120 python3 -m torch.distributed.run --nproc-per-node 2 --master-port " + port_for(0) +
                       " --no-python " + TANDEM_COMM_WORKER + " rendezvous",
                   &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("rank 1: rendezvous ok (rank 1/2 (local 1/2) from torchrun"), std::string::npos) << out;
}

TEST(OtherLaunchers, RealMpirun) {
  if (!have("command -v mpirun")) GTEST_SKIP() << "mpirun (openmpi-bin) is not installed";
  std::string out;
  int code = shell("timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 -x MASTER_PORT=" + port_for(1) + " " +
                       TANDEM_COMM_WORKER + " rendezvous",
                   &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("rank 1: rendezvous ok (rank 1/2 (local 1/2) from openmpi"), std::string::npos) << out;
}

}  // namespace
}  // namespace tandem
