// The space-time diagram of a cut (cut/svg.h) on real simulated clusters: a
// well-formed SVG document with one line and the cut marks per node, the cut
// line, the legend and one arrow chain per tracked transaction; large clusters
// and many transactions summarized; a crash during a cut shows its abort and
// restart marks. Rendering to pixels is tested end to end in cli_svg_test.cpp.
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cut/cuts.h"
#include "cut/load.h"
#include "cut/scan.h"
#include "cut/svg.h"
#include "cut_support.h"
#include "node/cluster.h"

namespace fs = std::filesystem;
using walcut::cut::ClusterCuts;
using walcut::cut::CutStatus;
using walcut::cut::GlobalCut;
using walcut::cut::RenderCutSvg;
using walcut::cut::SvgOptions;

using TempDir = walcut::test::ScratchDir;
using walcut::test::LoadCuts;

namespace {

walcut::node::ClusterOptions Small(const std::string& dir, uint32_t nodes, uint64_t seed) {
  walcut::node::ClusterOptions o;
  o.dir = dir;
  o.seed = seed;
  o.nodes = nodes;
  o.backups = 1;
  o.txs = 600;
  o.cuts = 4;
  o.segment_bytes = 64 * 1024;
  return o;
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + needle.size())) ++n;
  return n;
}

// A small well-formedness check: the prolog, then elements properly nested,
// attribute values quoted, no '<' or stray '&' in text or attributes. Returns
// the first problem, or "" when the document is well-formed.
std::string XmlProblem(const std::string& doc) {
  size_t i = 0;
  if (doc.rfind("<?xml", 0) == 0) {
    i = doc.find("?>");
    if (i == std::string::npos) return "unterminated XML declaration";
    i += 2;
  }
  std::vector<std::string> open;
  bool root_seen = false;
  const auto check_text = [](const std::string& t) -> std::string {
    for (size_t k = 0; k < t.size(); ++k) {
      if (t[k] == '<') return "'<' in text";
      if (t[k] == '&') {
        const size_t semi = t.find(';', k);
        if (semi == std::string::npos) return "'&' without ';'";
        const std::string ent = t.substr(k, semi - k + 1);
        if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;") {
          return "unknown entity " + ent;
        }
      }
    }
    return "";
  };
  while (i < doc.size()) {
    const size_t lt = doc.find('<', i);
    const std::string text = doc.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (auto p = check_text(text); !p.empty()) return p + " at " + std::to_string(i);
    if (open.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos) return "text outside the root";
    if (lt == std::string::npos) break;
    const size_t gt = doc.find('>', lt);
    if (gt == std::string::npos) return "unterminated tag";
    std::string tag = doc.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (tag.rfind("!--", 0) == 0) continue;
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "unbalanced </" + name + ">";
      open.pop_back();
      continue;
    }
    const bool empty = !tag.empty() && tag.back() == '/';
    if (empty) tag.pop_back();
    const size_t name_end = tag.find_first_of(" \t\r\n");
    const std::string name = tag.substr(0, name_end);
    if (name.empty()) return "empty tag name";
    // Attributes: name="value" pairs.
    for (size_t k = name_end; k != std::string::npos && k < tag.size();) {
      k = tag.find_first_not_of(" \t\r\n", k);
      if (k == std::string::npos) break;
      const size_t eq = tag.find('=', k);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') return "bad attribute in <" + name;
      const size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return "unterminated attribute in <" + name;
      if (auto p = check_text(tag.substr(eq + 2, close - eq - 2)); !p.empty()) return p + " in <" + name;
      k = close + 1;
    }
    if (open.empty()) {
      if (root_seen) return "second root element <" + name + ">";
      root_seen = true;
    }
    if (!empty) open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (!root_seen) return "no root element";
  return "";
}

std::set<walcut::cut::TxId> Tracked(const GlobalCut& g) {
  std::set<walcut::cut::TxId> s;
  for (const auto* nc : g.nodes) {
    if (!nc) continue;
    for (const auto& t : nc->before) s.insert(t.tx);
    for (const auto& t : nc->after) s.insert(t.tx);
  }
  return s;
}

