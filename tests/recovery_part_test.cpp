// Restoring where the WAL lives (recovery/verdict.h, recovery/part.h): each
// node's WAL moved into its own directory tree (its "host"), scanned there,
// the verdict made from the summaries alone, each node restored from its own
// tree only, the parts assembled; the result must be byte for byte the
// single-host restore of the same cut (node files, and the manifest but for
// the base's directory). And every way the verdict, the WAL and the base can
// fail to belong together is refused, naming what does not match.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut/scan.h"
#include "cut_support.h"
#include "node/cluster.h"
#include "recovery/check.h"
#include "recovery/part.h"
#include "recovery/restore.h"
#include "recovery/verdict.h"
#include "sweep_support.h"
#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"
#include "walfmt/staging.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::recovery::AssembleParts;
using walcut::recovery::MakeVerdict;
using walcut::recovery::PartRequest;
using walcut::recovery::RestorePart;
using walcut::recovery::Verdict;
using walcut::recovery::VerdictOptions;
using walcut::recovery::WritePart;
using walcut::recovery::WriteRestore;
using TempDir = walcut::test::ScratchDir;
using nlohmann::json;

namespace {

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A manifest without the base's directory (a single-host restore names the
// snapshot directory of the cluster; the parts' bases lie on their hosts).
std::string ManifestSansBaseDir(const fs::path& dir) {
  json m = json::parse(Slurp(dir / "manifest.json"));
  m["base"].erase("dir");
  return m.dump(2);
}

// The cluster split into one tree per node: ROOT/host-<i>/node-<i>/wal and
// ROOT/host-<i>/snapshots/<name>/node-<i>.snap. The cluster directory keeps
// cluster.json and nothing of any node's WAL, so a restore that read from it
// or from another host's tree would fail.
struct Hosts {
  std::vector<fs::path> node_dirs;   // host-<i>/node-<i>
  std::vector<fs::path> snap_roots;  // host-<i>/snapshots
  std::string cluster_json;
};

Hosts SplitIntoHosts(const std::string& cluster_dir, const fs::path& root, uint32_t nodes) {
  Hosts h;
  h.cluster_json = Slurp(fs::path(cluster_dir) / "cluster.json");
  for (uint32_t i = 0; i < nodes; ++i) {
    const fs::path host = root / fmt::format("host-{}", i);
    fs::create_directories(host);
    const fs::path nd = host / fmt::format("node-{}", i);
    fs::rename(fs::path(cluster_dir) / fmt::format("node-{}", i), nd);
    const fs::path snaps = host / "snapshots";
    std::error_code ec;
    if (fs::is_directory(fs::path(cluster_dir) / "snapshots", ec)) {
      for (const auto& e : fs::directory_iterator(fs::path(cluster_dir) / "snapshots")) {
        fs::create_directories(snaps / e.path().filename());
        fs::copy_file(e.path() / fmt::format("node-{}.snap", i),
                      snaps / e.path().filename() / fmt::format("node-{}.snap", i));
      }
    }
    h.node_dirs.push_back(nd);
    h.snap_roots.push_back(snaps);
  }
  fs::remove_all(fs::path(cluster_dir) / "snapshots");
  return h;
}

// What `walcut scan` does on each host, then the reconstruction from the
// summaries alone.
ClusterCuts ScanHosts(const Hosts& h) {
  std::vector<walcut::cut::NodeSummary> sums;
  for (uint32_t i = 0; i < h.node_dirs.size(); ++i) {
    walcut::cut::ScanOptions so;
    so.node = i;
    auto s = walcut::cut::ScanNode((h.node_dirs[i] / "wal").string(), so);
    REQUIRE(s.ok());
    // The summary travels as a file.
    auto back = walcut::cut::SummaryFromJson(walcut::cut::SummaryToJson(*s), "summary");
    REQUIRE(back.ok());
    sums.push_back(std::move(back.value()));
  }
  auto cc = walcut::cut::Reconstruct(std::move(sums));
  REQUIRE(cc.ok());
  return std::move(cc.value());
}

// The verdict as the hosts receive it: through its file format.
Verdict Shipped(const Verdict& v) {
  auto back = walcut::recovery::VerdictFromJson(walcut::recovery::VerdictToJson(v), "verdict");
  REQUIRE(back.ok());
  CHECK(back->id == v.id);
  return std::move(back.value());
}

PartRequest Request(const Verdict& v, const Hosts& h, uint32_t i, const fs::path& out) {
  PartRequest r;
  r.verdict = &v;
  r.node = i;
  r.wal_dir = (h.node_dirs[i] / "wal").string();
  r.base_dir = v.base_kind == walcut::recovery::BaseKind::kFull ? (h.snap_roots[i] / v.base_name).string() : "";
  r.out = out.string();
  return r;
}

struct Counts {
  uint64_t seeds = 0, cuts = 0, full_base = 0, refused = 0, forced = 0;
};

void CheckSeed(uint64_t seed, Counts& counts) {
  INFO("seed " << seed << " (rerun: WALCUT_PART_SEED=" << seed << ")");
  TempDir d("part");
  walcut::node::ClusterOptions opt = walcut::test::SweepShape((d.path / "c").string(), seed);
  if (seed % 2 == 0) opt.full_snapshot_at_tx = 100;  // a full base for the cuts after it
  auto run = walcut::node::RunCluster(opt);
  REQUIRE(run.ok());
  auto layout = walcut::cut::FindClusterLayout(opt.dir);
  REQUIRE(layout.ok());
  const ClusterCuts cc = walcut::test::LoadCuts(opt.dir);

  // Single host first: every consistent cut (and every forced one that
  // started on every node), from the base restore chooses.
  std::vector<uint64_t> restored, forced;
  for (const auto& g : cc.cuts) {
    bool all_started = true;
    for (const auto* nc : g.nodes) all_started &= nc != nullptr && nc->started;
    const bool consistent = g.status == CutStatus::kConsistent;
    if (!consistent && !all_started) continue;
    auto base = walcut::recovery::ChooseBase(cc, *layout, g.cut_id);
    REQUIRE(base.ok());
    walcut::recovery::RestoreRequest req;
    req.cluster_dir = opt.dir;
    req.cut = g.cut_id;
    req.base = base->base;
    req.force = !consistent;
    req.out = (d.path / fmt::format("single-{}", g.cut_id)).string();
    auto r = walcut::recovery::Restore(cc, *layout, req);
    if (!consistent && !r.ok()) continue;  // a forced restore the WAL cannot serve (no CUT_FINISH anywhere near)
    INFO("cut " << g.cut_id << ": " << r.status().message());
    REQUIRE(r.ok());
    REQUIRE(WriteRestore(*r, req.out).ok());
    (consistent ? restored : forced).push_back(g.cut_id);
  }
  ++counts.seeds;

  const Hosts h = SplitIntoHosts(opt.dir, d.path, opt.nodes);
  const ClusterCuts per_host = ScanHosts(h);
  REQUIRE(per_host.cuts.size() == cc.cuts.size());
  for (size_t c = 0; c < cc.cuts.size(); ++c) CHECK(per_host.cuts[c].status == cc.cuts[c].status);

  auto assemble_and_compare = [&](uint64_t k, const Verdict& v, bool force) {
    INFO("cut " << k << (force ? " (forced)" : ""));
    std::vector<std::string> parts;
    for (uint32_t i = 0; i < opt.nodes; ++i) {
      const fs::path out = d.path / fmt::format("part-{}-{}", k, i);
      PartRequest req = Request(v, h, i, out);
      req.force = force;
      auto r = RestorePart(req);
      INFO("node " << i << ": " << r.status().message());
      REQUIRE(r.ok());
      REQUIRE(WritePart(*r, v, out.string()).ok());
      parts.push_back(out.string());
    }
    std::reverse(parts.begin(), parts.end());  // any order
    const fs::path out = d.path / fmt::format("assembled-{}", k);
    auto a = AssembleParts(parts, out.string());
    INFO(a.status().message());
    REQUIRE(a.ok());
    REQUIRE(WriteRestore(*a, out.string()).ok());
    const fs::path single = d.path / fmt::format("single-{}", k);
    for (uint32_t i = 0; i < opt.nodes; ++i) {
      const std::string f = fmt::format("node-{}.snap", i);
      INFO(f);
      CHECK(Slurp(out / f) == Slurp(single / f));
    }
    CHECK(ManifestSansBaseDir(out) == ManifestSansBaseDir(single));
  };

  VerdictOptions vo;
  vo.cluster_json = h.cluster_json;
  for (uint64_t k : restored) {
    auto made = MakeVerdict(per_host, k, vo);
    INFO("cut " << k << ": " << made.status().message());
    REQUIRE(made.ok());
    const Verdict v = Shipped(*made);
    counts.full_base += v.base_kind == walcut::recovery::BaseKind::kFull;
    assemble_and_compare(k, v, false);
    ++counts.cuts;
  }
  for (uint64_t k : forced) {
    auto made = MakeVerdict(per_host, k, vo);
    REQUIRE(made.ok());
    const Verdict v = Shipped(*made);
    // Refused on every node without --force, named as a refusal.
    for (uint32_t i = 0; i < opt.nodes; ++i) {
      auto r = RestorePart(Request(v, h, i, d.path / fmt::format("refused-{}-{}", k, i)));
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
      CHECK_THAT(r.status().message(), Catch::Contains("refusing to restore it without --force"));
      CHECK_FALSE(fs::exists(d.path / fmt::format("refused-{}-{}", k, i)));
    }
    ++counts.refused;
    bool every_node_finished = true;
    for (const auto& n : v.nodes) every_node_finished &= n.finished;
    (void)every_node_finished;
    assemble_and_compare(k, v, true);
    ++counts.forced;
  }
}

}  // namespace

