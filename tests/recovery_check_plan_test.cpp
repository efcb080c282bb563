// What `walcut check` decides before it runs (recovery/check_plan.h) and how
// `walcut check merge` reads per-node reports back and joins them
// (recovery/check_merge.h), one decision at a time. End-to-end runs on the
// samples are in cli_check_test.cpp and cli_scaleout_test.cpp.
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "recovery/check_merge.h"
#include "recovery/check_plan.h"
#include "recovery/verdict.h"
#include "scratch_dir.h"

namespace fs = std::filesystem;
using walcut::recovery::CheckItem;
using walcut::recovery::CheckLevel;
using walcut::recovery::CheckPlan;
using walcut::recovery::CheckReport;
using walcut::recovery::CheckRequest;
using walcut::recovery::ItemOutcome;
using walcut::recovery::MergeCheckReports;
using walcut::recovery::PlanCheck;
using walcut::recovery::ReportNode;
using walfmt::ErrorCode;

namespace {

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void WriteText(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

// A cluster directory with the samples' cluster.json (3 nodes), node-1/wal,
// and a verdict of cut 6 over 3 nodes from the full snapshot "full-1500".
struct Fixture {
  walcut::test::ScratchDir d{"checkplan"};
  fs::path c = d.path / "c";
  std::string verdict = (d.path / "v.json").string();
  Fixture() {
    fs::create_directories(c / "node-1" / "wal");
    fs::copy_file(fs::path(WALCUT_SOURCE_DIR) / "samples" / "healthy" / "cluster.json", c / "cluster.json");
    walcut::recovery::Verdict v;
    v.cut = 6;
    v.base_kind = walcut::recovery::BaseKind::kFull;
    v.base_name = "full-1500";
    for (uint32_t i = 0; i < 3; ++i) {
      walcut::recovery::VerdictNode n;
      n.node = i;
      v.nodes.push_back(n);
    }
    WriteText(verdict, walcut::recovery::VerdictToJson(v));
  }
};

std::string Refusal(const CheckRequest& req, ErrorCode code = ErrorCode::kInvalidArgument) {
  auto p = PlanCheck(req);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == code);
  return p.status().message();
}

CheckItem Item(CheckLevel level, const std::string& group, const std::string& name, const std::string& note = "") {
  CheckItem i;
  i.level = level;
  i.group = group;
  i.name = name;
  i.note = note;
  return i;
}

// A per-node report: one files item of node-<node>, and with a verdict id the
// "node I: verdict" item a level restore check carries.
CheckReport NodeReport(uint32_t node, std::optional<uint64_t> cut = std::nullopt, const std::string& verdict = "") {
  CheckReport r;
  r.dir = fmt::format("c/node-{}", node);
  r.level = verdict.empty() ? CheckLevel::kFiles : CheckLevel::kRestore;
  r.selected_cut = cut;
  r.files.nodes = 1;
  r.files.segments = 2 + node;
  r.files.records = 100;
  r.items.push_back(Item(CheckLevel::kFiles, fmt::format("node-{}", node), "segment 0000000000000000.wal"));
  if (!verdict.empty()) {
    r.items.push_back(Item(CheckLevel::kCuts, fmt::format("cut-{}", *cut), fmt::format("node {}: verdict", node),
                           fmt::format("consistent (verdict {})", verdict)));
  }
  return r;
}

}  // namespace

TEST_CASE("PlanCheck: the level of a cluster's check follows the selection unless --level says") {
  Fixture fx;
  CheckRequest req;
  req.dir = fx.c.string();
  auto every = PlanCheck(req);
  REQUIRE(every.ok());
  CHECK(every->options.level == CheckLevel::kCuts);
  CHECK_FALSE(every->options.node);
  CHECK(every->options.dir == fx.c.string());
  CHECK(every->options.chain_restores);
  req.cut = 3;
  req.from_genesis = true;
  req.jobs = 2;
  auto one = PlanCheck(req);
  REQUIRE(one.ok());
  CHECK(one->options.level == CheckLevel::kRestore);
  CHECK(one->options.cut == std::optional<uint64_t>(3));
  CHECK_FALSE(one->options.chain_restores);
  CHECK(one->options.jobs == 2);
  req.level = "files";
  auto files = PlanCheck(req);
  REQUIRE(files.ok());
  CHECK(files->options.level == CheckLevel::kFiles);
  req.level = "everything";
  CHECK(Refusal(req) == "--level everything: expected files, cuts or restore");
}

