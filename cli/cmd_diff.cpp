// walcut diff A B: compare two snapshot directories (full snapshots or
// restore outputs) node by node.
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/restore_check.h"
#include "recovery/diff.h"
#include "recovery/key_subset.h"
#include "recovery/state_set.h"
#include "walfmt/record.h"
#include "walfmt/record_text.h"
#include "walfmt/strings.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {

inline constexpr const char* kDiffSchema = "walcut.diff/1";

struct DiffCommandOptions {
  std::string a, b;
  recovery::KeySubset subset_a, subset_b;  // what each side's manifest says it holds
  Format format = Format::kText;
  size_t limit = 20;
  size_t max_bytes = 32;
};

nlohmann::json SideJson(const recovery::StateSet& s, const recovery::KeySubset& subset) {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& n : s.nodes) names.push_back(walfmt::Printable(n.name, 0));
  return {{"dir", s.dir},
          {"nodes", s.nodes.size()},
          {"cluster_id", walfmt::Hex16(s.nodes.empty() ? 0 : s.nodes[0].cluster_id)},
          {"names", names},
          {"subset", SubsetJson(subset)}};
}

// What a side holds: every key, or a partial restore's subset.
std::string SubsetNote(const recovery::KeySubset& s) {
  return s.whole() ? "" : fmt::format("; partial restore: {}", s.Describe());
}

// The snapshot name of a side for the header line: one name when all nodes agree.
std::string NameOf(const recovery::StateSet& s) {
  if (s.nodes.empty()) return "";
  for (const auto& n : s.nodes) {
    if (n.name != s.nodes[0].name) return "names differ by node";
  }
  return "snapshot " + walfmt::Printable(s.nodes[0].name, 64);
}

// The totals over the nodes.
struct DiffTotals {
  uint64_t only_a = 0, only_b = 0, changed = 0;
};

DiffTotals Totals(const recovery::StateDiff& d) {
  DiffTotals t;
  for (const auto& n : d.nodes) {
    t.only_a += n.only_a_count;
    t.only_b += n.only_b_count;
    t.changed += n.changed_count;
  }
  return t;
}

nlohmann::json NodeDiffJson(const recovery::NodeDiff& n) {
  using walfmt::Printable;
  nlohmann::json ja = nlohmann::json::array(), jb = nlohmann::json::array(), jc = nlohmann::json::array();
  for (const auto& kv : n.only_a) ja.push_back({{"key", Printable(kv.key, 0)}, {"value", Printable(kv.value, 0)}});
  for (const auto& kv : n.only_b) jb.push_back({{"key", Printable(kv.key, 0)}, {"value", Printable(kv.value, 0)}});
  for (const auto& c : n.changed) {
    jc.push_back({{"key", Printable(c.key, 0)}, {"a", Printable(c.a, 0)}, {"b", Printable(c.b, 0)}});
  }
  return {{"node", n.node},
          {"equal", n.equal()},
          {"entries_a", n.entries_a},
          {"entries_b", n.entries_b},
          {"fingerprint_a", walfmt::Hex16(n.fingerprint_a)},
          {"fingerprint_b", walfmt::Hex16(n.fingerprint_b)},
          {"only_a_count", n.only_a_count},
          {"only_b_count", n.only_b_count},
          {"changed_count", n.changed_count},
          {"truncated", n.truncated()},
          {"only_a", ja},
          {"only_b", jb},
          {"changed", jc}};
}

void PrintDiffJson(const DiffCommandOptions& o, const recovery::StateSet& a, const recovery::StateSet& b,
                   const recovery::StateDiff& d, int rc) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : d.nodes) nodes.push_back(NodeDiffJson(n));
  const DiffTotals t = Totals(d);
  nlohmann::json doc{{"schema", kDiffSchema},
                     {"a", SideJson(a, o.subset_a)},
                     {"b", SideJson(b, o.subset_b)},
                     {"equal", d.equal()},
                     {"limit", o.limit},
                     {"nodes", nodes},
                     {"summary",
                      {{"nodes", d.nodes.size()},
                       {"nodes_differing", d.nodes_differing()},
                       {"only_a", t.only_a},
                       {"only_b", t.only_b},
                       {"changed", t.changed},
                       {"exit_code", rc}}}};
  fmt::print("{}\n", walfmt::DumpJson(doc, 2));
}

// The listed keys of a differing node in key order, whatever their kind.
void PrintListedKeys(const recovery::NodeDiff& n, size_t mb) {
  size_t ia = 0, ib = 0, ic = 0;
  for (;;) {
    const std::string* ka = ia < n.only_a.size() ? &n.only_a[ia].key : nullptr;
    const std::string* kb = ib < n.only_b.size() ? &n.only_b[ib].key : nullptr;
    const std::string* kc = ic < n.changed.size() ? &n.changed[ic].key : nullptr;
    const std::string* least = nullptr;
    for (const std::string* k : {ka, kb, kc}) {
      if (k != nullptr && (least == nullptr || *k < *least)) least = k;
    }
    if (least == nullptr) break;
    if (least == ka) {
      fmt::print("  - {} = {}  (only in A)\n", walfmt::Printable(*ka, mb), walfmt::Printable(n.only_a[ia].value, mb));
      ++ia;
    } else if (least == kb) {
      fmt::print("  + {} = {}  (only in B)\n", walfmt::Printable(*kb, mb), walfmt::Printable(n.only_b[ib].value, mb));
      ++ib;
    } else {
      fmt::print("  ~ {}: {} -> {}\n", walfmt::Printable(*kc, mb), walfmt::Printable(n.changed[ic].a, mb),
                 walfmt::Printable(n.changed[ic].b, mb));
      ++ic;
    }
  }
}