// The consistent cut with the most tracked transactions.
const GlobalCut* Busiest(const ClusterCuts& cc) {
  const GlobalCut* best = nullptr;
  for (const auto& g : cc.cuts) {
    if (g.status == CutStatus::kConsistent && (!best || Tracked(g).size() > Tracked(*best).size())) best = &g;
  }
  return best;
}

}  // namespace

TEST_CASE("the XML checker itself accepts and rejects") {
  CHECK(XmlProblem("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/><c>t &amp; u</c></a>\n").empty());
  CHECK_FALSE(XmlProblem("<a><b></a></b>").empty());
  CHECK_FALSE(XmlProblem("<a>x < y</a>").empty());
  CHECK_FALSE(XmlProblem("<a>x & y</a>").empty());
  CHECK_FALSE(XmlProblem("<a x=1/>").empty());
  CHECK_FALSE(XmlProblem("<a/><b/>").empty());
  CHECK_FALSE(XmlProblem("<a>").empty());
}

TEST_CASE("XmlEscape: markup characters, control characters and bytes that are not UTF-8") {
  using walcut::cut::XmlEscape;
  CHECK(XmlEscape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;");
  CHECK(XmlEscape(std::string("x\x01y\x7fz", 5)) == "x\\x01y\x7fz");  // DEL is an XML character
  CHECK(XmlEscape("tab\tnl\n") == "tab\tnl\n");
  CHECK(XmlEscape("caf\xc3\xa9 \xe2\x86\x92") == "caf\xc3\xa9 \xe2\x86\x92");  // é →
  CHECK(XmlEscape("\xff\xc3") == "\\xff\\xc3");                                // a bad byte, a cut-short sequence
  CHECK(XmlEscape("\xc0\xaf") == "\\xc0\\xaf");                                // overlong '/'
  CHECK(XmlEscape("\xed\xa0\x80") == "\\xed\\xa0\\x80");                       // a surrogate
  CHECK(XmlEscape("a\\b") == "a\\x5cb");  // the backslash, so that \xhh is unambiguous
}

TEST_CASE("a consistent cut: one line and the cut marks per node, the cut line, arrows per tracked transaction") {
  TempDir d("healthy");
  auto run = walcut::node::RunCluster(Small(d.path.string(), 3, 11));
  REQUIRE(run.ok());
  const ClusterCuts cc = LoadCuts(d.path.string());
  const GlobalCut* g = Busiest(cc);
  REQUIRE(g);
  const auto tracked = Tracked(*g);
  REQUIRE(!tracked.empty());
  REQUIRE(tracked.size() <= SvgOptions{}.max_transactions);

  const std::string svg = RenderCutSvg(cc, g->cut_id, {});
  INFO(svg.substr(0, 2000));
  CHECK(XmlProblem(svg).empty());
  CHECK(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"", 0) == 0);
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"1200.0\" height=\"") !=
        std::string::npos);
  CHECK(svg.find("viewBox=\"0 0 1200.0 ") != std::string::npos);
  CHECK(svg.find(fmt::format(">cut {}: consistent</text>", g->cut_id)) != std::string::npos);
  CHECK(Count(svg, "class=\"node-line\"") == 3);
  for (uint32_t i = 0; i < 3; ++i) CHECK(svg.find(fmt::format(">node {}</text>", i)) != std::string::npos);
  CHECK(Count(svg, "class=\"cut-start\"") == 3);
  CHECK(Count(svg, "class=\"cut-finish\"") == 3);
  CHECK(Count(svg, "class=\"cut-line\"") == 1);
  CHECK(Count(svg, "class=\"cut-abort\"") == 0);
  CHECK(Count(svg, "class=\"restart\"") == 0);
  CHECK(svg.find("omitted") == std::string::npos);
  // The legend names every class and mark.
  CHECK(svg.find("class=\"legend\"") != std::string::npos);
  for (const char* label : {"before (in the cut)", "after (not in the cut)", "tracked, unresolved or rolled back",
                            "before on one node, after on another", ">CUT_START<", ">CUT_FINISH<", ">CUT_ABORT<",
                            "node restart", "cut line (through CUT_START)"}) {
    INFO(label);
    CHECK(svg.find(label) != std::string::npos);
  }
  // One group per tracked transaction, named in its tooltip; a transaction
  // committed on k nodes at distinct times is a chain of k-1 arrows.
  CHECK(Count(svg, "<g class=\"tx ") == tracked.size());
  size_t want_arrows = 0;
  for (const auto& tx : tracked) {
    CHECK(svg.find(fmt::format("<title>transaction {}: ", tx.ToString())) != std::string::npos);
    std::set<uint64_t> times;
    for (const auto* nc : g->nodes) {
      for (const auto* set : {&nc->before, &nc->after}) {
        for (const auto& t : *set) {
          if (t.tx == tx && t.committed) times.insert(t.time_us);
        }
      }
    }
    want_arrows += times.empty() ? 0 : times.size() - 1;
  }
  CHECK(want_arrows > 0);
  CHECK(Count(svg, "class=\"arrow\"") >= want_arrows);
  CHECK(Count(svg, "marker-end=\"url(#arrow-before)\"") + Count(svg, "marker-end=\"url(#arrow-after)\"") > 4);
  CHECK(Count(svg, "<g class=\"tx disagree\"") == 0);

  // Deterministic: the same input, the same bytes, also from a second scan.
  CHECK(RenderCutSvg(cc, g->cut_id, {}) == svg);
  CHECK(RenderCutSvg(LoadCuts(d.path.string()), g->cut_id, {}) == svg);
  // No such cut: nothing.
  CHECK(RenderCutSvg(cc, 999999, {}).empty());
}

