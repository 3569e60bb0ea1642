#include "comm/rank_env.h"

#include <cstdlib>
#include <fmt/format.h>

#include "core/check.h"
#include "core/parse_number.h"

namespace tandem::comm {

namespace {

class Env {
 public:
  explicit Env(const GetEnv& getenv) : getenv_(getenv) {}
  bool has(const char* name) const {
    const char* v = getenv_(name);
    return v != nullptr && *v != '\0';
  }
  std::string str(const char* name) const {
    const char* v = getenv_(name);
    return v ? v : "";
  }
  int integer(const char* name) const {
    TANDEM_CHECK(has(name), "environment variable {} is not set (needed to find this process's rank)", name);
    const std::string text = str(name);
    const std::optional<int64_t> v = parse_int64(text);
    TANDEM_CHECK(v && *v >= -(int64_t{1} << 31) && *v < (int64_t{1} << 31),
                 "environment variable {}='{}' is not an integer", name, text);
    return static_cast<int>(*v);
  }
  int integer_or(const char* name, int fallback) const { return has(name) ? integer(name) : fallback; }

 private:
  const GetEnv& getenv_;
};

void validate(const RankInfo& r, const std::string& vars) {
  TANDEM_CHECK(r.world_size >= 1, "{}: world size {} must be at least 1", vars, r.world_size);
  TANDEM_CHECK(r.rank >= 0 && r.rank < r.world_size, "{}: rank {} is outside [0, {})", vars, r.rank, r.world_size);
  TANDEM_CHECK(r.local_world_size >= 1 && r.local_world_size <= r.world_size,
               "{}: local world size {} must be in [1, world size {}]", vars, r.local_world_size, r.world_size);
  TANDEM_CHECK(r.local_rank >= 0 && r.local_rank < r.local_world_size, "{}: local rank {} is outside [0, {})", vars,
               r.local_rank, r.local_world_size);
  TANDEM_CHECK(r.master_port >= 1 && r.master_port <= 65535, "MASTER_PORT={} is not a port (1-65535)",
               r.master_port);
  TANDEM_CHECK(r.store_port >= 1 && r.store_port <= 65535, "store port {} is not a port (MASTER_PORT={})",
               r.store_port, r.master_port);
  TANDEM_CHECK(!r.master_addr.empty(), "MASTER_ADDR is empty");
}

}  // namespace

std::string RankInfo::str() const {
  return fmt::format("rank {}/{} (local {}/{}) from {}, store {}:{}", rank, world_size, local_rank, local_world_size,
                     source, master_addr, store_port);
}

int slurm_tasks_on_node(const std::string& list, int node) {
  TANDEM_CHECK(node >= 0, "SLURM_NODEID={} is negative", node);
  int index = 0;
  size_t i = 0;
  auto bad = [&] { TANDEM_FAIL("cannot parse SLURM tasks-per-node list '{}'", list); };
  while (i < list.size()) {
    size_t j = i;
    while (j < list.size() && std::isdigit(static_cast<unsigned char>(list[j]))) ++j;
    if (j == i) bad();
    int tasks = std::stoi(list.substr(i, j - i));
    int repeat = 1;
    if (j < list.size() && list[j] == '(') {
      size_t close = list.find(')', j);
      if (close == std::string::npos || list.compare(j, 2, "(x") != 0) bad();
      std::string r = list.substr(j + 2, close - j - 2);
      if (r.empty() || r.find_first_not_of("0123456789") != std::string::npos) bad();
      repeat = std::stoi(r);
      j = close + 1;
    }
    if (node < index + repeat) return tasks;
    index += repeat;
    if (j < list.size()) {
      if (list[j] != ',') bad();
      ++j;
    }
    i = j;
  }
  TANDEM_FAIL("SLURM tasks-per-node list '{}' has no entry for node {}", list, node);
}

std::string slurm_first_host(const std::string& nodelist) {
  size_t end = nodelist.find_first_of(",[");
  if (end == std::string::npos || nodelist[end] == ',') return nodelist.substr(0, end);
  std::string prefix = nodelist.substr(0, end);
  size_t close = nodelist.find(']', end);
  TANDEM_CHECK(close != std::string::npos, "cannot parse SLURM node list '{}'", nodelist);
  std::string first = nodelist.substr(end + 1, close - end - 1);
  first = first.substr(0, first.find_first_of(",-"));
  TANDEM_CHECK(!first.empty(), "cannot parse SLURM node list '{}'", nodelist);
  return prefix + first;
}

RankInfo rank_info_from_env(const GetEnv& getenv_in) {
  GetEnv getenv = getenv_in ? getenv_in : GetEnv([](const char* n) { return std::getenv(n); });
  Env env(getenv);
  RankInfo r;
  std::string vars;
  bool default_master = false;
  if (env.has("RANK") || env.has("WORLD_SIZE")) {
    vars = "RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE";
    r.source = env.has("TANDEM_LAUNCH") ? "tandem launch" : env.has("TORCHELASTIC_RUN_ID") ? "torchrun" : "env";
    r.rank = env.integer("RANK");
    r.world_size = env.integer("WORLD_SIZE");
    if (r.world_size == 1) {
      r.local_rank = env.integer_or("LOCAL_RANK", 0);
      r.local_world_size = env.integer_or("LOCAL_WORLD_SIZE", 1);
    } else {
      r.local_rank = env.integer("LOCAL_RANK");
      r.local_world_size = env.integer("LOCAL_WORLD_SIZE");
    }
    TANDEM_CHECK(r.world_size == 1 || env.has("MASTER_ADDR"),
                 "MASTER_ADDR is not set (RANK={} of WORLD_SIZE={} needs the rendezvous address)", r.rank,
                 r.world_size);
    TANDEM_CHECK(r.world_size == 1 || env.has("MASTER_PORT"),
                 "MASTER_PORT is not set (RANK={} of WORLD_SIZE={} needs the rendezvous port)", r.rank,
                 r.world_size);
  } else if (env.has("OMPI_COMM_WORLD_RANK")) {
    vars = "OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}";
    r.source = "openmpi";
    r.rank = env.integer("OMPI_COMM_WORLD_RANK");
    r.world_size = env.integer("OMPI_COMM_WORLD_SIZE");
    r.local_rank = env.integer("OMPI_COMM_WORLD_LOCAL_RANK");
    r.local_world_size = env.integer("OMPI_COMM_WORLD_LOCAL_SIZE");
    TANDEM_CHECK(env.has("MASTER_ADDR") || r.local_world_size == r.world_size,
                 "MASTER_ADDR is not set and this Open MPI job spans several nodes: export MASTER_ADDR "
                 "(the host of rank 0) with mpirun -x MASTER_ADDR");
    default_master = true;
  } else if (env.has("SLURM_PROCID")) {
    vars = "SLURM_{PROCID,NTASKS,LOCALID,NODEID,STEP_TASKS_PER_NODE}";
    r.source = "slurm";
    r.rank = env.integer("SLURM_PROCID");
    r.world_size = env.has("SLURM_NTASKS") ? env.integer("SLURM_NTASKS") : env.integer("SLURM_NPROCS");
    r.local_rank = env.integer("SLURM_LOCALID");
    const char* per_node = env.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    TANDEM_CHECK(env.has(per_node), "SLURM_STEP_TASKS_PER_NODE is not set (needed for the local world size)");
    r.local_world_size = slurm_tasks_on_node(env.str(per_node), env.integer_or("SLURM_NODEID", 0));
    if (!env.has("MASTER_ADDR")) {
      const char* list = env.has("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
      TANDEM_CHECK(env.has(list), "neither MASTER_ADDR nor SLURM_STEP_NODELIST/SLURM_JOB_NODELIST is set");
      r.master_addr = slurm_first_host(env.str(list));
    }
    default_master = true;
  }
  if (env.has("MASTER_ADDR")) r.master_addr = env.str("MASTER_ADDR");
  if (env.has("MASTER_PORT") || !default_master) r.master_port = env.integer_or("MASTER_PORT", 29500);
  r.store_port = r.master_port;
  if (r.source == "torchrun") r.store_port = r.master_port + 1;
  r.store_hosted_externally = env.str("TANDEM_STORE_HOSTED") == "1";
  r.store_token = env.str("TANDEM_STORE_TOKEN");
  validate(r, vars.empty() ? "defaults" : vars);
  return r;
}

}  // namespace tandem::comm