TEST_CASE(
    "per-node restores + assembly equal the single-host restore, every cut of 100 seeds, each WAL on its own host") {
  uint64_t first = 1, count = 100;
  if (const char* s = std::getenv("WALCUT_PART_SEED")) {
    first = std::strtoull(s, nullptr, 10);
    count = 1;
  } else if (const char* c = std::getenv("WALCUT_PART_SEEDS")) {
    count = std::strtoull(c, nullptr, 10);
  }
  Counts counts;
  for (uint64_t seed = first; seed < first + count; ++seed) CheckSeed(seed, counts);
  WARN(
      fmt::format("{} seeds: {} consistent cuts restored per node and assembled ({} from a full snapshot), {} "
                  "inconsistent cuts refused per node and then forced",
                  counts.seeds, counts.cuts, counts.full_base, counts.refused));
  CHECK(counts.cuts > 0);
  if (count >= 100) {
    CHECK(counts.full_base > 0);
    CHECK(counts.refused > 0);
  }
}

namespace {

// One cluster split into hosts, with a consistent cut restorable from its
// full snapshot, and that cut's verdict as shipped.
struct Split {
  std::unique_ptr<TempDir> dir;
  walcut::node::ClusterOptions opt;
  Hosts hosts;
  ClusterCuts cc;
  uint64_t cut = 0;
  Verdict verdict;
};

// segment_bytes 0: the sweep shape's.
Split MakeSplit(uint64_t seed, const std::string& tag, uint64_t segment_bytes = 0) {
  Split s;
  s.dir = std::make_unique<TempDir>(tag);
  s.opt = walcut::test::SweepShape((s.dir->path / "c").string(), seed);
  s.opt.full_snapshot_at_tx = 100;
  if (segment_bytes) s.opt.segment_bytes = segment_bytes;
  REQUIRE(walcut::node::RunCluster(s.opt).ok());
  s.hosts = SplitIntoHosts(s.opt.dir, s.dir->path, s.opt.nodes);
  s.cc = ScanHosts(s.hosts);
  VerdictOptions vo;
  vo.cluster_json = s.hosts.cluster_json;
  // The last consistent cut: served by the full snapshot.
  for (const auto& g : s.cc.cuts) {
    if (g.status == CutStatus::kConsistent) s.cut = g.cut_id;
  }
  REQUIRE(s.cut > 0);
  auto v = MakeVerdict(s.cc, s.cut, vo);
  REQUIRE(v.ok());
  REQUIRE(v->base_kind == walcut::recovery::BaseKind::kFull);
  s.verdict = Shipped(*v);
  return s;
}

// RestorePart must refuse, with this code and a message containing `what`,
// and leave no output behind.
void Refused(const PartRequest& req, walfmt::ErrorCode code, const std::string& what) {
  auto r = RestorePart(req);
  INFO(r.status().message());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == code);
  CHECK_THAT(r.status().message(), Catch::Contains(what));
  CHECK_FALSE(fs::exists(req.out));
  // Nothing staged beside OUT either.
  for (const auto& e : fs::directory_iterator(fs::path(req.out).parent_path())) {
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  }
}

}  // namespace