TEST_CASE("many transactions: at most max_transactions drawn, rule-5 cases first, a footnote counts the rest") {
  TempDir d("many");
  auto run = walcut::node::RunCluster(Small(d.path.string(), 3, 11));
  REQUIRE(run.ok());
  const ClusterCuts cc = LoadCuts(d.path.string());
  const GlobalCut* g = Busiest(cc);
  REQUIRE(g);
  const size_t total = Tracked(*g).size();
  REQUIRE(total > 4);
  // Transactions with a commit on the other side of CUT_START than their set.
  std::set<walcut::cut::TxId> rule5;
  for (const auto* nc : g->nodes) {
    for (const auto& t : nc->before) {
      if (t.committed && t.commit > nc->start) rule5.insert(t.tx);
    }
    for (const auto& t : nc->after) {
      if (t.committed && t.commit < nc->start) rule5.insert(t.tx);
    }
  }
  SvgOptions o;
  o.max_transactions = 4;
  const std::string svg = RenderCutSvg(cc, g->cut_id, o);
  CHECK(XmlProblem(svg).empty());
  CHECK(Count(svg, "<g class=\"tx ") == 4);
  CHECK(svg.find(fmt::format("4 of {} tracked transactions drawn, {} omitted", total, total - 4)) != std::string::npos);
  size_t drawn_rule5 = 0;
  for (const auto& tx : rule5) {
    drawn_rule5 += svg.find(fmt::format("<title>transaction {}: ", tx.ToString())) != std::string::npos ? 1 : 0;
  }
  CHECK(drawn_rule5 == std::min<size_t>(4, rule5.size()));
}

