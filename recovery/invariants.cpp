#include "recovery/invariants.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "walfmt/record.h"
#include "walfmt/record_text.h"

namespace walcut::recovery {
namespace {

// Values in messages are shortened like `walcut dump` does.
constexpr size_t kValueBytesShown = 32;

std::string Shown(std::string_view v) { return "'" + walfmt::Printable(v, kValueBytesShown) + "'"; }

// A decimal integer, strictly: optional '-', digits, nothing else.
std::optional<int64_t> ParseI64(std::string_view s) {
  if (s.empty() || s[0] == '+') return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string NodeList(const std::vector<uint32_t>& nodes) { return fmt::format("{}", fmt::join(nodes, ",")); }

class Collector {
 public:
  Collector(InvariantReport& r, size_t max) : r_(r), max_(max) {}
  void Add(Finding f) {
    ++r_.total_findings;
    if (f.key_count < f.keys.size()) f.key_count = f.keys.size();
    if (f.keys.size() > kMaxKeysPerFinding) f.keys.resize(kMaxKeysPerFinding);
    if (r_.findings.size() < max_) r_.findings.push_back(std::move(f));
  }

 private:
  InvariantReport& r_;
  size_t max_;
};

Finding Make(const char* check, std::optional<uint32_t> node, std::vector<std::string> keys, std::string expected,
             std::string found, std::string message) {
  Finding f;
  f.check = check;
  f.node = node;
  f.keys = std::move(keys);
  f.key_count = f.keys.size();
  f.expected = std::move(expected);
  f.found = std::move(found);
  f.message = std::move(message);
  return f;
}

// The copies of one workload key: its holders by the topology, primary first,
// and each holder's value (nullptr when the key is missing there).
struct Copies {
  std::vector<uint32_t> holders;
  std::vector<const std::string*> values;
};

Copies CopiesOf(const walfmt::Topology& topo, const std::vector<const NodeState*>& states, const std::string& key) {
  Copies c;
  const uint32_t primary = topo.PrimaryOf(key);
  c.holders.push_back(primary);
  for (uint32_t b : topo.BackupsOf(primary)) c.holders.push_back(b);
  for (uint32_t h : c.holders) {
    auto it = states[h]->find(key);
    c.values.push_back(it == states[h]->end() ? nullptr : &it->second);
  }
  return c;
}

// Reports the missing copies and the backups that differ from the primary.
// Returns the index (into c.holders) of the copy that stands for the key:
// the primary's, or the first backup's when the primary lacks it; -1 when no
// node has it.
int CheckCopies(const walfmt::Topology& topo, const Copies& c, const std::string& key, const char* missing_check,
                const char* replica_check, Collector& out) {
  const uint32_t partition = topo.PartitionOf(key);
  for (size_t i = 0; i < c.holders.size(); ++i) {
    if (c.values[i] != nullptr) continue;
    const std::string role = i == 0 ? "primary" : fmt::format("backup {}", i);
    out.Add(Make(
        missing_check, c.holders[i], {key},
        fmt::format("present (node {} is the {} of partition {})", c.holders[i], role, partition), "missing",
        fmt::format("node {}: {} is missing; the node is its {} (partition {})", c.holders[i], key, role, partition)));
  }
  if (c.values[0] != nullptr) {
    for (size_t i = 1; i < c.holders.size(); ++i) {
      if (c.values[i] == nullptr || *c.values[i] == *c.values[0]) continue;
      Finding f = Make(replica_check, c.holders[i], {key}, *c.values[0], *c.values[i],
                       fmt::format("node {}: {} = {}, but its primary node {} holds {}", c.holders[i], key,
                                   Shown(*c.values[i]), c.holders[0], Shown(*c.values[0])));
      f.peer = c.holders[0];
      out.Add(std::move(f));
    }
  }
  for (size_t i = 0; i < c.holders.size(); ++i) {
    if (c.values[i] != nullptr) return static_cast<int>(i);
  }
  return -1;
}

void CheckPlacement(const walfmt::ClusterInfo& info, const walfmt::Topology& topo,
                    const std::vector<const NodeState*>& states, Collector& out) {
  for (uint32_t n = 0; n < states.size(); ++n) {
    for (const auto& [key, value] : *states[n]) {
      const auto acct = ParseAccountKey(key);
      const auto ring = ParseRingKey(key);
      const bool known = (acct && *acct < info.accounts) || (ring && *ring < info.ring_keys);
      if (!known) {
        out.Add(Make(check::kUnknownKey, n, {key},
                     fmt::format("only acct/000000..{} ({} accounts) and ring/000000..{} ({} ring keys)",
                                 info.accounts == 0 ? "-" : AccountKey(info.accounts - 1), info.accounts,
                                 info.ring_keys == 0 ? "-" : RingKey(info.ring_keys - 1), info.ring_keys),
                     Shown(value),
                     fmt::format("node {}: holds {} = {}, a key outside the workload's key space", n,
                                 walfmt::Printable(key, kValueBytesShown), Shown(value))));
        continue;
      }
      if (topo.Holds(n, key)) continue;
      const uint32_t primary = topo.PrimaryOf(key);
      std::vector<uint32_t> holders{primary};
      for (uint32_t b : topo.BackupsOf(primary)) holders.push_back(b);
      out.Add(Make(check::kPlacement, n, {key},
                   fmt::format("held by node{} {} only", holders.size() > 1 ? "s" : "", NodeList(holders)),
                   fmt::format("held by node {}", n),
                   fmt::format("node {}: holds {}, which belongs to partition {} on node{} {} only", n, key,
                               topo.PartitionOf(key), holders.size() > 1 ? "s" : "", NodeList(holders))));
    }
  }
}

void CheckBank(const walfmt::ClusterInfo& info, const walfmt::Topology& topo,
               const std::vector<const NodeState*>& states, InvariantReport& report, Collector& out) {
  int64_t total = 0;
  bool total_known = true;
  bool overflow = false;
  for (uint32_t i = 0; i < info.accounts; ++i) {
    const std::string key = AccountKey(i);
    const Copies c = CopiesOf(topo, states, key);
    const int ref = CheckCopies(topo, c, key, check::kBankMissing, check::kBankReplica, out);
    if (ref < 0) {
      total_known = false;
      continue;
    }
    const uint32_t node = c.holders[static_cast<size_t>(ref)];
    const std::string& value = *c.values[static_cast<size_t>(ref)];
    const auto balance = ParseI64(value);
    if (!balance) {
      out.Add(Make(check::kBankNotNumber, node, {key}, "a decimal integer", Shown(value),
                   fmt::format("node {}: {} = {}, not a decimal integer", node, key, Shown(value))));
      total_known = false;
      continue;
    }
    if (*balance < 0) {
      out.Add(Make(check::kBankNegative, node, {key}, ">= 0", value,
                   fmt::format("node {}: {} = {}, a negative balance", node, key, value)));
    }
    if (__builtin_add_overflow(total, *balance, &total)) overflow = true;
  }
  if (!total_known) return;  // a missing or unreadable account is reported; a total without it means nothing
  if (overflow) {
    out.Add(Make(check::kBankTotal, std::nullopt, {}, fmt::format("{}", info.initial_bank_total),
                 "beyond the 64-bit range", "bank total of the primary copies overflows 64 bits"));
    return;
  }
  report.bank_total = total;
  if (total != info.initial_bank_total) {
    out.Add(Make(check::kBankTotal, std::nullopt, {}, fmt::format("{}", info.initial_bank_total),
                 fmt::format("{}", total),
                 fmt::format("bank total of the {} primary copies is {}, expected {} ({:+})", info.accounts, total,
                             info.initial_bank_total, total - info.initial_bank_total)));
  }
}

std::vector<std::string> RingKeys(const std::vector<uint32_t>& idx) {
  std::vector<std::string> v;
  for (size_t i = 0; i < idx.size() && i < kMaxKeysPerFinding; ++i) v.push_back(RingKey(idx[i]));
  return v;
}

std::string KeyListText(const std::vector<uint32_t>& idx) {
  std::string s;
  for (size_t i = 0; i < idx.size() && i < kMaxKeysPerFinding; ++i) {
    if (i > 0) s += " -> ";
    s += RingKey(idx[i]);
  }
  if (idx.size() > kMaxKeysPerFinding) s += fmt::format(" ... (+{})", idx.size() - kMaxKeysPerFinding);
  return s;
}

constexpr int64_t kNoNext = -1;

// Each ring key's value, checked: the index of the next key, or kNoNext
// (a finding made) when the key is missing, its copies disagree or its
// value is not an index.
std::vector<int64_t> RingNext(const walfmt::Topology& topo, const std::vector<const NodeState*>& states, uint32_t ring,
                              Collector& out) {
  std::vector<int64_t> next(ring, kNoNext);
  for (uint32_t i = 0; i < ring; ++i) {
    const std::string key = RingKey(i);
    const Copies c = CopiesOf(topo, states, key);
    const int ref = CheckCopies(topo, c, key, check::kCycleMissing, check::kCycleReplica, out);
    if (ref < 0) continue;
    const uint32_t node = c.holders[static_cast<size_t>(ref)];
    const std::string& value = *c.values[static_cast<size_t>(ref)];
    const auto v = ParseI64(value);
    if (!v || *v < 0 || *v >= static_cast<int64_t>(ring)) {
      out.Add(Make(
          check::kCycleBadValue, node, {key}, fmt::format("an index 0..{}", ring - 1), Shown(value),
          fmt::format("node {}: {} = {}, not the index of a ring key (0..{})", node, key, Shown(value), ring - 1)));
      continue;
    }
    next[i] = *v;
  }
  return next;
}

struct RingWalk {
  std::vector<bool> visited;
  std::vector<uint32_t> order;  // the keys walked, from ring/000000
  bool one_ring = false;
};

// The walk from ring/000000. Every step visits a new key, so it ends within
// `ring` steps; where it ends other than back at ring/000000 after every
// key is a finding.
RingWalk WalkRing(const walfmt::Topology& topo, const std::vector<int64_t>& next, Collector& out) {
  const auto ring = static_cast<uint32_t>(next.size());
  RingWalk w;
  std::vector<int64_t> pred(ring, kNoNext);  // the key the walk came from
  w.visited.assign(ring, false);
  w.order = {0};
  w.visited[0] = true;
  uint32_t cur = 0;
  for (;;) {
    const int64_t n = next[cur];
    if (n == kNoNext) {
      out.Add(Make(check::kCycleBroken, topo.PrimaryOf(RingKey(cur)), {RingKey(cur)}, "the index of the next key",
                   "missing or invalid",
                   fmt::format("the walk from ring/000000 stops at {} after {} of {} keys: it has no valid next key",
                               RingKey(cur), w.order.size(), ring)));
      break;
    }
    const auto nx = static_cast<uint32_t>(n);
    if (nx == 0) {
      if (w.order.size() == ring) {
        w.one_ring = true;
      } else {
        Finding f = Make(check::kCycleSubRing, std::nullopt, RingKeys(w.order),
                         fmt::format("one ring of {} keys", ring), fmt::format("a ring of {} keys", w.order.size()),
                         fmt::format("the walk from ring/000000 returns after {} of {} keys: {} -> ring/000000",
                                     w.order.size(), ring, KeyListText(w.order)));
        f.key_count = w.order.size();
        out.Add(std::move(f));
      }
      break;
    }
    if (w.visited[nx]) {
      const std::string twice = RingKey(nx);
      out.Add(Make(check::kCycleVisitedTwice, std::nullopt,
                   {twice, RingKey(static_cast<uint32_t>(pred[nx])), RingKey(cur)}, "every key once",
                   fmt::format("{} visited twice", twice),
                   fmt::format("the walk from ring/000000 visits {} twice: {} and {} both point to it ({} keys "
                               "walked, the walk never returns to ring/000000)",
                               twice, RingKey(static_cast<uint32_t>(pred[nx])), RingKey(cur), w.order.size())));
      break;
    }
    w.visited[nx] = true;
    pred[nx] = cur;
    w.order.push_back(nx);
    cur = nx;
  }
  return w;
}

// Keys the walk never reached, and the rings they form among themselves
// (a ring split in two shows up as a sub-ring of the walk and one here).
void ReportUnreached(const std::vector<int64_t>& next, const std::vector<bool>& visited, Collector& out) {
  const auto ring = static_cast<uint32_t>(next.size());
  std::vector<uint32_t> unreached;
  for (uint32_t i = 0; i < ring; ++i) {
    if (!visited[i]) unreached.push_back(i);
  }
  if (unreached.empty()) return;
  Finding f = Make(check::kCycleUnreached, std::nullopt, RingKeys(unreached), "every key on the ring",
                   fmt::format("{} keys not reached", unreached.size()),
                   fmt::format("{} of {} ring keys are never reached from ring/000000: {}", unreached.size(), ring,
                               fmt::format("{}{}", fmt::join(RingKeys(unreached), ", "),
                                           unreached.size() > kMaxKeysPerFinding ? ", ..." : "")));
  f.key_count = unreached.size();
  out.Add(std::move(f));
  // 0 = not yet seen, 1 = on the current path, 2 = done. Linear in `ring`.
  std::vector<uint8_t> state(ring, 0);
  for (uint32_t i = 0; i < ring; ++i) {
    if (visited[i]) state[i] = 2;
  }
  for (uint32_t start : unreached) {
    if (state[start] != 0) continue;
    std::vector<uint32_t> path;
    uint32_t c = start;
    for (;;) {
      state[c] = 1;
      path.push_back(c);
      const int64_t n = next[c];
      if (n == kNoNext || state[static_cast<uint32_t>(n)] == 2) break;
      if (state[static_cast<uint32_t>(n)] == 1) {
        const auto at = std::find(path.begin(), path.end(), static_cast<uint32_t>(n));
        const std::vector<uint32_t> cycle(at, path.end());
        Finding s = Make(check::kCycleSubRing, std::nullopt, RingKeys(cycle), fmt::format("one ring of {} keys", ring),
                         fmt::format("a separate ring of {} keys", cycle.size()),
                         fmt::format("a separate ring of {} keys: {} -> {}", cycle.size(), KeyListText(cycle),
                                     RingKey(cycle.front())));
        s.key_count = cycle.size();
        out.Add(std::move(s));
        break;
      }
      c = static_cast<uint32_t>(n);
    }
    for (uint32_t p : path) state[p] = 2;
  }
}

void CheckCycle(const walfmt::ClusterInfo& info, const walfmt::Topology& topo,
                const std::vector<const NodeState*>& states, InvariantReport& report, Collector& out) {
  const uint32_t ring = info.ring_keys;
  if (ring == 0) return;
  const std::vector<int64_t> next = RingNext(topo, states, ring, out);
  const RingWalk walk = WalkRing(topo, next, out);
  report.ring_walked = walk.order.size();
  if (walk.one_ring) return;
  ReportUnreached(next, walk.visited, out);
}

}  // namespace

InvariantOptions OptionsFor(walfmt::Workload w) {
  InvariantOptions o;
  o.bank = w != walfmt::Workload::kCycle;
  o.cycle = w != walfmt::Workload::kBank;
  return o;
}

InvariantReport CheckInvariants(const walfmt::ClusterInfo& info, const std::vector<const NodeState*>& states,
                                const InvariantOptions& options) {
  InvariantReport report;
  Collector out(report, options.max_findings);
  if (states.size() != info.nodes) {
    out.Add(Make(check::kNodeCount, std::nullopt, {}, fmt::format("{} nodes", info.nodes),
                 fmt::format("{} nodes", states.size()),
                 fmt::format("{} node states for a cluster of {} nodes ({})", states.size(), info.nodes, info.origin)));
    return report;
  }
  const walfmt::Topology topo = info.topology();
  for (const NodeState* s : states) report.keys_checked += s->size();
  if (options.placement) CheckPlacement(info, topo, states, out);
  if (options.bank) CheckBank(info, topo, states, report, out);
  if (options.cycle) CheckCycle(info, topo, states, report, out);
  return report;
}

std::vector<Finding> CheckRecorded(const StateSet& set, const walfmt::FullSnapshotInfo& recorded) {
  std::vector<Finding> v;
  for (uint32_t i = 0; i < set.nodes.size() && i < recorded.nodes.size(); ++i) {
    const walfmt::SnapshotFile& s = set.nodes[i];
    const walfmt::FullSnapshotNode& r = recorded.nodes[i];
    if (s.fingerprint != r.fingerprint) {
      v.push_back(Make(check::kRecorded, i, {}, fmt::format("{:016x}", r.fingerprint),
                       fmt::format("{:016x}", s.fingerprint),
                       fmt::format("node {}: node-{}.snap has fingerprint {:016x}, but cluster.json recorded {:016x} "
                                   "when snapshot {} was taken: the file was rewritten since",
                                   i, i, s.fingerprint, r.fingerprint, recorded.name)));
    }
    if (s.wal_position != r.wal_position) {
      v.push_back(Make(check::kRecorded, i, {}, r.wal_position.ToString(), s.wal_position.ToString(),
                       fmt::format("node {}: node-{}.snap names WAL position {}, but cluster.json recorded {}", i, i,
                                   s.wal_position.ToString(), r.wal_position.ToString())));
    }
    if (s.name != recorded.name) {
      v.push_back(Make(check::kRecorded, i, {}, recorded.name, s.name,
                       fmt::format("node {}: node-{}.snap is named '{}', but cluster.json lists it as '{}'", i, i,
                                   walfmt::Printable(s.name, kValueBytesShown), recorded.name)));
    }
  }
  return v;
}

}  // namespace walcut::recovery
