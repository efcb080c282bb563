// walcut cluster up|down|kill|restart|status DIR: a real cluster of node
// processes on the loopback (node/process.h). `up` writes cluster.json and
// runtime.json, starts one `walcut node` process per node (in its own
// session, output in DIR/node-<i>/node.log) and waits until the initial data
// is in; the others act on the processes runtime.json names, after checking
// that each pid still runs `walcut node` on DIR.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <asio.hpp>

#include "cli/cluster_common.h"
#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "node/client.h"
#include "node/cluster.h"
#include "node/runtime_file.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/strings.h"

extern char** environ;

namespace walcut::cli {
namespace {

namespace fs = std::filesystem;
using node::RuntimeInfo;
using walfmt::Status;

constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr auto kStopTimeout = std::chrono::seconds(20);

struct UpOpts {
  std::string dir;
  node::ClusterOptions cluster;
  std::string workload = "bank";
  std::string sync = "group";
  std::string cut_every;
  std::string full_snapshot_every;
  std::string wal_retention = "keep";
  uint64_t segment_bytes = 1u << 20;
  uint32_t base_port = 0;
};

struct NodeOpts {
  std::string dir;
  uint32_t node = 0;
};

// A free loopback port, as the kernel picks it (bound and released: another
// program could take it before the node does, which the node then reports).
Status PickPort(uint16_t& port) {
  asio::io_context io;
  asio::ip::tcp::acceptor a(io);
  std::error_code ec;
  a.open(asio::ip::tcp::v4(), ec);
  if (!ec) a.bind(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0), ec);
  if (ec) return Status::Io(fmt::format("cannot pick a free port: {}", ec.message()));
  port = a.local_endpoint().port();
  return Status::Ok();
}

Status SpawnNode(const std::string& dir, uint32_t node, int64_t& pid) {
  const std::string log = fmt::format("{}/node-{}/node.log", dir, node);
  std::error_code ec;
  fs::create_directories(fmt::format("{}/node-{}", dir, node), ec);
  if (ec) return Status::Io(fmt::format("{}/node-{}: cannot create: {}", dir, node, ec.message()));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  const std::string node_s = std::to_string(node);
  std::vector<char*> argv = {const_cast<char*>(self.c_str()),   const_cast<char*>("node"),
                             const_cast<char*>(dir.c_str()),    const_cast<char*>("--node"),
                             const_cast<char*>(node_s.c_str()), nullptr};
  pid_t child = 0;
  const int rc = posix_spawn(&child, self.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::Io(fmt::format("cannot start node {}: {}", node, std::strerror(rc)));
  pid = child;
  return Status::Ok();
}

// Reaps pid if it is our child (cluster up, restart), so that a node that
// died at once is seen dead rather than a zombie. Returns how it ended ("exit
// status 3", "signal 11 (Segmentation fault)"), or "" while it runs or when
// it is not our child.
std::string Reap(int64_t pid) {
  int status = 0;
  if (waitpid(static_cast<pid_t>(pid), &status, WNOHANG) != static_cast<pid_t>(pid)) return "";
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "";
}

// Waits until node n answers ready, its process dies, or the time is up.
Status WaitReady(const std::string& dir, const RuntimeInfo& rt, uint64_t cluster_id, uint32_t n) {
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string how = Reap(rt.pids[n]);
    if (!IsOurNode(rt.pids[n], dir, n)) {
      // Our child: waitpid says whether and how it ended (it may have died
      // just after the Reap above; a child still running is waited for).
      for (int i = 0; i < 20 && how.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        how = Reap(rt.pids[n]);
      }
      int ignored = 0;
      if (!how.empty() || waitpid(static_cast<pid_t>(rt.pids[n]), &ignored, WNOHANG) != 0) {
        return Status::Io(fmt::format("node {} exited while starting{} (see {}/node-{}/node.log)", n,
                                      how.empty() ? "" : ": " + how, dir, n));
      }
    }
    auto s = AskStatus(rt, cluster_id, n);
    if (s.ok() && s->ready) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Io(fmt::format("node {} was not ready within {} s (see {}/node-{}/node.log)", n,
                                std::chrono::duration_cast<std::chrono::seconds>(kStartTimeout).count(), dir, n));
}

// Stops pid: SIGTERM (the node syncs its WAL and exits), SIGKILL if it has
// not exited in time.
void StopProcess(int64_t pid, const std::string& dir, uint32_t n, int sig) {
  if (!IsOurNode(pid, dir, n)) return;
  kill(static_cast<pid_t>(pid), sig);
  const auto deadline = std::chrono::steady_clock::now() + kStopTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    Reap(pid);
    if (!IsOurNode(pid, dir, n)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(static_cast<pid_t>(pid), SIGKILL);
  for (int i = 0; i < 500 && IsOurNode(pid, dir, n); ++i) {
    Reap(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Fail(const Status& st) {
  PrintError(st.message());
  return ExitForStatus(st);
}

int RunUp(UpOpts& o) {
  const std::string dir = AbsoluteDir(o.dir);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    const bool ours = fs::exists(walfmt::JoinPath(dir, node::kRuntimeFile), ec);
    return Fail(Status::InvalidArgument(
        ours ? fmt::format("{}: a real cluster is already there (walcut cluster down, or restart a node)", dir)
             : fmt::format("{}: not empty (it holds another cluster or other files)", dir)));
  }
  node::ClusterOptions& c = o.cluster;
  c.dir = dir;
  if (!walfmt::ParseWorkload(o.workload, c.workload.workload)) {
    return Fail(Status::InvalidArgument(fmt::format("--workload: '{}' is not bank, cycle or mixed", o.workload)));
  }
  if (Status st = node::NormalizeOptions(c); !st.ok()) return Fail(st);
  RuntimeInfo rt;
  if (!node::ParseSyncMode(o.sync, rt.sync)) {
    return Fail(Status::InvalidArgument(fmt::format("--sync: '{}' is not always, group or off", o.sync)));
  }
  if (!o.cut_every.empty()) {
    auto d = walfmt::ParseDuration(o.cut_every);
    if (!d.ok() || *d < 1000) {
      return Fail(Status::InvalidArgument(fmt::format("--cut-every: '{}': a duration of at least 1ms", o.cut_every)));
    }
    rt.cut_every_us = *d;
  }
  if (!o.full_snapshot_every.empty()) {
    auto d = walfmt::ParseDuration(o.full_snapshot_every);
    if (!d.ok() || *d < 100000) {
      return Fail(Status::InvalidArgument(
          fmt::format("--full-snapshot-every: '{}': a duration of at least 100ms", o.full_snapshot_every)));
    }
    rt.full_snapshot_every_us = *d;
  }
  if (!node::ParseWalRetention(o.wal_retention, rt.wal_retention)) {
    return Fail(
        Status::InvalidArgument(fmt::format("--wal-retention: '{}' is not keep or after-snapshot", o.wal_retention)));
  }
  const uint64_t seg = o.segment_bytes;
  rt.segment_bytes = seg;
  for (uint32_t n = 0; n < c.nodes; ++n) {
    uint16_t port = 0;
    if (o.base_port != 0) {
      if (o.base_port + n > 65535) return Fail(Status::InvalidArgument("--base-port: the ports pass 65535"));
      port = static_cast<uint16_t>(o.base_port + n);
    } else if (Status st = PickPort(port); !st.ok()) {
      return Fail(st);
    }
    rt.ports.push_back(port);
    rt.pids.push_back(0);
  }

  walfmt::ClusterInfo info;
  std::random_device rd;
  info.cluster_id = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  info.seed = c.seed;
  const uint64_t now_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  info.epoch_unix_us = now_us;
  info.nodes = c.nodes;
  info.backups = c.backups;
  info.partitions = c.partitions;
  info.workload = c.workload.workload;
  info.accounts = c.workload.accounts;
  info.ring_keys = c.workload.ring;
  info.initial_balance = c.workload.initial_balance;
  info.initial_bank_total = node::InitialBankTotal(c.workload);
  for (uint32_t n = 0; n < c.nodes; ++n) info.node_wal_dirs.push_back(walfmt::NodeWalDirName(n));
  if (rt.wal_retention != node::WalRetention::kKeep) {
    info.wal_retention = node::WalRetentionName(rt.wal_retention);
    info.first_segment.assign(c.nodes, 0);
  }
  walfmt::ClusterRunRecord run;
  run.segment_bytes = seg;
  run.complete = false;
  fs::create_directories(dir, ec);
  if (ec) return Fail(Status::Io(fmt::format("{}: cannot create: {}", dir, ec.message())));
  if (Status st = walfmt::WriteClusterJson(dir, info, run); !st.ok()) return Fail(st);
  if (Status st = node::SaveRuntimeInfo(dir, rt); !st.ok()) return Fail(st);

  Status failed;
  for (uint32_t n = 0; n < c.nodes && failed.ok(); ++n) failed = SpawnNode(dir, n, rt.pids[n]);
  if (failed.ok()) failed = node::SaveRuntimeInfo(dir, rt);
  // Node 0 is ready once every node is connected and the initial data is in.
  if (failed.ok()) failed = WaitReady(dir, rt, info.cluster_id, 0);
  for (uint32_t n = 1; n < c.nodes && failed.ok(); ++n) failed = WaitReady(dir, rt, info.cluster_id, n);
  if (!failed.ok()) {
    for (uint32_t n = 0; n < c.nodes; ++n) StopProcess(rt.pids[n], dir, n, SIGKILL);
    return Fail(failed);
  }
  if (!Quiet()) {
    std::string ports;
    for (uint32_t n = 0; n < c.nodes; ++n)
      ports += fmt::format("{}node {} 127.0.0.1:{} (pid {})", n ? ", " : "", n, rt.ports[n], rt.pids[n]);
    fmt::print("cluster {:016x} up in {}: {}\n", info.cluster_id, dir, ports);
  }
  return kExitOk;
}

int RunDown(const std::string& dir_arg) {
  const std::string dir = AbsoluteDir(dir_arg);
  auto l = LoadRealCluster(dir);
  if (!l.ok()) return Fail(l.status());
  // The nodes learn that the cluster stops before any is told (a node that
  // sees a peer leave then stops as well), then every node is told at once,
  // so that a cut running now completes on all of them (each finishes its
  // part before it exits); then each is waited for.
  const std::string stopping = walfmt::JoinPath(dir, node::kStoppingFile);
  if (Status st = walfmt::WriteFileAtomic(stopping, "walcut cluster down\n"); !st.ok()) return Fail(st);
  for (uint32_t n = 0; n < l->info.nodes; ++n) {
    if (IsOurNode(l->rt.pids[n], dir, n)) kill(static_cast<pid_t>(l->rt.pids[n]), SIGTERM);
  }
  for (uint32_t n = 0; n < l->info.nodes; ++n) {
    // Signal 0: no second SIGTERM (a node ends at once on a second one).
    StopProcess(l->rt.pids[n], dir, n, 0);
    l->rt.pids[n] = 0;
  }
  std::error_code ec;
  fs::remove(stopping, ec);
  if (Status st = node::SaveRuntimeInfo(dir, l->rt); !st.ok()) return Fail(st);
  if (!Quiet()) fmt::print("cluster {:016x} in {}: stopped\n", l->info.cluster_id, dir);
  return kExitOk;
}

int RunKill(const NodeOpts& o) {
  const std::string dir = AbsoluteDir(o.dir);
  auto l = LoadRealCluster(dir);
  if (!l.ok()) return Fail(l.status());
  if (o.node >= l->info.nodes) {
    return Fail(
        Status::InvalidArgument(fmt::format("--node {}: the cluster has nodes 0..{}", o.node, l->info.nodes - 1)));
  }
  if (!IsOurNode(l->rt.pids[o.node], dir, o.node)) {
    return Fail(Status::InvalidArgument(fmt::format("node {} is not running", o.node)));
  }
  StopProcess(l->rt.pids[o.node], dir, o.node, SIGKILL);
  l->rt.pids[o.node] = 0;
  if (Status st = node::SaveRuntimeInfo(dir, l->rt); !st.ok()) return Fail(st);
  if (!Quiet()) fmt::print("node {} killed (SIGKILL)\n", o.node);
  return kExitOk;
}

int RunRestart(const NodeOpts& o) {
  const std::string dir = AbsoluteDir(o.dir);
  auto l = LoadRealCluster(dir);
  if (!l.ok()) return Fail(l.status());
  if (o.node >= l->info.nodes) {
    return Fail(
        Status::InvalidArgument(fmt::format("--node {}: the cluster has nodes 0..{}", o.node, l->info.nodes - 1)));
  }
  if (IsOurNode(l->rt.pids[o.node], dir, o.node)) {
    return Fail(Status::InvalidArgument(fmt::format("node {} is running (pid {})", o.node, l->rt.pids[o.node])));
  }
  std::error_code ec;
  fs::remove(walfmt::JoinPath(dir, node::kStoppingFile), ec);  // left by an interrupted cluster down
  if (Status st = SpawnNode(dir, o.node, l->rt.pids[o.node]); !st.ok()) return Fail(st);
  if (Status st = node::SaveRuntimeInfo(dir, l->rt); !st.ok()) return Fail(st);
  if (Status st = WaitReady(dir, l->rt, l->info.cluster_id, o.node); !st.ok()) return Fail(st);
  if (!Quiet()) fmt::print("node {} restarted (pid {}), recovered and ready\n", o.node, l->rt.pids[o.node]);
  return kExitOk;
}

int RunStatus(const std::string& dir_arg) {
  const std::string dir = AbsoluteDir(dir_arg);
  auto l = LoadRealCluster(dir);
  if (!l.ok()) return Fail(l.status());
  for (uint32_t n = 0; n < l->info.nodes; ++n) {
    if (!IsOurNode(l->rt.pids[n], dir, n)) {
      fmt::print("node {}  down\n", n);
      continue;
    }
    auto s = AskStatus(l->rt, l->info.cluster_id, n);
    if (!s.ok()) {
      fmt::print("node {}  pid {}  no answer: {}\n", n, l->rt.pids[n], s.status().message());
      continue;
    }
    fmt::print("node {}  pid {}  port {}  incarnation {}  {}  cut {}  initiator {}\n", n, l->rt.pids[n], l->rt.ports[n],
               s->incarnation, s->ready ? "ready" : "starting", s->cut_id,
               s->initiator == node::sim::kNoNode ? std::string("?") : std::to_string(s->initiator));
  }
  return kExitOk;
}

void RegisterCluster(CLI::App& root, Registry& reg) {
  CLI::App* cl = root.add_subcommand("cluster", "Run a real cluster of node processes on this machine (loopback)");
  cl->require_subcommand(1);

  auto up = std::make_shared<UpOpts>();
  CLI::App* u = cl->add_subcommand("up", "Create a cluster in DIR and start its node processes");
  u->add_option("dir", up->dir, "Cluster directory (must not exist, or be empty)")->required();
  AddNumber(u, "--nodes", up->cluster.nodes, {1, 16}, "Number of nodes")->default_str("3");
  AddNumber(u, "--backups", up->cluster.backups, {0, 15}, "Backups per partition (less than --nodes)")
      ->default_str("1");
  AddNumber(u, "--partitions", up->cluster.partitions, {1, 65536}, "Number of partitions (default: 4 per node)");
  u->add_option("--workload", up->workload, "bank, cycle or mixed")->capture_default_str();
  AddNumber(u, "--accounts", up->cluster.workload.accounts, {2, 1000000}, "Bank accounts (default 1000)");
  AddNumber(u, "--ring-keys", up->cluster.workload.ring, {4, 1000000}, "Keys of the cycle ring (default 1000)");
  u->add_option("--sync", up->sync,
                "When the WAL reaches the disk: always (fdatasync per sync), group (one fdatasync per batch), "
                "off (no fdatasync)")
      ->capture_default_str();
  u->add_option("--cut-every", up->cut_every, "Take a consistent cut this often (a duration: 200ms, 1s)");
  u->add_option("--full-snapshot-every", up->full_snapshot_every,
                "Take a full snapshot this often (a duration of at least 100ms: 30s, 5m); "
                "walcut cluster snapshot takes one when asked");
  u->add_option("--wal-retention", up->wal_retention,
                "keep (every WAL segment) or after-snapshot (each node deletes the segments its latest full "
                "snapshot makes unnecessary, and recovers from that snapshot)")
      ->capture_default_str();
  AddNumber(u, "--segment-size", up->segment_bytes, {4096, uint64_t{1} << 30}, "WAL segment size in bytes")
      ->default_str("1048576");
  AddNumber(u, "--base-port", up->base_port, {1, 65535}, "Node i listens on BASE+i (default: free ports)");
  reg.Add(u, [up] { return RunUp(*up); });

  auto down = std::make_shared<std::string>();
  CLI::App* d = cl->add_subcommand("down", "Stop every node of the cluster in DIR (SIGTERM: WAL synced)");
  d->add_option("dir", *down, "Cluster directory")->required();
  reg.Add(d, [down] { return RunDown(*down); });

  auto kill_o = std::make_shared<NodeOpts>();
  CLI::App* k = cl->add_subcommand("kill", "Kill one node with SIGKILL");
  k->add_option("dir", kill_o->dir, "Cluster directory")->required();
  AddNumber(k, "--node", kill_o->node, {0, 63}, "The node")->required();
  reg.Add(k, [kill_o] { return RunKill(*kill_o); });

  auto restart = std::make_shared<NodeOpts>();
  CLI::App* r = cl->add_subcommand("restart", "Start a stopped node again; it recovers from its WAL");
  r->add_option("dir", restart->dir, "Cluster directory")->required();
  AddNumber(r, "--node", restart->node, {0, 63}, "The node")->required();
  reg.Add(r, [restart] { return RunRestart(*restart); });

  auto status = std::make_shared<std::string>();
  CLI::App* s = cl->add_subcommand("status", "Each node's process, incarnation, readiness and cut id");
  s->add_option("dir", *status, "Cluster directory")->required();
  reg.Add(s, [status] { return RunStatus(*status); });
}

const CommandRegistrar kRegister{51, RegisterCluster};
}  // namespace

}  // namespace walcut::cli