TEST_CASE("PlanCheck: a state file must be one, an absent one starts a new state") {
  Fixture fx;
  CheckRequest req;
  req.dir = fx.c.string();
  req.state = (fx.d.path / "new-state.json").string();
  auto fresh = PlanCheck(req);
  REQUIRE(fresh.ok());
  CHECK(fresh->options.state_path == req.state);
  WriteText(fx.d.path / "garbage.json", "garbage");
  req.state = (fx.d.path / "garbage.json").string();
  CHECK(Contains(Refusal(req), "garbage.json"));
}

TEST_CASE("PlanCheck: one node's check, where its WAL lives") {
  Fixture fx;
  CheckRequest req;
  req.dir = (fx.c / "node-1").string();

  SECTION("a node directory is checked as one node, level files, its id from the name") {
    auto p = PlanCheck(req);
    REQUIRE(p.ok());
    CHECK(p->options.node == std::optional<uint32_t>(1));
    CHECK(p->options.dir == (fx.c / "node-1" / "wal").string());
    CHECK(p->options.level == CheckLevel::kFiles);
    CHECK(p->options.verdict == nullptr);
  }
  SECTION("a directory with wal/ and cluster.json is a cluster, not a node") {
    fs::create_directories(fx.c / "wal");
    req.dir = fx.c.string();
    auto p = PlanCheck(req);
    REQUIRE(p.ok());
    CHECK_FALSE(p->options.node);
  }
  SECTION("with a verdict: level restore, the verdict held by the plan, the base beside the cluster") {
    req.verdict = fx.verdict;
    auto p = PlanCheck(req);
    REQUIRE(p.ok());
    CheckPlan moved = std::move(p.value());
    CHECK(moved.options.level == CheckLevel::kRestore);
    REQUIRE(moved.options.verdict == moved.verdict.get());
    CHECK(moved.options.verdict->cut == 6);
    CHECK(moved.options.base_dir == (fx.c / "snapshots" / "full-1500").string());
    req.base = "/elsewhere/full-1500";
    req.level = "files";
    auto based = PlanCheck(req);
    REQUIRE(based.ok());
    CHECK(based->options.base_dir == "/elsewhere/full-1500");
    CHECK(based->options.level == CheckLevel::kFiles);
  }
  SECTION("its WAL directory with --node") {
    req.dir = (fx.c / "node-1" / "wal").string();
    req.node = 2;
    auto p = PlanCheck(req);
    REQUIRE(p.ok());
    CHECK(p->options.node == std::optional<uint32_t>(2));
    CHECK(p->options.dir == req.dir);
  }
  SECTION("refusals, each a usage error naming what is wrong") {
    req.node = 3;
    CHECK(Refusal(req) == fmt::format("--node 3: no such node; the cluster {} has nodes 0..2", fx.c.string()));
    req.node = -1;
    fs::create_directories(fx.d.path / "host" / "wal");
    req.dir = (fx.d.path / "host").string();
    CHECK(Refusal(req) == req.dir + ": cannot tell the node id from the path; give --node");
    req.dir = (fx.c / "node-1").string();
    req.all = true;
    CHECK(Contains(Refusal(req), "one node's check takes neither --all nor --from-genesis"));
    req.all = false;
    req.from_genesis = true;
    CHECK(Contains(Refusal(req), "one node's check takes neither --all nor --from-genesis"));
    req.from_genesis = false;
    req.verdict = fx.verdict;
    fs::create_directories(fx.c / "node-4" / "wal");
    fs::remove(fx.c / "cluster.json");  // no cluster.json: only the verdict bounds --node
    req.dir = (fx.c / "node-4").string();
    CHECK(Refusal(req) == "--node 4: no such node; the verdict (cut 6) covers 3 nodes");
    req.dir = (fx.c / "node-1").string();
    req.verdict = (fx.d.path / "none.json").string();
    CHECK(Contains(Refusal(req), "none.json"));
    fs::create_directories(fx.d.path / "dir.json");
    req.verdict = (fx.d.path / "dir.json").string();
    CHECK(Contains(Refusal(req, ErrorCode::kIo), "dir.json"));
  }
  SECTION("--base without one node is refused") {
    req.dir = fx.c.string();
    req.base = "full-1500";
    CHECK(Refusal(req) == "--base goes with --verdict (one node's check)");
  }
}

