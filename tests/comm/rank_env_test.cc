// Rank information from each launcher's variables, and clear errors for bad ones.
#include <gtest/gtest.h>

#include <map>

#include "comm/rank_env.h"
#include "core/check.h"

namespace tandem::comm {
namespace {

RankInfo parse(const std::map<std::string, std::string>& env) {
  return rank_info_from_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    parse(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RankEnv, NoVariablesMeansASingleProcessJob) {
  RankInfo r = parse({});
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 1);
}

TEST(RankEnv, TandemLaunchVariables) {
  RankInfo r = parse({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                      {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "4000"}, {"TANDEM_LAUNCH", "1"},
                      {"TANDEM_STORE_HOSTED", "1"}, {"TANDEM_STORE_TOKEN", "tok"}});
  EXPECT_EQ(r.source, "tandem launch");
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 4);
  EXPECT_EQ(r.master_addr, "10.0.0.1");
  EXPECT_EQ(r.store_port, 4000);
  EXPECT_TRUE(r.store_hosted_externally);
  EXPECT_EQ(r.store_token, "tok");
}

TEST(RankEnv, TorchrunKeepsItsOwnStoreOnMasterPortSoOursUsesTheNext) {
  RankInfo r = parse({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"},
                      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "x"}});
  EXPECT_EQ(r.source, "torchrun");
  EXPECT_EQ(r.store_port, 29501);
  EXPECT_FALSE(r.store_hosted_externally);
}

TEST(RankEnv, OpenMpiVariablesOnOneNode) {
  RankInfo r = parse({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(r.source, "openmpi");
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.master_addr, "127.0.0.1");
  EXPECT_EQ(r.master_port, 29500);
}

TEST(RankEnv, OpenMpiAcrossNodesNeedsMasterAddr) {
  std::string e = error_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_NE(e.find("MASTER_ADDR"), std::string::npos) << e;
}

TEST(RankEnv, SlurmVariables) {
  RankInfo r = parse({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
                      {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"}, {"SLURM_STEP_NODELIST", "gpu[07-09]"}});
  EXPECT_EQ(r.source, "slurm");
  EXPECT_EQ(r.rank, 4);
  EXPECT_EQ(r.world_size, 7);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.local_world_size, 3);
  EXPECT_EQ(r.master_addr, "gpu07");
}

TEST(RankEnv, SlurmLocalIdBeyondItsNodesTaskCountIsAnError) {
  // Node 2 runs one task, so local id 1 cannot exist there.
  std::string e = error_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"},
                            {"SLURM_NODEID", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"},
                            {"SLURM_STEP_NODELIST", "gpu[07-09]"}});
  EXPECT_NE(e.find("local rank 1 is outside [0, 1)"), std::string::npos) << e;
}

TEST(RankEnv, SlurmTasksPerNodeLists) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_THROW(slurm_tasks_on_node("2(x3),1", 4), Error);
  EXPECT_THROW(slurm_tasks_on_node("2(y3)", 0), Error);
}

TEST(RankEnv, SlurmNodeListsGiveTheFirstHost) {
  EXPECT_EQ(slurm_first_host("node1"), "node1");
  EXPECT_EQ(slurm_first_host("gpu[07-09,12],login1"), "gpu07");
  EXPECT_EQ(slurm_first_host("a,b"), "a");
}

TEST(RankEnv, RankOutsideTheWorldIsAnError) {
  std::string e = error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"},
                            {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(e.find("rank 4 is outside [0, 4)"), std::string::npos) << e;
}

TEST(RankEnv, NonIntegerValueIsNamed) {
  std::string e = error_of({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(e.find("RANK='one' is not an integer"), std::string::npos) << e;
}

TEST(RankEnv, MissingMasterAddrIsNamed) {
  std::string e = error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_NE(e.find("MASTER_ADDR is not set"), std::string::npos) << e;
}

TEST(RankEnv, MissingLocalRankIsNamed) {
  std::string e = error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(e.find("LOCAL_RANK is not set"), std::string::npos) << e;
}

TEST(RankEnv, LocalWorldLargerThanTheWorldIsAnError) {
  std::string e = error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "3"},
                            {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(e.find("local world size 3"), std::string::npos) << e;
}

TEST(RankEnv, PortOutOfRangeIsAnError) {
  std::string e = error_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}});
  EXPECT_NE(e.find("MASTER_PORT=70000"), std::string::npos) << e;
}

}  // namespace
}  // namespace tandem::comm