TEST_CASE("a 20-node cluster: the first 8 and the last 4 nodes, and a row for the 8 omitted") {
  TempDir d("wide");
  auto o = Small(d.path.string(), 20, 5);
  o.txs = 300;
  o.cuts = 2;
  auto run = walcut::node::RunCluster(o);
  REQUIRE(run.ok());
  const ClusterCuts cc = LoadCuts(d.path.string());
  REQUIRE(!cc.cuts.empty());
  const GlobalCut& g = cc.cuts.front();
  const std::string svg = RenderCutSvg(cc, g.cut_id, {});
  CHECK(XmlProblem(svg).empty());
  CHECK(Count(svg, "class=\"node-line\"") == 12);
  CHECK(Count(svg, "class=\"cut-start\"") == 12);
  CHECK(svg.find("... 8 nodes omitted (nodes 8 to 15)") != std::string::npos);
  CHECK(svg.find("8 of 20 nodes omitted") != std::string::npos);
  for (uint32_t i : {0u, 7u, 16u, 19u}) CHECK(svg.find(fmt::format(">node {}</text>", i)) != std::string::npos);
  for (uint32_t i : {8u, 12u, 15u}) CHECK(svg.find(fmt::format(">node {}</text>", i)) == std::string::npos);
  // Ten nodes need no summary.
  SvgOptions all;
  all.max_nodes = 20;
  const std::string full = RenderCutSvg(cc, g.cut_id, all);
  CHECK(Count(full, "class=\"node-line\"") == 20);
  CHECK(full.find("omitted (nodes") == std::string::npos);
}

TEST_CASE("a crash during a cut: that cut shows CUT_ABORT and the restart on the crashed node") {
  // The run is deterministic up to the crash, so a first run without a crash
  // tells when a cut is running on node 2.
  TempDir d0("probe");
  auto o = Small(d0.path.string(), 3, 21);
  o.txs = 1200;
  o.cuts = 6;
  auto probe = walcut::node::RunCluster(o);
  REQUIRE(probe.ok());
  const ClusterCuts clean = LoadCuts(d0.path.string());
  REQUIRE(clean.cuts.size() >= 3);
  const auto* nc = clean.cuts[2].nodes[2];
  REQUIRE(nc);
  REQUIRE(nc->finished);
  const uint64_t crash_at = nc->start_time_us + (nc->finish_time_us - nc->start_time_us) / 2;

  TempDir d("crash");
  o.dir = d.path.string();
  o.crashes = {walcut::node::CrashSpec{2, crash_at, 0}};
  auto run = walcut::node::RunCluster(o);
  REQUIRE(run.ok());
  REQUIRE(run->summary.crashes == 1);
  const ClusterCuts cc = LoadCuts(d.path.string());
  const GlobalCut* bad = nullptr;
  for (const auto& g : cc.cuts) {
    const auto* n2 = g.nodes.size() > 2 ? g.nodes[2] : nullptr;
    if (n2 && (!n2->aborts.empty() || n2->restarted)) bad = &g;
  }
  REQUIRE(bad);
  CHECK(bad->status != CutStatus::kConsistent);
  const std::string svg = RenderCutSvg(cc, bad->cut_id, {});
  INFO(svg);
  CHECK(XmlProblem(svg).empty());
  CHECK(svg.find(fmt::format(">cut {}: {}</text>", bad->cut_id, walcut::cut::CutStatusName(bad->status))) !=
        std::string::npos);
  CHECK(svg.find("reason: ") != std::string::npos);
  size_t aborts = 0;
  for (const auto* n : bad->nodes) aborts += n ? n->aborts.size() : 0;
  CHECK(aborts > 0);
  CHECK(Count(svg, "class=\"cut-abort\"") == aborts);
  CHECK(svg.find(">CUT_ABORT #1: ") != std::string::npos);
  bool unfinished = false;
  for (const auto* n : bad->nodes) unfinished |= !n || !n->finished;
  CHECK((svg.find(fmt::format("no CUT_FINISH({})", bad->cut_id)) != std::string::npos) == unfinished);
  if (bad->nodes[2]->restarted) {
    CHECK(Count(svg, "class=\"restart\"") == 1);
    CHECK(svg.find("restart (incarnation 1)") != std::string::npos);
  }
  CHECK(Count(svg, "class=\"node-line\"") == 3);
}
