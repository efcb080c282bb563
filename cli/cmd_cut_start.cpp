// walcut cut start DIR: asks a running real cluster for a consistent cut.
// It finds the initiator (any live node's status names it), sends it a
// CutRequest and waits for the cut to complete. Exit 0: the cut is
// consistent; 1: it completed inconsistent (walcut cuts DIR says why);
// 3: no node answered, or none could start it in time.

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "cli/cluster_common.h"
#include "cli/command.h"
#include "cli/output.h"

namespace walcut::cli {
namespace {

using walfmt::Status;

constexpr auto kCutTimeout = std::chrono::seconds(60);

struct CutStartOpts {
  std::string dir;
  Format format = Format::kText;
};

int Fail(const Status& st) {
  PrintError(st.message());
  return ExitForStatus(st);
}

int RunCutStart(const CutStartOpts& o) {
  const std::string dir = AbsoluteDir(o.dir);
  auto l = LoadRealCluster(dir);
  if (!l.ok()) return Fail(l.status());
  const auto deadline = std::chrono::steady_clock::now() + kCutTimeout;
  std::string last = "no node is running";
  while (std::chrono::steady_clock::now() < deadline) {
    uint32_t initiator = node::sim::kNoNode;
    auto m = CallInitiator(dir, *l, node::wire::CutRequest{}, deadline, initiator);
    const auto* r = m.ok() ? std::get_if<node::wire::CutReply>(&*m) : nullptr;
    if (r != nullptr && r->cut_id != 0) {
      if (o.format == Format::kJson) {
        nlohmann::ordered_json j;
        j["schema"] = "walcut.cut-start/1";
        j["cut"] = r->cut_id;
        j["consistent"] = r->ok;
        j["initiator"] = initiator;
        if (!r->ok) j["error"] = r->error;
        fmt::print("{}\n", j.dump(2));
      } else if (r->ok) {
        fmt::print("cut {} taken by node {}: consistent\n", r->cut_id, initiator);
      } else {
        fmt::print("cut {} taken by node {}: INCONSISTENT ({})\n", r->cut_id, initiator, r->error);
      }
      return r->ok ? kExitOk : kExitFindings;
    }
    // Not the initiator any more, a cut running, no answer: ask again.
    last = r != nullptr ? r->error : m.ok() ? "an unexpected answer" : m.status().message();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Fail(Status::Io(fmt::format("{}: no cut could be started within {} s: {}", dir,
                                     std::chrono::duration_cast<std::chrono::seconds>(kCutTimeout).count(), last)));
}

void RegisterCutStart(CLI::App& root, Registry& reg) {
  CLI::App* cut = root.get_subcommand("cut");
  auto o = std::make_shared<CutStartOpts>();
  CLI::App* start = cut->add_subcommand("start", "Ask a running cluster (walcut cluster up) for a consistent cut");
  start->add_option("dir", o->dir, "Cluster directory")->required();
  AddFormatOption(start, o->format);
  reg.Add(start, [o] { return RunCutStart(*o); });
}

const CommandRegistrar kRegister{66, RegisterCutStart};
}  // namespace

}  // namespace walcut::cli