void PrintDiffText(const DiffCommandOptions& o, const recovery::StateSet& a, const recovery::StateSet& b,
                   const recovery::StateDiff& d, int rc) {
  fmt::print("A: {} ({} node{}, {}{})\n", a.dir, a.nodes.size(), a.nodes.size() == 1 ? "" : "s", NameOf(a),
             SubsetNote(o.subset_a));
  fmt::print("B: {} ({} node{}, {}{})\n", b.dir, b.nodes.size(), b.nodes.size() == 1 ? "" : "s", NameOf(b),
             SubsetNote(o.subset_b));
  if (!(o.subset_a == o.subset_b)) {
    fmt::print("note: A and B hold different sets of keys; keys that only one of them holds count as differences\n");
  }
  for (const auto& n : d.nodes) {
    if (n.equal()) {
      fmt::print("node {}: equal, {} keys, fingerprint {}\n", n.node, n.entries_a, walfmt::Hex16(n.fingerprint_a));
      continue;
    }
    fmt::print("node {}: differs: {} only in A, {} only in B, {} changed; keys A {} B {}; fingerprint A {} B {}\n",
               n.node, n.only_a_count, n.only_b_count, n.changed_count, n.entries_a, n.entries_b,
               walfmt::Hex16(n.fingerprint_a), walfmt::Hex16(n.fingerprint_b));
    PrintListedKeys(n, o.max_bytes);
    if (n.truncated()) {
      fmt::print("  ... {} more (--limit {} lists {} per node; --limit 0 lists all)\n",
                 n.differences() - (n.only_a.size() + n.only_b.size() + n.changed.size()), o.limit, o.limit);
    }
  }
  if (rc == kExitOk) {
    fmt::print("EQUAL ({} node{})\n", d.nodes.size(), d.nodes.size() == 1 ? "" : "s");
  } else {
    const DiffTotals t = Totals(d);
    fmt::print("DIFFERENT ({} of {} nodes differ: {} only in A, {} only in B, {} changed)\n", d.nodes_differing(),
               d.nodes.size(), t.only_a, t.only_b, t.changed);
  }
}

int RunDiff(DiffCommandOptions& o) {
  for (auto [dir, subset] : {std::pair{&o.a, &o.subset_a}, std::pair{&o.b, &o.subset_b}}) {
    auto s = recovery::ReadOutputSubset(*dir);
    if (!s.ok()) {
      PrintError(s.status().message());
      return ExitForStatus(s.status());
    }
    *subset = std::move(s.value());
  }
  auto a = recovery::LoadStateSet(o.a);
  if (!a.ok()) {
    PrintError(a.status().message());
    return ExitForStatus(a.status());
  }
  auto b = recovery::LoadStateSet(o.b);
  if (!b.ok()) {
    PrintError(b.status().message());
    return ExitForStatus(b.status());
  }
  recovery::DiffOptions dopt;
  dopt.limit = o.limit == 0 ? std::numeric_limits<size_t>::max() : o.limit;
  auto d = recovery::DiffStates(*a, *b, dopt);
  if (!d.ok()) {
    PrintError(d.status().message());
    return ExitForStatus(d.status());
  }
  const int rc = d->equal() ? kExitOk : kExitFindings;
  if (o.format == Format::kJson) {
    PrintDiffJson(o, *a, *b, *d, rc);
  } else {
    PrintDiffText(o, *a, *b, *d, rc);
  }
  return rc;
}

}  // namespace

void RegisterDiff(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<DiffCommandOptions>();
  CLI::App* cmd = root.add_subcommand(
      "diff",
      "Compare two snapshot directories node by node: keys only in A, only in B, and changed, with each node's\n"
      "state fingerprint. A and B are each a full snapshot (CLUSTER/snapshots/<name>) or a restore output (a\n"
      "directory of node-<i>.snap files); both must have the same number of nodes. Neither is modified.\n"
      "Exit 0 when every node is equal, 1 when any differs or a snapshot file fails its checks, 2 on usage\n"
      "errors (a directory missing or without node-<i>.snap files, node counts that differ), 3 when a snapshot\n"
      "file cannot be read.");
  cmd->add_option("A", o->a, "First snapshot directory")->required();
  cmd->add_option("B", o->b, "Second snapshot directory")->required();
  AddFormatOption(cmd, o->format);
  AddNumber(cmd, "-n,--limit", o->limit, {0, 1000000000},
            "Differing keys listed per node (default 20; 0 lists all); counts are always complete");
  AddNumber(cmd, "--max-bytes", o->max_bytes, kMaxBytesRange,
            "Shorten keys and values to N bytes in text output (default 32; 0 prints them whole)");
  reg.Add(cmd, [o] { return RunDiff(*o); });
}

namespace {
const CommandRegistrar kRegister{70, RegisterDiff};
}  // namespace

}  // namespace walcut::cli
