// walcut node DIR --node I: one node of a real cluster, in the foreground
// (node/process.h). `walcut cluster up` and `restart` start it; run by hand
// it is the same process.

#include <atomic>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/signals.h"
#include "node/process.h"

namespace walcut::cli {
namespace {

struct NodeOpts {
  std::string dir;
  uint32_t node = 0;
};

int RunNode(const NodeOpts& o) {
  node::ProcessOptions p;
  p.dir = o.dir;
  p.node = o.node;
  p.log = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };
  // SIGTERM and SIGINT stop the node as it stops itself (a running cut
  // finished, the WAL synced); a second one ends the process at once.
  std::atomic<bool> stop{false};
  p.stop = &stop;
  StopOnSignal(&stop);
  walfmt::Status st = node::RunNodeProcess(p);
  StopOnSignal(nullptr);
  if (!st.ok()) {
    PrintError(st.message());
    return ExitForStatus(st);
  }
  return kExitOk;
}

void RegisterNode(CLI::App& root, Registry& reg) {
  auto node_o = std::make_shared<NodeOpts>();
  CLI::App* n = root.add_subcommand("node", "Run one node of a real cluster (walcut cluster up starts them)");
  n->add_option("dir", node_o->dir, "Cluster directory (cluster.json, runtime.json)")->required();
  AddNumber(n, "--node", node_o->node, {0, 63}, "The node to run")->required();
  reg.Add(n, [node_o] { return RunNode(*node_o); });
}

const CommandRegistrar kRegister{52, RegisterNode};
}  // namespace

}  // namespace walcut::cli