TEST_CASE("a per-node restore refuses a verdict, a WAL or a base that do not belong together, naming the mismatch") {
  Split s = MakeSplit(4, "part-refuse");
  const fs::path out = s.dir->path / "out";
  const Verdict& v = s.verdict;
  // The unmodified request works (so each refusal below is the change's doing).
  {
    auto ok = RestorePart(Request(v, s.hosts, 0, out));
    INFO(ok.status().message());
    REQUIRE(ok.ok());
    std::error_code ec;
    fs::remove_all(ok->stage_dir, ec);
  }

  SECTION("a verdict of another cluster") {
    Split other = MakeSplit(6, "part-other");
    REQUIRE(other.verdict.cluster_id != v.cluster_id);
    Refused(Request(other.verdict, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("the WAL is from cluster {:016x}, the verdict is for cluster {:016x}", v.cluster_id,
                        other.verdict.cluster_id));
  }
  SECTION("another node's WAL") {
    PartRequest req = Request(v, s.hosts, 0, out);
    req.wal_dir = (s.hosts.node_dirs[1] / "wal").string();
    Refused(req, walfmt::ErrorCode::kInvalidArgument, "holds node 1's WAL (segment");
  }
  SECTION("a node the verdict does not cover") {
    PartRequest req = Request(v, s.hosts, 0, out);
    req.node = static_cast<uint32_t>(v.nodes.size());
    Refused(req, walfmt::ErrorCode::kInvalidArgument, fmt::format("there is no node {}", v.nodes.size()));
  }
  SECTION("another node's summary in the verdict: its base is not this node's") {
    Verdict bad = v;
    bad.nodes[0] = v.nodes[1];
    bad.nodes[0].node = 0;
    Refused(Request(bad, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("snapshot {} taken at {}, the verdict's base is {} at {}", v.base_name,
                        v.nodes[0].from.ToString(), v.base_name, v.nodes[1].from.ToString()));
  }
  SECTION("another node's summary in the verdict: its positions are not this WAL's") {
    VerdictOptions vo;
    vo.cluster_json = s.hosts.cluster_json;
    vo.base = "genesis";
    auto made = MakeVerdict(s.cc, v.cut, vo);
    REQUIRE(made.ok());
    Verdict bad = *made;
    bad.nodes[0] = made->nodes[1];
    bad.nodes[0].node = 0;
    Refused(Request(bad, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("node 0: the verdict (cut {}) places ", v.cut));
  }
  SECTION("a verdict of another cut") {
    Verdict bad = v;
    bad.cut = v.cut - 1;
    Refused(Request(bad, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("places CUT_START({}) at {}, but node 0's WAL has CUT_START({}) there", v.cut - 1,
                        v.nodes[0].start.ToString(), v.cut));
  }
  SECTION("CUT_FINISH where no record starts") {
    Verdict bad = v;
    bad.nodes[0].finish.offset += 1;
    Refused(Request(bad, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("places CUT_FINISH({}) tracking", v.cut));
  }
  SECTION("CUT_START where no record starts") {
    Verdict bad = v;
    bad.nodes[0].start.offset += 1;
    Refused(Request(bad, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("places CUT_START({}) at {}, but node 0's WAL has no record starting there", v.cut,
                        bad.nodes[0].start.ToString()));
  }
  SECTION("tracked sets that are not the CUT_FINISH record's") {
    Verdict bad = v;
    uint32_t i = 0;
    while (i < bad.nodes.size() && bad.nodes[i].before.empty() && bad.nodes[i].after.empty()) ++i;
    REQUIRE(i < bad.nodes.size());
    auto& list = bad.nodes[i].before.empty() ? bad.nodes[i].after : bad.nodes[i].before;
    list.pop_back();
    Refused(Request(bad, s.hosts, i, out), walfmt::ErrorCode::kInvalidArgument, "not the ");
  }
  SECTION("a tracked transaction's commit elsewhere") {
    Verdict bad = v;
    uint32_t i = 0;
    auto committed = [](const walcut::recovery::VerdictNode& n) {
      for (const auto& t : n.before)
        if (t.committed) return true;
      return false;
    };
    while (i < bad.nodes.size() && !committed(bad.nodes[i])) ++i;
    REQUIRE(i < bad.nodes.size());
    for (auto& t : bad.nodes[i].before) {
      if (t.committed) {
        t.marker += 1;
        break;
      }
    }
    Refused(Request(bad, s.hosts, i, out), walfmt::ErrorCode::kInvalidArgument, "expected marker");
  }
  SECTION("a transaction count the WAL does not hold") {
    Verdict bad = v;
    REQUIRE(bad.nodes[2].has_transactions);
    bad.nodes[2].transactions += 1;
    Refused(Request(bad, s.hosts, 2, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("transactions of cut {}, the summaries count {}", v.cut, bad.nodes[2].transactions));
  }
  SECTION("another node's base file") {
    const fs::path wrong = s.dir->path / "wrong-base";
    fs::create_directories(wrong);
    fs::copy_file(s.hosts.snap_roots[1] / v.base_name / "node-1.snap", wrong / "node-0.snap");
    PartRequest req = Request(v, s.hosts, 0, out);
    req.base_dir = wrong.string();
    Refused(req, walfmt::ErrorCode::kInvalidArgument, "holds node 1, expected node 0");
  }
  SECTION("a base the verdict's SNAPSHOT record does not describe") {
    Verdict bad = v;
    bad.nodes[0].snapshot_fingerprint ^= 1;
    Refused(Request(bad, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument, "the verdict's SNAPSHOT record says");
  }
  SECTION("a verdict file edited by hand") {
    std::string text = walcut::recovery::VerdictToJson(v);
    const std::string from = fmt::format("\"cut\": {}", v.cut);
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), fmt::format("\"cut\": {}", v.cut + 1));
    auto back = walcut::recovery::VerdictFromJson(text, "v.json");
    REQUIRE_FALSE(back.ok());
    CHECK_THAT(back.status().message(), Catch::Contains("v.json: its content does not match its id"));
  }
  SECTION("an output that exists") {
    fs::create_directories(out);
    auto r = RestorePart(Request(v, s.hosts, 0, out));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("already exists"));
  }
}

// The positions of every record of a WAL directory, in order.
std::vector<walfmt::Lsn> RecordPositions(const fs::path& wal) {
  std::vector<walfmt::Lsn> at;
  auto segs = walfmt::ListSegments(wal.string(), [](const walfmt::Problem&) {});
  REQUIRE(segs.ok());
  walfmt::NodeReadOptions ro;
  walfmt::ReadNodeWal(
      *segs, ro,
      [&](const walfmt::RecordView& r) {
        at.push_back(r.lsn);
        return true;
      },
      [](const walfmt::Problem&) {});
  return at;
}

TEST_CASE("a per-node restore refuses a CUT_FINISH position that is another record of the node's WAL") {
  Split s = MakeSplit(4, "part-finish");
  const fs::path out = s.dir->path / "out";
  const Verdict& v = s.verdict;
  const walcut::recovery::VerdictNode& vn = v.nodes[0];
  REQUIRE(vn.finished);
  // The positions the verdict names on node 0 besides CUT_FINISH: a record
  // there is checked as what it is, so CUT_FINISH is moved elsewhere.
  std::vector<walfmt::Lsn> named = {vn.from, vn.start};
  for (const auto* list : {&vn.before, &vn.after}) {
    for (const auto& t : *list) {
      named.push_back(t.commit);
      named.push_back(t.first_seen);
    }
  }
  auto is_named = [&](walfmt::Lsn p) { return std::find(named.begin(), named.end(), p) != named.end(); };
  const std::vector<walfmt::Lsn> at = RecordPositions(s.hosts.node_dirs[0] / "wal");
  const auto finish = std::find(at.begin(), at.end(), vn.finish);
  REQUIRE(finish != at.end());
  std::vector<walfmt::Lsn> moved;
  // The nearest record before CUT_FINISH that the verdict does not name, after CUT_START.
  for (auto it = finish; it != at.begin();) {
    --it;
    if (!(vn.start < *it)) break;
    if (!is_named(*it)) {
      moved.push_back(*it);
      break;
    }
  }
  // The record right after it, when the WAL goes on.
  if (finish + 1 != at.end() && !is_named(*(finish + 1))) moved.push_back(*(finish + 1));
  REQUIRE_FALSE(moved.empty());
  for (const walfmt::Lsn p : moved) {
    INFO("CUT_FINISH moved from " << vn.finish.ToString() << " to " << p.ToString());
    Verdict bad = v;
    bad.nodes[0].finish = p;
    auto r = RestorePart(Request(bad, s.hosts, 0, out));
    INFO(r.status().message());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK_THAT(
        r.status().message(),
        Catch::Contains(fmt::format("node 0: the verdict (cut {}) places CUT_FINISH({}) tracking", v.cut, v.cut)) &&
            Catch::Contains(fmt::format("at {}, but node 0's WAL has ", p.ToString())));
    CHECK_THAT(r.status().message(), !Catch::Contains("no record starting there"));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("assembly refuses parts that are not one restore: a node missing or twice, another verdict, a damaged file") {
  Split s = MakeSplit(4, "part-assemble");
  const Verdict& v = s.verdict;
  auto part = [&](const Verdict& vv, uint32_t i, const std::string& name) {
    const fs::path out = s.dir->path / name;
    auto r = RestorePart(Request(vv, s.hosts, i, out));
    REQUIRE(r.ok());
    REQUIRE(WritePart(*r, vv, out.string()).ok());
    return out.string();
  };
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < s.opt.nodes; ++i) parts.push_back(part(v, i, fmt::format("p{}", i)));
  const std::string out = (s.dir->path / "assembled").string();
  auto refused = [&](const std::vector<std::string>& ps, const std::string& what) {
    auto a = AssembleParts(ps, out);
    INFO(a.status().message());
    REQUIRE_FALSE(a.ok());
    CHECK_THAT(a.status().message(), Catch::Contains(what));
    CHECK_FALSE(fs::exists(out));
  };
  {  // all of them: fine
    auto a = AssembleParts(parts, out);
    REQUIRE(a.ok());
    REQUIRE(WriteRestore(*a, out).ok());
    fs::remove_all(out);
  }
  SECTION("a node missing") {
    std::vector<std::string> ps = parts;
    ps.erase(ps.begin() + 1);
    refused(ps, fmt::format("cut {} of a {}-node cluster: no part for node 1", v.cut, s.opt.nodes));
  }
  SECTION("a node twice") {
    std::vector<std::string> ps = parts;
    fs::copy(parts[1], s.dir->path / "p1-copy", fs::copy_options::recursive);
    ps.push_back((s.dir->path / "p1-copy").string());
    refused(ps, "node 1 appears twice");
  }
  SECTION("a part of another cut") {
    // The previous consistent cut's verdict, for node 1.
    uint64_t earlier = 0;
    for (const auto& g : s.cc.cuts) {
      if (g.status == CutStatus::kConsistent && g.cut_id < v.cut) earlier = g.cut_id;
    }
    REQUIRE(earlier > 0);
    VerdictOptions vo;
    vo.cluster_json = s.hosts.cluster_json;
    auto made = MakeVerdict(s.cc, earlier, vo);
    REQUIRE(made.ok());
    const Verdict ve = Shipped(*made);
    refused({parts[0], part(ve, 1, "p1-earlier"), parts[2]}, fmt::format("cut {} against {}", v.cut, earlier));
  }
  SECTION("a part of another verdict for the same cut") {
    VerdictOptions vo;
    vo.cluster_json = s.hosts.cluster_json;
    vo.base = "genesis";
    auto made = MakeVerdict(s.cc, v.cut, vo);
    REQUIRE(made.ok());
    const Verdict vg = Shipped(*made);
    refused({parts[0], part(vg, 1, "p1-genesis"), parts[2]}, fmt::format("verdict {} against {}", v.id, vg.id));
  }
  SECTION("a node file that does not read back") {
    const std::string f = parts[2] + "/node-2.snap";
    std::string bytes = Slurp(f);
    bytes[bytes.size() / 2] ^= 0x01;
    std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    refused(parts, parts[2] + "/node-2.snap");
  }
  SECTION("a part manifest edited by hand") {
    const std::string mf = parts[1] + "/manifest.json";
    json m = json::parse(Slurp(mf));
    m["cluster_id"] = "not hex";
    std::ofstream(mf, std::ios::binary | std::ios::trunc) << m.dump(2);
    refused(parts, parts[1] + "/manifest.json: field 'cluster_id': \"not hex\" is not 16 lower-case hex digits");
  }
  SECTION("a whole restore is not a part") {
    const std::string whole = (s.dir->path / "whole").string();
    auto a = AssembleParts(parts, whole);
    REQUIRE(a.ok());
    REQUIRE(WriteRestore(*a, whole).ok());
    refused({whole}, "it is a whole restore already");
  }
}

TEST_CASE("assembly refuses a part whose manifest or node file disagrees, naming the part and the field") {
  Split s = MakeSplit(4, "part-fields");
  const Verdict& v = s.verdict;
  const uint32_t nodes = s.opt.nodes;
  REQUIRE(nodes >= 3);
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < nodes; ++i) {
    const fs::path out = s.dir->path / fmt::format("p{}", i);
    auto r = RestorePart(Request(v, s.hosts, i, out));
    REQUIRE(r.ok());
    REQUIRE(WritePart(*r, v, out.string()).ok());
    parts.push_back(out.string());
  }
  const std::string out = (s.dir->path / "assembled").string();
  auto refused = [&](const std::vector<std::string>& ps, walfmt::ErrorCode code, const std::string& message) {
    auto a = AssembleParts(ps, out);
    INFO(a.status().message());
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().code() == code);
    CHECK(a.status().message() == message);
    CHECK_FALSE(fs::exists(out));
  };
  const std::string mf1 = parts[1] + "/manifest.json";
  auto edit = [&](const std::string& mf, const std::function<void(json&)>& f) {
    json m = json::parse(Slurp(mf));
    f(m);
    std::ofstream(mf, std::ios::binary | std::ios::trunc) << m.dump(2);
  };
  const json m1 = json::parse(Slurp(mf1));
  const std::string cluster = m1.at("cluster_id").get<std::string>();
  const std::string other_cluster = cluster == "00000000000000ff" ? "00000000000000fe" : "00000000000000ff";
  const auto invalid = walfmt::ErrorCode::kInvalidArgument;
  const auto corrupt = walfmt::ErrorCode::kCorruption;
  {  // the parts as written assemble
    auto a = AssembleParts(parts, out);
    INFO(a.status().message());
    REQUIRE(a.ok());
    walfmt::RemoveStaging(a->stage_dir);
  }

  SECTION("nothing to assemble, or an output that exists") {
    refused({}, invalid, "no parts to assemble");
    fs::create_directories(out);
    auto a = AssembleParts(parts, out);
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().message() == out + ": already exists; refusing to overwrite");
  }
  SECTION("a part that is not there, or has no manifest, or one that is not JSON") {
    const std::string none = (s.dir->path / "none").string();
    refused({parts[0], none}, walfmt::ErrorCode::kNotFound, none + ": no such directory");
    fs::remove(mf1);
    refused(parts, invalid, parts[1] + ": not a per-node restore (no manifest.json)");
    std::ofstream(mf1, std::ios::binary | std::ios::trunc) << "{ not json";
    refused(parts, invalid, mf1 + ": not JSON");
  }
  SECTION("a part of another cluster") {
    edit(mf1, [&](json& m) { m["cluster_id"] = other_cluster; });
    refused(parts, invalid,
            fmt::format("{} and {} are not parts of one restore: cluster {} against {}", parts[0], parts[1], cluster,
                        other_cluster));
  }
  SECTION("a part of a cluster of another size") {
    edit(mf1, [&](json& m) { m["nodes"] = nodes + 1; });
    refused(parts, invalid,
            fmt::format("{} and {} are not parts of one restore: node count {} against {}", parts[0], parts[1], nodes,
                        nodes + 1));
  }
  SECTION("a part of another base") {
    edit(mf1, [&](json& m) { m["base"]["name"] = "full-other"; });
    refused(parts, invalid,
            fmt::format("{} and {} are not parts of one restore: base {} against full-other", parts[0], parts[1],
                        v.base_name));
  }
  SECTION("a manifest naming one node and holding another's entry") {
    edit(mf1, [&](json& m) { m["entry"]["node"] = 2; });
    refused(parts, invalid, mf1 + ": names node 1 and holds an entry of node 2");
  }
  SECTION("a node beyond the cluster's node count") {
    edit(mf1, [&](json& m) {
      m["node"] = nodes;
      m["entry"]["node"] = nodes;
    });
    refused(parts, invalid, fmt::format("{}: node {} of a cluster of {} nodes", mf1, nodes, nodes));
  }
  SECTION("a part without its node file") {
    fs::remove(parts[1] + "/node-1.snap");
    refused(parts, invalid, parts[1] + ": the part has no node-1.snap");
  }
  SECTION("a node file of another node") {
    fs::copy_file(parts[2] + "/node-2.snap", parts[1] + "/node-1.snap", fs::copy_options::overwrite_existing);
    refused(parts, corrupt, parts[1] + "/node-1.snap: holds node 2");
  }
  SECTION("node files of another cluster than the parts say") {
    for (const auto& p : parts) edit(p + "/manifest.json", [&](json& m) { m["cluster_id"] = other_cluster; });
    refused(parts, corrupt,
            fmt::format("{}/node-0.snap: is from cluster {}, the part says {}", parts[0], cluster, other_cluster));
  }
  SECTION("a node file whose fingerprint is not the manifest's") {
    const std::string fp = m1.at("entry").at("fingerprint").get<std::string>();
    const std::string other_fp = fp == "0000000000000001" ? "0000000000000002" : "0000000000000001";
    edit(mf1, [&](json& m) { m["entry"]["fingerprint"] = other_fp; });
    refused(parts, corrupt,
            fmt::format("{}/node-1.snap: has fingerprint {}, the part's manifest says {}", parts[1], fp, other_fp));
  }
  SECTION("a node file with another number of keys than the manifest's") {
    const uint64_t keys = m1.at("entry").at("entries").get<uint64_t>();
    edit(mf1, [&](json& m) { m["entry"]["entries"] = keys + 1; });
    refused(parts, corrupt,
            fmt::format("{}/node-1.snap: holds {} keys, the part's manifest says {}", parts[1], keys, keys + 1));
  }
  SECTION("a node file taken at another position than the manifest's cut start") {
    const std::string at = m1.at("entry").at("cut_start").get<std::string>();
    edit(mf1, [&](json& m) { m["entry"]["cut_start"] = "0/00000000"; });
    refused(parts, corrupt,
            fmt::format("{}/node-1.snap: is cut-{} at {}, not cut-{} at 0/00000000", parts[1], v.cut, at, v.cut));
  }
}

TEST_CASE("a per-node restore refuses a WAL whose first segment has no usable header, naming the segment") {
  Split s = MakeSplit(4, "part-header");
  const Verdict& v = s.verdict;
  const fs::path wal = s.hosts.node_dirs[0] / "wal";
  std::vector<fs::path> segs;
  for (const auto& e : fs::directory_iterator(wal)) segs.push_back(e.path());
  std::sort(segs.begin(), segs.end());
  REQUIRE_FALSE(segs.empty());
  const fs::path first = segs.front();
  SECTION("a file too short for a header") {
    fs::resize_file(first, 10);
    Refused(Request(v, s.hosts, 0, s.dir->path / "out"), walfmt::ErrorCode::kCorruption,
            first.string() + ": segment header unusable: file too short");
  }
  SECTION("a header whose bytes are wrong") {
    std::string bytes = Slurp(first);
    bytes[0] ^= 0xff;
    std::ofstream(first, std::ios::binary | std::ios::trunc) << bytes;
    Refused(Request(v, s.hosts, 0, s.dir->path / "out"), walfmt::ErrorCode::kCorruption,
            first.string() + ": segment header unusable: ");
  }
}

TEST_CASE("check of one node: usage errors, a verdict that is not consistent, a restore the WAL refuses") {
  Split s = MakeSplit(4, "part-check");
  const Verdict& v = s.verdict;
  const fs::path scratch = s.dir->path / "tmp";
  fs::create_directories(scratch);
  walcut::recovery::CheckOptions o;
  o.node = 0;
  o.dir = (s.hosts.node_dirs[0] / "wal").string();
  o.level = walcut::recovery::CheckLevel::kRestore;
  o.verdict = &v;
  o.base_dir = (s.hosts.snap_roots[0] / v.base_name).string();
  o.temp_dir = scratch.string();
  auto item = [](const walcut::recovery::CheckReport& r, const std::string& group, const std::string& name) {
    const walcut::recovery::CheckItem* found = nullptr;
    for (const auto& i : r.items) {
      if (i.group == group && i.name == name) found = &i;
    }
    REQUIRE(found);
    return *found;
  };
  const std::string group = fmt::format("cut-{}", v.cut);
  {  // as it is: the node passes
    auto r = walcut::recovery::RunCheck(o);
    INFO((r.ok() ? "" : r.status().message()));
    REQUIRE(r.ok());
    CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kOk);
    CHECK(item(*r, group, "node 0: verdict").outcome == walcut::recovery::ItemOutcome::kPass);
    CHECK(item(*r, group, "node 0: restore").outcome == walcut::recovery::ItemOutcome::kPass);
  }
  auto usage = [&](walfmt::ErrorCode code, const std::string& message) {
    auto r = walcut::recovery::RunCheck(o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(r.status().message() == message);
  };

  SECTION("a directory that is not there") {
    o.dir = (s.dir->path / "nope").string();
    usage(walfmt::ErrorCode::kNotFound, o.dir + ": no such directory");
  }
  SECTION("level cuts") {
    o.level = walcut::recovery::CheckLevel::kCuts;
    usage(walfmt::ErrorCode::kInvalidArgument,
          "level cuts needs every node's WAL or summary: run `walcut check` on the cluster, or `walcut cuts` on the "
          "summaries; one node checks level files, or level restore with --verdict");
  }
  SECTION("level restore without a verdict") {
    o.verdict = nullptr;
    usage(walfmt::ErrorCode::kInvalidArgument,
          "level restore of one node needs the cut's verdict (--verdict FILE, from `walcut cuts SUMMARIES... "
          "--verdict-out FILE --cut K`)");
  }
  SECTION("a verdict of another cut than --cut") {
    o.cut = v.cut + 1;
    usage(walfmt::ErrorCode::kInvalidArgument, fmt::format("the verdict is for cut {}, not cut {}", v.cut, v.cut + 1));
  }
  SECTION("a verdict whose cut is not consistent: a finding, and the node is not restored") {
    Verdict bad = v;
    bad.status = CutStatus::kInconsistent;
    bad.reason = "nodes 0 and 1 disagree";
    o.verdict = &bad;
    auto r = walcut::recovery::RunCheck(o);
    REQUIRE(r.ok());
    CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);
    const auto vi = item(*r, group, "node 0: verdict");
    CHECK(vi.outcome == walcut::recovery::ItemOutcome::kFail);
    REQUIRE(vi.findings.size() == 1);
    CHECK(vi.findings[0].check == "status");
    CHECK(vi.findings[0].found == "inconsistent");
    CHECK(vi.findings[0].message ==
          fmt::format("cut {} is inconsistent (verdict {}): nodes 0 and 1 disagree", v.cut, v.id));
    CHECK(item(*r, group, "node 0: restore").outcome == walcut::recovery::ItemOutcome::kSkipped);
  }
  SECTION("a verdict whose CUT_START is where the WAL has no record: the restore's refusal is a finding") {
    Verdict bad = v;
    bad.nodes[0].start.offset += 1;
    o.verdict = &bad;
    auto r = walcut::recovery::RunCheck(o);
    REQUIRE(r.ok());
    CHECK(walcut::recovery::CheckOutcome(*r) == walfmt::Outcome::kFindings);
    CHECK(r->errors.empty());
    const auto ri = item(*r, group, "node 0: restore");
    CHECK(ri.outcome == walcut::recovery::ItemOutcome::kFail);
    REQUIRE(ri.findings.size() == 1);
    CHECK(ri.findings[0].check == "restore-refused");
    CHECK(ri.findings[0].node == 0u);
    CHECK_THAT(ri.findings[0].message,
               Catch::Contains(fmt::format("places CUT_START({}) at {}, but node 0's WAL has no record starting there",
                                           v.cut, bad.nodes[0].start.ToString())));
  }
}

namespace {

// The segment files of a WAL directory, by index.
std::vector<fs::path> SegmentFiles(const fs::path& wal) {
  std::vector<fs::path> segs;
  for (const auto& e : fs::directory_iterator(wal)) segs.push_back(e.path());
  std::sort(segs.begin(), segs.end());
  return segs;
}

uint64_t SegmentIndex(const fs::path& p) { return std::stoull(p.filename().string(), nullptr, 16); }

// A segment file's WAL bytes (decompressed when it is a .wal.zst).
std::string SegmentBytes(const fs::path& p) {
  const std::string raw = Slurp(p);
  if (p.extension() != ".zst") return raw;
  auto src = walfmt::MemorySource({reinterpret_cast<const uint8_t*>(raw.data()), raw.size()}, true);
  std::string out;
  for (;;) {
    const uint8_t* b = nullptr;
    size_t got = 0;
    REQUIRE(src->Get(out.size(), 1 << 16, b, got).ok());
    if (got == 0) return out;
    out.append(reinterpret_cast<const char*>(b), got);
  }
}

// Writes a segment file's WAL bytes back (compressed when it is a .wal.zst).
void WriteSegmentBytes(const fs::path& p, const std::string& bytes) {
  std::string data = bytes;
  if (p.extension() == ".zst") {
    auto z = walfmt::ZstdCompress({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    REQUIRE(z.ok());
    data = std::move(z.value());
  }
  std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
}

}  // namespace

TEST_CASE("a per-node restore refuses a WAL that changed since the verdict, naming the node and the position") {
  Split s = MakeSplit(4, "part-wal", 4096);  // small segments: the range spans several
  const Verdict& v = s.verdict;
  const fs::path out = s.dir->path / "out";
  const fs::path wal = s.hosts.node_dirs[0] / "wal";
  const walcut::recovery::VerdictNode& vn = v.nodes[0];
  REQUIRE(vn.finished);
  const std::vector<fs::path> segs = SegmentFiles(wal);

  SECTION("an output that exists is refused before the WAL is looked at") {
    fs::create_directories(out);
    PartRequest req = Request(v, s.hosts, 0, out);
    req.wal_dir = (s.dir->path / "no-wal").string();
    auto r = RestorePart(req);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(r.status().message() == out.string() + ": already exists; refusing to overwrite");
  }
  SECTION("the segments the range starts in removed") {
    REQUIRE(vn.from.segment < vn.finish.segment);
    uint64_t first_left = 0;
    for (const auto& p : segs) {
      if (SegmentIndex(p) <= vn.from.segment)
        fs::remove(p);
      else if (first_left == 0)
        first_left = SegmentIndex(p);
    }
    Refused(Request(v, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("{}: node 0's WAL starts at segment {}, but the restore of cut {} from base {} reads from {}",
                        wal.string(), first_left, v.cut, v.base_name, vn.from.ToString()));
  }
  SECTION("the WAL cut short before CUT_FINISH at a segment boundary") {
    for (const auto& p : segs) {
      if (SegmentIndex(p) >= vn.finish.segment) fs::remove(p);
    }
    REQUIRE(vn.finish.segment > vn.from.segment);
    Refused(Request(v, s.hosts, 0, out), walfmt::ErrorCode::kCorruption,
            fmt::format("node 0: the WAL ends at {}/", vn.finish.segment - 1));
    Refused(Request(v, s.hosts, 0, out), walfmt::ErrorCode::kCorruption,
            fmt::format("before CUT_FINISH at {}", vn.finish.ToString()));
  }
  SECTION("the WAL torn inside the range") {
    fs::path holder;
    for (const auto& p : segs) {
      if (SegmentIndex(p) == vn.finish.segment) holder = p;
    }
    REQUIRE_FALSE(holder.empty());
    REQUIRE(vn.finish.offset > 200);
    fs::resize_file(holder, vn.finish.offset - 7);
    Refused(Request(v, s.hosts, 0, out), walfmt::ErrorCode::kCorruption,
            fmt::format("node 0: the WAL range {}..{} is damaged: ", vn.from.ToString(), vn.finish.ToString()));
  }
  SECTION("segments of the range whose headers name another cluster") {
    REQUIRE(vn.from.segment > SegmentIndex(segs.front()));
    fs::path first_changed;
    for (const auto& p : segs) {
      if (SegmentIndex(p) < vn.from.segment) continue;
      std::string bytes = SegmentBytes(p);
      REQUIRE(bytes.size() >= walfmt::kSegmentHeaderSize);
      walfmt::SegmentHeader h;
      walfmt::HeaderError err;
      const bool decoded = walfmt::DecodeSegmentHeader(
          {reinterpret_cast<const uint8_t*>(bytes.data()), walfmt::kSegmentHeaderSize}, h, err);
      INFO(p.string() << ": " << err.what);
      REQUIRE(decoded);
      h.cluster_id ^= 0x77;
      uint8_t head[walfmt::kSegmentHeaderSize];
      walfmt::EncodeSegmentHeader(h, head);
      bytes.replace(0, walfmt::kSegmentHeaderSize, reinterpret_cast<const char*>(head), walfmt::kSegmentHeaderSize);
      WriteSegmentBytes(p, bytes);
      if (first_changed.empty()) first_changed = p;
    }
    Refused(Request(v, s.hosts, 0, out), walfmt::ErrorCode::kInvalidArgument,
            fmt::format("{}: segment {} is from cluster {:016x}, the verdict (cut {}) is for cluster {:016x}",
                        wal.string(), first_changed.string(), v.cluster_id ^ 0x77, v.cut, v.cluster_id));
  }
  SECTION("a base file of another cluster than the WAL") {
    Split other = MakeSplit(6, "part-wal-other");
    REQUIRE(other.verdict.cluster_id != v.cluster_id);
    const fs::path wrong = s.dir->path / "other-base";
    fs::create_directories(wrong);
    fs::copy_file(other.hosts.snap_roots[0] / other.verdict.base_name / "node-0.snap", wrong / "node-0.snap");
    PartRequest req = Request(v, s.hosts, 0, out);
    req.base_dir = wrong.string();
    Refused(req, walfmt::ErrorCode::kInvalidArgument,
            fmt::format("{}: from cluster {:016x}, the WAL is from {:016x}", (wrong / "node-0.snap").string(),
                        other.verdict.cluster_id, v.cluster_id));
  }
  SECTION("an output made while the part was restored") {
    auto r = RestorePart(Request(v, s.hosts, 0, out));
    REQUIRE(r.ok());
    const std::string stage = r->stage_dir;
    fs::create_directories(out);
    const auto st = WritePart(*r, v, out.string());
    REQUIRE_FALSE(st.ok());
    CHECK(st.code() == walfmt::ErrorCode::kInvalidArgument);
    CHECK(st.message() == out.string() + ": already exists; refusing to overwrite");
    CHECK(r->stage_dir.empty());
    CHECK_FALSE(fs::exists(stage));
  }
}
