// walcut cluster snapshot DIR: asks a running real cluster for a full
// snapshot. The initiator pauses the transactions (they wait, none is
// aborted), every node writes its state to DIR/snapshots/NAME/node-I.snap
// and a SNAPSHOT record to its WAL, the snapshot is listed in cluster.json,
// and the transactions resume; with --wal-retention after-snapshot each node
// then deletes the WAL segments the snapshot makes unnecessary. Exit 0: taken
// and listed; 3: no node answered, or none could take it in time; 2: a bad
// name or one that exists.

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "cli/cluster_common.h"
#include "cli/command.h"
#include "cli/output.h"
#include "node/process.h"
#include "walfmt/duration.h"

namespace walcut::cli {
namespace {

using walfmt::Status;

struct SnapshotOpts {
  std::string dir;
  std::string name;
  std::string timeout = "60s";
  Format format = Format::kText;
};

int Fail(const Status& st) {
  PrintError(st.message());
  return ExitForStatus(st);
}

void Print(const SnapshotOpts& o, const walfmt::ClusterInfo& info, const std::string& name, uint32_t initiator) {
  const walfmt::FullSnapshotInfo* sn = info.FindSnapshot(name);
  if (o.format == Format::kJson) {
    nlohmann::ordered_json j;
    j["schema"] = "walcut.cluster-snapshot/1";
    j["name"] = name;
    j["initiator"] = initiator;
    j["dir"] = sn ? sn->dir : "snapshots/" + name;
    j["nodes"] = nlohmann::ordered_json::array();
    if (sn) {
      for (const auto& n : sn->nodes) {
        nlohmann::ordered_json jn;
        jn["node"] = n.node;
        jn["wal_position"] = n.wal_position.ToString();
        jn["fingerprint"] = fmt::format("{:016x}", n.fingerprint);
        j["nodes"].push_back(std::move(jn));
      }
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("full snapshot {} taken by node {}\n", name, initiator);
  if (!sn) return;
  for (const auto& n : sn->nodes) {
    fmt::print("  node {}  SNAPSHOT at {}  fingerprint {:016x}\n", n.node, n.wal_position.ToString(), n.fingerprint);
  }
}

int RunClusterSnapshot(const SnapshotOpts& o) {
  if (!o.name.empty() && !node::ValidSnapshotName(o.name)) {
    return Fail(Status::InvalidArgument(fmt::format(
        "--name: '{}' is not a snapshot name (1 to 64 of A-Z a-z 0-9 . _ -, not starting with . or -)", o.name)));
  }
  auto timeout_us = walfmt::ParseDuration(o.timeout);
  if (!timeout_us.ok() || *timeout_us < 1000 || *timeout_us > uint64_t{3600} * 1000000) {
    return Fail(Status::InvalidArgument(fmt::format("--timeout: '{}': a duration from 1ms to 1h", o.timeout)));
  }
  const std::string dir = AbsoluteDir(o.dir);
  auto l = LoadRealCluster(dir);
  if (!l.ok()) return Fail(l.status());
  std::error_code ec;
  if (!o.name.empty() &&
      (l->info.FindSnapshot(o.name) != nullptr || std::filesystem::exists(dir + "/snapshots/" + o.name, ec))) {
    return Fail(Status::InvalidArgument(fmt::format("--name: {} has a snapshot named {}", dir, o.name)));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(*timeout_us);
  std::string last = "no node is running";
  bool answered = false;                                  // a node has given a reason
  constexpr auto kRetry = std::chrono::milliseconds(50);  // between two calls
  while (std::chrono::steady_clock::now() < deadline) {
    uint32_t initiator = node::sim::kNoNode;
    auto m = CallInitiator(dir, *l, node::wire::SnapshotRequest{o.name}, deadline, initiator);
    const auto* r = m.ok() ? std::get_if<node::wire::SnapshotReply>(&*m) : nullptr;
    if (r != nullptr && r->ok) {
      auto info = walfmt::LoadClusterInfo(dir);
      if (!info.ok()) return Fail(info.status());
      Print(o, *info, r->name, initiator);
      return kExitOk;
    }
    // The last call, when it got no answer, was cut short by the deadline
    // and tells nothing about the cluster: the reason a node gave before it
    // is the one to report. (A call that waits for an answer may give up a
    // few milliseconds before the deadline; no call follows within kRetry.)
    if (!m.ok() && answered && std::chrono::steady_clock::now() + kRetry >= deadline) break;
    // Not the initiator any more, a node down or restarting, a cut or
    // another snapshot running: ask again until the time is up.
    last = r != nullptr ? r->error : m.ok() ? "an unexpected answer" : m.status().message();
    answered = answered || r != nullptr;
    if (r != nullptr && r->error.rfind("a snapshot named ", 0) == 0) {  // made since the check above
      return Fail(Status::InvalidArgument(r->error));
    }
    std::this_thread::sleep_for(kRetry);
  }
  return Fail(Status::Io(fmt::format("{}: no full snapshot could be taken within {}: {}", dir, o.timeout, last)));
}

void RegisterClusterSnapshot(CLI::App& root, Registry& reg) {
  CLI::App* cl = root.get_subcommand("cluster");
  auto o = std::make_shared<SnapshotOpts>();
  CLI::App* s = cl->add_subcommand(
      "snapshot", "Take a full snapshot of the running cluster (transactions paused, not aborted) and list it");
  s->add_option("dir", o->dir, "Cluster directory")->required();
  s->add_option("--name", o->name, "The snapshot's name (default: full-N, the next free N)");
  s->add_option("--timeout", o->timeout,
                "Give up after this long (a duration; a node down or restarting, a cut running: asked again)")
      ->capture_default_str();
  AddFormatOption(s, o->format);
  reg.Add(s, [o] { return RunClusterSnapshot(*o); });
}

const CommandRegistrar kRegister{56, RegisterClusterSnapshot};
}  // namespace

}  // namespace walcut::cli