TEST_CASE("check merge: reports of one check, node by node, joined in node order") {
  std::vector<CheckReport> reports = {NodeReport(2), NodeReport(0), NodeReport(1)};
  reports[1].errors.push_back("node 0: disk on fire");
  reports[2].files.state_used = true;
  auto m = MergeCheckReports(reports, {"r2", "r0", "r1"});
  REQUIRE(m.ok());
  CHECK(m->dir == "c/node-0, c/node-1, c/node-2");
  CHECK(m->files.nodes == 3);
  CHECK(m->files.segments == 2 + 3 + 4);
  CHECK(m->files.records == 300);
  CHECK(m->files.state_used);
  CHECK_FALSE(m->files.state_written);
  CHECK(m->errors == std::vector<std::string>{"node 0: disk on fire"});
  REQUIRE(m->items.size() == 3);
  CHECK(m->items[0].group == "node-0");
  CHECK(m->items[2].group == "node-2");
  CHECK(m->level == CheckLevel::kFiles);

  // Level restore: the highest level, files items first, then the cuts items node by node.
  auto v = MergeCheckReports({NodeReport(1, 6, "00000000000000aa"), NodeReport(0, 6, "00000000000000aa")}, {"a", "b"});
  REQUIRE(v.ok());
  CHECK(v->level == CheckLevel::kRestore);
  CHECK(v->selected_cut == std::optional<uint64_t>(6));
  REQUIRE(v->items.size() == 4);
  CHECK(v->items[1].group == "node-1");
  CHECK(v->items[2].name == "node 0: verdict");
}

TEST_CASE("check merge refuses reports that are not of one check, naming them") {
  auto refusal = [](std::vector<CheckReport> r, const std::vector<std::string>& origins) {
    auto m = MergeCheckReports(std::move(r), origins);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == ErrorCode::kInvalidArgument);
    return m.status().message();
  };
  CHECK(refusal({}, {}) == "no reports to merge");
  CHECK(refusal({NodeReport(0), NodeReport(0)}, {"a", "b"}) == "node 0 appears twice: in a and in b");
  CheckReport two = NodeReport(0);
  two.items.push_back(Item(CheckLevel::kFiles, "node-1", "segment"));
  CHECK(refusal({NodeReport(1), two}, {"a", "b"}) ==
        "b: not a report of one node (walcut check NODE_DIR ... --format json)");
  CheckReport none = NodeReport(0);
  none.items.front().group = "cluster";
  CHECK(Contains(refusal({none}, {"a"}), "a: not a report of one node"));
  CHECK(refusal({NodeReport(0, 5), NodeReport(1, 6)}, {"a", "b"}) ==
        "a checked cut 5, b checked cut 6: the reports are not of one check");
  CHECK(refusal({NodeReport(0), NodeReport(1, 6)}, {"a", "b"}) ==
        "a checked no cut, b checked cut 6: the reports are not of one check");
  CHECK(refusal({NodeReport(0, 6, "00000000000000aa"), NodeReport(1, 6, "00000000000000bb")}, {"a", "b"}) ==
        "a and b are not of one verdict: 00000000000000aa against 00000000000000bb");
}

TEST_CASE("ReportNode: the one node of a report's files items") {
  CHECK(ReportNode(NodeReport(4)) == std::optional<uint32_t>(4));
  CheckReport r = NodeReport(4);
  r.items.push_back(Item(CheckLevel::kCuts, "cut-1", "node 5: verdict"));  // other levels do not count
  CHECK(ReportNode(r) == std::optional<uint32_t>(4));
  r.items.push_back(Item(CheckLevel::kFiles, "node-5", "segment"));
  CHECK_FALSE(ReportNode(r));
  CHECK_FALSE(ReportNode(CheckReport{}));
}

TEST_CASE("check merge reads a report back: refusals name the report, a missing one is not found") {
  walcut::test::ScratchDir d("checkmerge-read");
  fs::create_directories(d.path);
  auto read = [&](const std::string& name, const std::string& text) {
    WriteText(d.path / name, text);
    return walcut::recovery::ReadCheckReport((d.path / name).string());
  };
  auto missing = walcut::recovery::ReadCheckReport((d.path / "none.json").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  fs::create_directories(d.path / "dir.json");
  auto dir = walcut::recovery::ReadCheckReport((d.path / "dir.json").string());
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().code() == ErrorCode::kIo);
  for (const auto& [name, text, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"garbage.json", "garbage", "not JSON"},
           {"array.json", "[1]", "not JSON"},
           {"schema.json", R"({"schema": "walcut.check/2"})", "not a walcut check report"},
           {"cuts.json",
            R"({"schema": "walcut.check/1", "dir": "c", "level": "cuts", "cut": null, "files": {"nodes": 3,
              "segments": 1, "segments_read": 1, "segments_skipped": 0, "bytes_read": 1, "bytes_skipped": 0,
              "records": 1, "torn_tails": 0, "state_used": false, "state_written": false}, "cuts": {"total": 1}})",
            "report of the cuts level of a whole cluster"},
           {"level.json", R"({"schema": "walcut.check/1", "dir": "c", "level": "all"})", "is not a level"},
       }) {
    auto r = read(name, text);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(Contains(r.status().message(), name));
    CHECK(Contains(r.status().message(), says));
  }
}
