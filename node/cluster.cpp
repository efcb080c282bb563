// The node library's interface (node/cluster.h): options, their parsing and
// normalization, and RunCluster, which runs the simulation driver
// (cluster_driver.h) in a new cluster directory.
#include "node/cluster.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "node/cluster_driver.h"
#include "walfmt/duration.h"

namespace walcut::node {

using walfmt::Status;

Status NormalizeOptions(ClusterOptions& opt) {
  if (opt.dir.empty()) return Status::InvalidArgument("no cluster directory given");
  if (opt.nodes < 1 || opt.nodes > 64)
    return Status::InvalidArgument(fmt::format("--nodes {}: must be 1..64", opt.nodes));
  if (opt.backups >= opt.nodes) {
    return Status::InvalidArgument(fmt::format("--backups {}: must be less than --nodes {}", opt.backups, opt.nodes));
  }
  if (opt.partitions == 0) opt.partitions = 4 * opt.nodes;
  if (opt.partitions > 65536) return Status::InvalidArgument("--partitions: at most 65536");
  if (opt.concurrency < 1 || opt.concurrency > 100000)
    return Status::InvalidArgument("--concurrency: must be 1..100000");
  WorkloadParams& w = opt.workload;
  const bool bank = w.workload == Workload::kBank || w.workload == Workload::kMixed;
  const bool cycle = w.workload == Workload::kCycle || w.workload == Workload::kMixed;
  if (!bank)
    w.accounts = 0;
  else if (w.accounts == 0)
    w.accounts = 1000;
  if (!cycle)
    w.ring = 0;
  else if (w.ring == 0)
    w.ring = 1000;
  if (bank && w.accounts < 2) return Status::InvalidArgument("bank workload needs at least 2 accounts");
  if (cycle && w.ring < 4) return Status::InvalidArgument("cycle workload needs at least 4 ring keys");
  if (w.accounts > 1000000 || w.ring > 1000000) return Status::InvalidArgument("at most 1000000 keys per workload");
  if (w.max_transfer < 1) w.max_transfer = 1;
  if (opt.cut_every == 0) opt.cut_every = std::max<uint64_t>(1, opt.txs / (opt.cuts + 1));
  if (opt.segment_bytes < 4096) return Status::InvalidArgument("--segment-size: at least 4096 bytes");
  if (opt.net_delay_min_us < 1 || opt.net_delay_max_us < opt.net_delay_min_us) {
    return Status::InvalidArgument("network delays: need 1 <= min <= max");
  }
  if (opt.step_delay_max_us < 1) return Status::InvalidArgument("step delay: at least 1 us");
  if (!opt.crashes.empty() && opt.nodes < 2) {
    return Status::InvalidArgument("--crash: needs at least 2 nodes (the last live node never crashes)");
  }
  for (const CrashSpec& c : opt.crashes) {
    if (c.node >= opt.nodes) {
      return Status::InvalidArgument(fmt::format("--crash: node {} does not exist ({} nodes)", c.node, opt.nodes));
    }
  }
  if (opt.random_crashes > 0 && opt.nodes < 2) {
    return Status::InvalidArgument("--crashes: needs at least 2 nodes (the last live node never crashes)");
  }
  if (opt.full_snapshot_at_tx > opt.txs) {
    return Status::InvalidArgument(
        fmt::format("--full-snapshot-at {}: beyond the {} workload transactions", opt.full_snapshot_at_tx, opt.txs));
  }
  if (opt.full_snapshot_every_tx > opt.txs) {
    return Status::InvalidArgument(fmt::format("--full-snapshot-every {}: beyond the {} workload transactions",
                                               opt.full_snapshot_every_tx, opt.txs));
  }
  if (opt.random_crashes > 1000) return Status::InvalidArgument("--crashes: at most 1000");
  if (opt.restart_delay_us < 1) return Status::InvalidArgument("restart delay: at least 1 us");
  return Status::Ok();
}

namespace {
bool ParseDuration(std::string_view s, uint64_t& us) {
  auto r = walfmt::ParseDuration(s);
  if (!r.ok()) return false;
  us = *r;
  return true;
}
}  // namespace

std::string_view WalRetentionName(WalRetention r) {
  switch (r) {
    case WalRetention::kKeep:
      return "keep";
    case WalRetention::kAfterSnapshot:
      return "after-snapshot";
  }
  return "?";
}

bool ParseWalRetention(std::string_view text, WalRetention& out) {
  if (text == "keep")
    out = WalRetention::kKeep;
  else if (text == "after-snapshot")
    out = WalRetention::kAfterSnapshot;
  else
    return false;
  return true;
}

bool ParseCrashSpec(std::string_view text, CrashSpec& out) {
  const size_t at = text.find('@');
  if (at == std::string_view::npos || at == 0) return false;
  uint32_t node = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + at, node);
  if (ec != std::errc() || p != text.data() + at) return false;
  std::string_view rest = text.substr(at + 1);
  std::string_view delay;
  if (const size_t plus = rest.find('+'); plus != std::string_view::npos) {
    delay = rest.substr(plus + 1);
    rest = rest.substr(0, plus);
    if (delay.empty()) return false;
  }
  CrashSpec c;
  c.node = node;
  if (!ParseDuration(rest, c.at_us)) return false;
  if (!delay.empty() && (!ParseDuration(delay, c.restart_delay_us) || c.restart_delay_us == 0)) return false;
  out = c;
  return true;
}

walfmt::Result<RunResult> RunCluster(ClusterOptions opt) {
  if (Status st = NormalizeOptions(opt); !st.ok()) return st;
  if (!opt.epoch_unix_us) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    opt.epoch_unix_us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now).count());
  }
  std::error_code ec;
  if (std::filesystem::exists(opt.dir, ec)) {
    if (!std::filesystem::is_directory(opt.dir, ec)) {
      return Status::InvalidArgument(fmt::format("{}: exists and is not a directory", opt.dir));
    }
    if (!std::filesystem::is_empty(opt.dir, ec)) {
      return Status::InvalidArgument(fmt::format("{}: exists and is not empty; walcut run never overwrites", opt.dir));
    }
  }
  std::filesystem::create_directories(opt.dir, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot create: {}", opt.dir, ec.message()));
  sim::Cluster c(opt);
  if (Status st = c.Run(); !st.ok()) return st;
  return c.TakeResult();
}

}  // namespace walcut::node
