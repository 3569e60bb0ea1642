// `tandem launch`: start one process per rank on this node (comm/launcher.h).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "apps/commands.h"
#include "comm/launcher.h"
#include "core/check.h"

namespace tandem::apps {

namespace {
void forward_signal(int sig) { comm::request_launch_stop(sig); }
}  // namespace

void add_launch_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "launch", "Start one process per rank with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ... set: "
                "tandem launch --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P] -- CMD...");
  auto o = std::make_shared<comm::LaunchOptions>();
  auto timeout_s = std::make_shared<double>(0);
  cmd->add_option("--nproc-per-node", o->nproc_per_node, "Processes (ranks) on this node")
      ->required()
      ->check(CLI::Range(1, kMaxLocalRanks));
  cmd->add_option("--nnodes", o->nnodes, "Number of nodes in the job")->capture_default_str();
  cmd->add_option("--node-rank", o->node_rank, "This node's index in [0, nnodes)")->capture_default_str();
  cmd->add_option("--master-addr", o->master_addr, "Address of node 0, where the store runs")->capture_default_str();
  cmd->add_option("--master-port", o->master_port, "Store port on node 0 (0: pick a free one; single node only)")
      ->capture_default_str();
  cmd->add_flag("--prefix-output", o->prefix_output, "Prefix each output line with [rank N]");
  cmd->add_option("--timeout", *timeout_s, "Stop the job after this many seconds (0: never)");
  cmd->add_option("command", o->command, "The program to run and its arguments (after --)")->required();
  cmd->callback([o, timeout_s] {
    // NaN passes every comparison, and 1e10 s overflows the milliseconds below.
    TANDEM_CHECK(*timeout_s >= 0 && *timeout_s <= 1e9, "--timeout must be in [0, 1e9] seconds (0: never), got {}",
                 *timeout_s);
    o->timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeout_s * 1000));
    std::signal(SIGINT, forward_signal);
    std::signal(SIGTERM, forward_signal);
    comm::LaunchResult r = comm::launch(*o);
    if (r.exit_code != 0) {
      std::fprintf(stderr, "tandem launch: %s\n", r.message.c_str());
      std::fflush(stdout);
      std::exit(r.exit_code);
    }
  });
}

}  // namespace tandem::apps
