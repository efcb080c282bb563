// walcut diff A B: compare two snapshot directories (full snapshots or
// restore outputs) node by node.
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/output.h"
#include "recovery/diff.h"
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
  Format format = Format::kText;
  size_t limit = 20;
  size_t max_bytes = 32;
};

// A snapshot directory that is missing or malformed as a whole is a usage
// error; a node file that cannot be read or fails its checks is exit 3.
int ExitForLoad(const walfmt::Status& st) {
  switch (st.code()) {
    case walfmt::ErrorCode::kNotFound:
    case walfmt::ErrorCode::kInvalidArgument:
      return kExitUsage;
    default:
      return kExitIo;
  }
}

nlohmann::json SideJson(const recovery::StateSet& s) {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& n : s.nodes) names.push_back(walfmt::Printable(n.name, 0));
  return {{"dir", s.dir},
          {"nodes", s.nodes.size()},
          {"cluster_id", walfmt::Hex16(s.nodes.empty() ? 0 : s.nodes[0].cluster_id)},
          {"names", names}};
}

// The snapshot name of a side for the header line: one name when all nodes agree.
std::string NameOf(const recovery::StateSet& s) {
  if (s.nodes.empty()) return "";
  for (const auto& n : s.nodes) {
    if (n.name != s.nodes[0].name) return "names differ by node";
  }
  return "snapshot " + walfmt::Printable(s.nodes[0].name, 64);
}

int RunDiff(const DiffCommandOptions& o) {
  auto a = recovery::LoadStateSet(o.a);
  if (!a.ok()) {
    PrintError(a.status().message());
    return ExitForLoad(a.status());
  }
  auto b = recovery::LoadStateSet(o.b);
  if (!b.ok()) {
    PrintError(b.status().message());
    return ExitForLoad(b.status());
  }
  recovery::DiffOptions dopt;
  dopt.limit = o.limit == 0 ? std::numeric_limits<size_t>::max() : o.limit;
  auto d = recovery::DiffStates(*a, *b, dopt);
  if (!d.ok()) {
    PrintError(d.status().message());
    return ExitForLoad(d.status());
  }
  uint64_t only_a = 0, only_b = 0, changed = 0;
  for (const auto& n : d->nodes) {
    only_a += n.only_a_count;
    only_b += n.only_b_count;
    changed += n.changed_count;
  }
  const int rc = d->equal() ? kExitOk : kExitFindings;

  if (o.format == Format::kJson) {
    using walfmt::Printable;
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& n : d->nodes) {
      nlohmann::json ja = nlohmann::json::array(), jb = nlohmann::json::array(), jc = nlohmann::json::array();
      for (const auto& kv : n.only_a) ja.push_back({{"key", Printable(kv.key, 0)}, {"value", Printable(kv.value, 0)}});
      for (const auto& kv : n.only_b) jb.push_back({{"key", Printable(kv.key, 0)}, {"value", Printable(kv.value, 0)}});
      for (const auto& c : n.changed) {
        jc.push_back({{"key", Printable(c.key, 0)}, {"a", Printable(c.a, 0)}, {"b", Printable(c.b, 0)}});
      }
      nodes.push_back({{"node", n.node},
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
                       {"changed", jc}});
    }
    nlohmann::json doc{{"schema", kDiffSchema},
                       {"a", SideJson(*a)},
                       {"b", SideJson(*b)},
                       {"equal", d->equal()},
                       {"limit", o.limit},
                       {"nodes", nodes},
                       {"summary",
                        {{"nodes", d->nodes.size()},
                         {"nodes_differing", d->nodes_differing()},
                         {"only_a", only_a},
                         {"only_b", only_b},
                         {"changed", changed},
                         {"exit_code", rc}}}};
    fmt::print("{}\n", walfmt::DumpJson(doc, 2));
    return rc;
  }

  const size_t mb = o.max_bytes;
  fmt::print("A: {} ({} node{}, {})\n", a->dir, a->nodes.size(), a->nodes.size() == 1 ? "" : "s", NameOf(*a));
  fmt::print("B: {} ({} node{}, {})\n", b->dir, b->nodes.size(), b->nodes.size() == 1 ? "" : "s", NameOf(*b));
  for (const auto& n : d->nodes) {
    if (n.equal()) {
      fmt::print("node {}: equal, {} keys, fingerprint {}\n", n.node, n.entries_a, walfmt::Hex16(n.fingerprint_a));
      continue;
    }
    fmt::print("node {}: differs: {} only in A, {} only in B, {} changed; keys A {} B {}; fingerprint A {} B {}\n",
               n.node, n.only_a_count, n.only_b_count, n.changed_count, n.entries_a, n.entries_b,
               walfmt::Hex16(n.fingerprint_a), walfmt::Hex16(n.fingerprint_b));
    // The listed keys in key order, whatever their kind.
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
    if (n.truncated()) {
      fmt::print("  ... {} more (--limit {} lists {} per node; --limit 0 lists all)\n",
                 n.differences() - (n.only_a.size() + n.only_b.size() + n.changed.size()), o.limit, o.limit);
    }
  }
  if (rc == kExitOk) {
    fmt::print("EQUAL ({} node{})\n", d->nodes.size(), d->nodes.size() == 1 ? "" : "s");
  } else {
    fmt::print("DIFFERENT ({} of {} nodes differ: {} only in A, {} only in B, {} changed)\n", d->nodes_differing(),
               d->nodes.size(), only_a, only_b, changed);
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
      "Exit 0 when every node is equal, 1 when any differs, 2 on usage errors (a directory missing or without\n"
      "node-<i>.snap files, node counts that differ), 3 when a snapshot file cannot be read or fails its checks.");
  cmd->add_option("A", o->a, "First snapshot directory")->required();
  cmd->add_option("B", o->b, "Second snapshot directory")->required();
  AddFormatOption(cmd, o->format);
  cmd->add_option("-n,--limit", o->limit,
                  "Differing keys listed per node (default 20; 0 lists all); counts are always complete");
  cmd->add_option("--max-bytes", o->max_bytes,
                  "Shorten keys and values to N bytes in text output (default 32; 0 prints them whole)");
  reg.Add(cmd, [o] { return RunDiff(*o); });
}

namespace {
const CommandRegistrar kRegister{70, RegisterDiff};
}  // namespace

}  // namespace walcut::cli
