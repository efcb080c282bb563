// The space-time diagram of one cut (see cut/svg.h for what it shows).
//
// Built in two passes: first the model (which rows, which transactions, the
// time window), then the document, whose height is known only at the end; the
// body is written to a string and the root element is put in front of it.
// Every number goes through one formatter with one decimal, and every
// collection is walked in a fixed order (node id, TxId), so the bytes depend
// only on the input.
#include "cut/svg.h"

#include "walfmt/duration.h"
#include "walfmt/text_escape.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace walcut::cut {
namespace {

// Colours: one per transaction class, and the marks.
constexpr const char* kColorBefore = "#1f77b4";
constexpr const char* kColorAfter = "#ff7f0e";
constexpr const char* kColorUnresolved = "#8c8c8c";
constexpr const char* kColorDisagree = "#d62728";
constexpr const char* kColorCut = "#6a1b9a";
constexpr const char* kColorFinish = "#2e7d32";
constexpr const char* kColorAbort = "#c62828";
constexpr const char* kColorNode = "#444444";

enum class TxClass : uint8_t { kBefore = 0, kAfter = 1, kUnresolved = 2, kDisagree = 3 };

const char* ClassName(TxClass c) {
  switch (c) {
    case TxClass::kBefore:
      return "before";
    case TxClass::kAfter:
      return "after";
    case TxClass::kUnresolved:
      return "unresolved";
    case TxClass::kDisagree:
      return "disagree";
  }
  return "unresolved";
}

const char* ClassColor(TxClass c) {
  switch (c) {
    case TxClass::kBefore:
      return kColorBefore;
    case TxClass::kAfter:
      return kColorAfter;
    case TxClass::kUnresolved:
      return kColorUnresolved;
    case TxClass::kDisagree:
      return kColorDisagree;
  }
  return kColorUnresolved;
}

const char* ClassText(TxClass c) {
  switch (c) {
    case TxClass::kBefore:
      return "before (in the cut)";
    case TxClass::kAfter:
      return "after (not in the cut)";
    case TxClass::kUnresolved:
      return "tracked, unresolved or rolled back";
    case TxClass::kDisagree:
      return "before on one node, after on another";
  }
  return "";
}

// One place where a tracked transaction is known on one node.
struct Point {
  uint32_t node = 0;
  bool timed = false;  // committed or rolled back here: time_us is its record's time
  uint64_t time_us = 0;
  bool before = false;  // in before(K) here (else after(K))
  bool rule5 = false;   // committed on the other side of CUT_START than its set says
  bool rolled_back = false;
  bool recovered = false;
};

struct TxDraw {
  std::vector<Point> points;
  bool any_before = false;
  bool any_after = false;
  bool unresolved = false;  // not committed (or rolled back) on some node
  bool rule5 = false;
  bool selected = false;
  uint64_t first_time_us = std::numeric_limits<uint64_t>::max();
  TxClass cls = TxClass::kBefore;
};

// Row of the picture: a node, or the "... N nodes omitted" line.
struct Row {
  bool omitted = false;
  uint32_t node = 0;          // when !omitted
  uint32_t omitted_from = 0;  // when omitted: nodes omitted_from..omitted_to
  uint32_t omitted_to = 0;
};

std::string F(double v) {
  if (std::fabs(v) < 0.05) v = 0;  // never "-0.0"
  return fmt::format("{:.1f}", v);
}

// A record time as every command prints it: ISO 8601 UTC through the
// cluster's epoch, an offset from its creation without one.
std::string When(const ClusterCuts& cc, uint64_t us) { return walfmt::ClusterClock{cc.epoch_unix_us}.Format(us); }

// Cuts at a character boundary, adding "..." when it had to cut.
std::string Shorten(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes > 3 ? max_bytes - 3 : 0;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

// A tick step of 1, 2 or 5 times a power of ten, giving at most ~max_ticks ticks.
uint64_t NiceStep(uint64_t span, uint64_t max_ticks) {
  const uint64_t raw = std::max<uint64_t>(1, span / std::max<uint64_t>(1, max_ticks));
  for (uint64_t p = 1;; p *= 10) {
    for (uint64_t m : {1, 2, 5}) {
      if (m * p >= raw) return m * p;
    }
    if (p > std::numeric_limits<uint64_t>::max() / 100) return p;
  }
}

class Svg {
 public:
  void Open(const std::string& tag, const std::string& attrs) { out_ += fmt::format("<{} {}>\n", tag, attrs); }
  void Close(const std::string& tag) { out_ += fmt::format("</{}>\n", tag); }
  void Empty(const std::string& tag, const std::string& attrs) { out_ += fmt::format("<{} {}/>\n", tag, attrs); }
  void Text(double x, double y, const std::string& text, const std::string& attrs) {
    out_ += fmt::format("<text x=\"{}\" y=\"{}\" {}>{}</text>\n", F(x), F(y), attrs, XmlEscape(text));
  }
  void Title(const std::string& text) { out_ += fmt::format("<title>{}</title>\n", XmlEscape(text)); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// ---- The model: what the picture shows, before any coordinate.

struct Model {
  const ClusterCuts* cc = nullptr;
  const GlobalCut* g = nullptr;
  uint64_t cut_id = 0;
  uint32_t n_nodes = 0;
  // Rows: every node, or the head and the tail of a large cluster.
  std::vector<Row> rows;
  std::vector<int> row_of;  // node -> row, -1 when omitted
  uint32_t head = 0, tail = 0;
  uint32_t omitted_nodes = 0;
  // Tracked transactions, by id, from every node.
  std::map<walfmt::TxId, TxDraw> txs;
  uint64_t cut_ref_us = 0;  // the earliest CUT_START
  uint64_t total_txs = 0;
  uint64_t drawn_txs = 0;
  // By node: the NODE_START of a later incarnation during the cut.
  std::vector<std::vector<const StartMark*>> restarts;
  // The time window.
  uint64_t t0 = 0, t1 = 0;
  uint64_t untimed_us = 0;  // where a tracked transaction that never finished is drawn
  bool any_untimed = false;

  const NodeCut* node_cut(uint32_t i) const { return i < g->nodes.size() ? g->nodes[i] : nullptr; }
};

void PlanRows(Model& m, const SvgOptions& opt) {
  const uint32_t n_nodes = m.n_nodes;
  m.row_of.assign(n_nodes, -1);
  const uint32_t head = opt.head_nodes, tail = opt.tail_nodes;
  m.head = head;
  m.tail = tail;
  const bool summarize = n_nodes > opt.max_nodes && head + tail < n_nodes && head + tail > 0;
  for (uint32_t i = 0; i < n_nodes; ++i) {
    if (summarize && i == head) m.rows.push_back(Row{true, 0, head, n_nodes - tail - 1});
    if (summarize && i >= head && i < n_nodes - tail) continue;
    m.row_of[i] = static_cast<int>(m.rows.size());
    m.rows.push_back(Row{false, i, 0, 0});
  }
  m.omitted_nodes = summarize ? n_nodes - head - tail : 0;
}

// Every node's before and after sets, by transaction (the class needs all of
// them), with each transaction's points in time order.
void CollectTracked(Model& m) {
  uint64_t cut_ref_us = std::numeric_limits<uint64_t>::max();
  for (uint32_t i = 0; i < m.n_nodes; ++i) {
    const NodeCut* nc = m.node_cut(i);
    if (!nc) continue;
    if (nc->started) cut_ref_us = std::min(cut_ref_us, nc->start_time_us);
    for (int side = 0; side < 2; ++side) {
      const bool before = side == 0;
      for (const TrackedTx& t : before ? nc->before : nc->after) {
        TxDraw& d = m.txs[t.tx];
        Point p;
        p.node = i;
        p.timed = t.committed || t.rolled_back;
        p.time_us = t.time_us;
        p.before = before;
        p.rolled_back = t.rolled_back;
        p.recovered = t.recovered;
        p.rule5 = t.committed && nc->started && (before ? t.commit > nc->start : t.commit < nc->start);
        d.points.push_back(p);
        (before ? d.any_before : d.any_after) = true;
        d.unresolved |= !t.committed;
        d.rule5 |= p.rule5;
        if (p.timed) d.first_time_us = std::min(d.first_time_us, p.time_us);
      }
    }
  }
  if (cut_ref_us == std::numeric_limits<uint64_t>::max()) cut_ref_us = m.g->start_time_us;
  m.cut_ref_us = cut_ref_us;
  for (auto& [id, d] : m.txs) {
    d.cls = d.any_before && d.any_after ? TxClass::kDisagree
            : d.unresolved              ? TxClass::kUnresolved
            : d.any_before              ? TxClass::kBefore
                                        : TxClass::kAfter;
    // Timed points in time order (node id breaks ties), then the untimed ones.
    std::sort(d.points.begin(), d.points.end(), [](const Point& a, const Point& b) {
      if (a.timed != b.timed) return a.timed;
      return std::tie(a.time_us, a.node, a.before) < std::tie(b.time_us, b.node, b.before);
    });
  }
}

// Which transactions to draw: all, or the most telling max_transactions.
void SelectTransactions(Model& m, const SvgOptions& opt) {
  m.total_txs = m.txs.size();
  if (m.total_txs <= opt.max_transactions) {
    for (auto& [id, d] : m.txs) d.selected = true;
  } else {
    using Key = std::tuple<int, uint64_t, walfmt::TxId>;
    std::vector<std::pair<Key, TxDraw*>> ranked;
    ranked.reserve(m.txs.size());
    for (auto& [id, d] : m.txs) {
      const int prio = d.cls == TxClass::kDisagree ? 0 : d.rule5 ? 1 : d.cls == TxClass::kUnresolved ? 2 : 3;
      const uint64_t dist = d.first_time_us == std::numeric_limits<uint64_t>::max() ? d.first_time_us
                            : d.first_time_us > m.cut_ref_us                        ? d.first_time_us - m.cut_ref_us
                                                                                    : m.cut_ref_us - d.first_time_us;
      ranked.push_back({Key{prio, dist, id}, &d});
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t r = 0; r < ranked.size() && r < opt.max_transactions; ++r) ranked[r].second->selected = true;
  }
  m.drawn_txs = 0;
  for (const auto& [id, d] : m.txs) m.drawn_txs += d.selected ? 1 : 0;
}

// Restart marks: a NODE_START of a later incarnation during the cut.
void FindRestarts(Model& m) {
  m.restarts.assign(m.n_nodes, {});
  for (uint32_t i = 0; i < m.n_nodes && i < m.cc->nodes.size(); ++i) {
    const NodeCut* nc = m.node_cut(i);
    if (!nc || !nc->restarted) continue;
    for (const StartMark& s : m.cc->nodes[i].starts) {
      if (s.incarnation > 0 && (!nc->started || s.time_us >= nc->start_time_us)) {
        m.restarts[i].push_back(&s);
        break;
      }
    }
  }
}

// The time window: every mark and drawn commit point on a drawn node, padded.
void TimeWindow(Model& m) {
  uint64_t tmin = std::numeric_limits<uint64_t>::max(), tmax = 0;
  const auto see = [&](uint64_t t) {
    tmin = std::min(tmin, t);
    tmax = std::max(tmax, t);
  };
  for (const Row& r : m.rows) {
    if (r.omitted) continue;
    const NodeCut* nc = m.node_cut(r.node);
    if (!nc) continue;
    if (nc->started) see(nc->start_time_us);
    if (nc->finished) see(nc->finish_time_us);
    for (const auto& a : nc->aborts) see(a.time_us);
    for (const StartMark* s : m.restarts[r.node]) see(s->time_us);
  }
  for (const auto& [id, d] : m.txs) {
    if (!d.selected) continue;
    for (const Point& p : d.points) {
      if (m.row_of[p.node] < 0) continue;
      if (p.timed) {
        see(p.time_us);
      } else {
        m.any_untimed = true;
      }
    }
  }
  if (tmin > tmax) tmin = tmax = 0;
  const uint64_t span = std::max<uint64_t>(tmax - tmin, 100);
  const uint64_t pad = span / 20 + 10;
  m.untimed_us = tmax + pad / 2;
  m.t0 = tmin > pad ? tmin - pad : 0;
  m.t1 = tmax + pad;
}

Model BuildModel(const ClusterCuts& cc, const GlobalCut& g, uint64_t cut_id, const SvgOptions& opt) {
  Model m;
  m.cc = &cc;
  m.g = &g;
  m.cut_id = cut_id;
  m.n_nodes = static_cast<uint32_t>(g.nodes.size());
  PlanRows(m, opt);
  CollectTracked(m);
  SelectTransactions(m, opt);
  FindRestarts(m);
  TimeWindow(m);
  return m;
}

// The footnotes: what was left out, each CUT_ABORT's detail, the nodes that
// did not finish the cut, and how transactions are placed.
std::vector<std::string> Footnotes(const Model& m) {
  std::vector<std::string> notes;
  if (m.drawn_txs < m.total_txs) {
    notes.push_back(
        fmt::format("{} of {} tracked transactions drawn, {} omitted (drawn first: before on one node and "
                    "after on another, then rule-5 cases, then unresolved, then those closest to the cut)",
                    m.drawn_txs, m.total_txs, m.total_txs - m.drawn_txs));
  }
  if (m.omitted_nodes > 0) {
    notes.push_back(fmt::format("{} of {} nodes omitted (nodes {} to {}); commit points on them are not drawn",
                                m.omitted_nodes, m.n_nodes, m.head, m.n_nodes - m.tail - 1));
  }
  if (m.any_untimed) {
    notes.push_back("a hollow circle at the right end of a node: tracked there, but no TX_COMMIT or TX_ROLLBACK found");
  }
  // Each CUT_ABORT with its detail, numbered as on the lines (at most 8).
  {
    constexpr uint64_t kMaxAbortNotes = 8;
    uint64_t no = 0;
    for (const Row& r : m.rows) {
      const NodeCut* nc = r.omitted ? nullptr : m.node_cut(r.node);
      if (!nc) continue;
      for (const CutAbortMark& a : nc->aborts) {
        if (++no > kMaxAbortNotes) continue;
        notes.push_back(fmt::format("CUT_ABORT #{}: node {} at {} ({}): {}{}{}", no, r.node, When(*m.cc, a.time_us),
                                    a.at.ToString(), walfmt::CutAbortReasonName(a.reason), a.detail.empty() ? "" : ": ",
                                    a.detail));
      }
    }
    if (no > kMaxAbortNotes) notes.push_back(fmt::format("... and {} more CUT_ABORT records", no - kMaxAbortNotes));
  }
  std::string unfinished;
  uint32_t unfinished_n = 0;
  for (uint32_t i = 0; i < m.n_nodes; ++i) {
    const NodeCut* nc = m.node_cut(i);
    if (nc && nc->finished) continue;
    if (++unfinished_n <= 10) unfinished += fmt::format("{}{}", unfinished.empty() ? "" : ", ", i);
  }
  if (unfinished_n > 0) {
    notes.push_back(
        fmt::format("no CUT_FINISH({}) on {} {}{}: the transactions tracked there (its before and after "
                    "sets) are unknown and not drawn",
                    m.cut_id, unfinished_n == 1 ? "node" : "nodes", unfinished,
                    unfinished_n > 10 ? fmt::format(" and {} more", unfinished_n - 10) : ""));
  }
  notes.push_back(
      "a transaction is drawn on the nodes where it is tracked (in before(K) or after(K)), at the time of "
      "its commit record there");
  return notes;
}

// ---- The layout: coordinates from the model.

constexpr int kLegendItems = 10;

struct Layout {
  double width = 0;
  double plot_x0 = 150, plot_x1 = 0;
  double row_h = 52, rows_y0 = 124;
  uint64_t t0 = 0, t1 = 0;
  double axis_y = 0;
  int legend_cols = 1;
  double legend_y0 = 0;
  double notes_y0 = 0;
  double height = 0;

  double X(uint64_t t) const {
    return plot_x0 + (plot_x1 - plot_x0) * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
  }
  double Y(int row) const { return rows_y0 + row_h * row; }
};

Layout MakeLayout(const Model& m, const SvgOptions& opt, size_t notes) {
  Layout l;
  l.width = std::clamp<uint32_t>(opt.width_px, 480, 8000);
  l.plot_x1 = l.width - 40;
  l.t0 = m.t0;
  l.t1 = m.t1;
  l.axis_y = l.Y(static_cast<int>(m.rows.size()) - 1) + 40;
  l.legend_cols = std::max(1, static_cast<int>((l.width - 40) / 290));
  const int legend_rows = (kLegendItems + l.legend_cols - 1) / l.legend_cols;
  l.legend_y0 = l.axis_y + 58;
  l.notes_y0 = l.legend_y0 + legend_rows * 22 + 16;
  l.height = l.notes_y0 + 16.0 * static_cast<double>(notes) + 8;
  return l;
}

// ---- The document, part by part, in drawing order.

// The XML declaration, the root element, the arrow markers, the background,
// the title and the three lines under it.
void DrawHeader(Svg& s, const Model& m, const Layout& l) {
  const GlobalCut* g = m.g;
  const double width = l.width;
  s.str() += "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
  s.Open("svg", fmt::format("xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
                            "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Verdana, sans-serif\" font-size=\"11\"",
                            F(width), F(l.height)));
  s.Title(fmt::format("walcut: cut {}, {}", m.cut_id, CutStatusName(g->status)));
  s.Open("defs", "");
  for (TxClass c : {TxClass::kBefore, TxClass::kAfter, TxClass::kUnresolved, TxClass::kDisagree}) {
    s.Open("marker", fmt::format("id=\"arrow-{}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" "
                                 "markerHeight=\"6\" orient=\"auto\"",
                                 ClassName(c)));
    s.Empty("path", fmt::format("d=\"M0,0 L10,5 L0,10 z\" fill=\"{}\"", ClassColor(c)));
    s.Close("marker");
  }
  s.Close("defs");
  s.Empty("rect", fmt::format("x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"", F(width), F(l.height)));

  const size_t max_chars = static_cast<size_t>((width - 20) / 6.5);
  s.Text(10, 26, fmt::format("cut {}: {}", m.cut_id, CutStatusName(g->status)),
         "class=\"title\" font-size=\"16\" font-weight=\"bold\"");
  s.Text(10, 46,
         Shorten(g->reason.empty() ? "CUT_START and CUT_FINISH on every node, no abort, no restart, checks 1-5 pass"
                                   : "reason: " + g->reason,
                 max_chars),
         "class=\"reason\"");
  s.Text(10, 64,
         Shorten(fmt::format("{} nodes; {} transactions in the cut; {} tracked (before {} / after {} summed over "
                             "nodes); rule 5: {} before committed after CUT_START, {} after committed before it",
                             m.n_nodes, g->transactions, m.total_txs, g->before, g->after, g->before_after_start,
                             g->after_before_start),
                 max_chars),
         "class=\"summary\"");
  s.Text(10, 82, fmt::format("from {} to {}", When(*m.cc, l.t0), When(*m.cc, l.t1)),
         "class=\"window\" fill=\"#555555\"");
}

// Node lines and their labels; the omitted row.
void DrawNodeLines(Svg& s, const Model& m, const Layout& l) {
  s.Open("g", "class=\"nodes\"");
  for (size_t r = 0; r < m.rows.size(); ++r) {
    const double y = l.Y(static_cast<int>(r));
    if (m.rows[r].omitted) {
      s.Empty("line", fmt::format("x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#bbbbbb\" stroke-width=\"1\" "
                                  "stroke-dasharray=\"1,6\"",
                                  F(l.plot_x0), F(y), F(l.plot_x1), F(y)));
      s.Text((l.plot_x0 + l.plot_x1) / 2, y + 4,
             fmt::format("... {} nodes omitted (nodes {} to {})", m.omitted_nodes, m.rows[r].omitted_from,
                         m.rows[r].omitted_to),
             "class=\"omitted\" text-anchor=\"middle\" font-style=\"italic\" fill=\"#555555\"");
      continue;
    }
    const uint32_t i = m.rows[r].node;
    const NodeCut* nc = m.node_cut(i);
    s.Text(10, y - 2, fmt::format("node {}", i), "font-size=\"13\" font-weight=\"bold\"");
    s.Text(10, y + 13, nc ? CutEndName(nc->end) : "no record of this cut", "font-size=\"10\" fill=\"#555555\"");
    s.Empty("line", fmt::format("class=\"node-line\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
                                "stroke-width=\"1.5\"{}",
                                F(l.plot_x0), F(y), F(l.plot_x1), F(y), nc ? kColorNode : "#aaaaaa",
                                nc ? "" : " stroke-dasharray=\"2,4\""));
  }
  s.Close("g");
}

// The cut line through the CUT_START points, labelled at its first point.
void DrawCutLine(Svg& s, const Model& m, const Layout& l) {
  std::string cut_points;
  double first_x = 0, first_y = 0;
  for (size_t r = 0; r < m.rows.size(); ++r) {
    if (m.rows[r].omitted) continue;
    const NodeCut* nc = m.node_cut(m.rows[r].node);
    if (!nc || !nc->started) continue;
    const double x = l.X(nc->start_time_us), y = l.Y(static_cast<int>(r));
    if (cut_points.empty()) {
      first_x = x;
      first_y = y;
    }
    cut_points += (cut_points.empty() ? "" : " ") + F(x) + "," + F(y);
  }
  if (!cut_points.empty()) {
    s.Empty("polyline", fmt::format("class=\"cut-line\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
                                    "stroke-width=\"2\" stroke-dasharray=\"6,3\" stroke-opacity=\"0.8\"",
                                    cut_points, kColorCut));
    s.Text(first_x, first_y - 32, fmt::format("cut {}", m.cut_id),
           fmt::format("class=\"cut-label\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"{}\"", kColorCut));
  }
}

// One drawn transaction: its tooltip, arrows between consecutive commit
// points, then the points.
void DrawTransaction(Svg& s, const Model& m, const Layout& l, const walfmt::TxId& id, const TxDraw& d) {
  const char* color = ClassColor(d.cls);
  s.Open("g", fmt::format("class=\"tx {}\"", ClassName(d.cls)));
  std::string where;
  for (const Point& p : d.points) {
    where += fmt::format("; node {} {} {}{}{}", p.node, p.before ? "before" : "after",
                         p.timed ? (p.rolled_back ? "rolled back at " : "committed at ") + When(*m.cc, p.time_us)
                                 : std::string("never finished"),
                         p.rule5 ? " (rule 5)" : "", p.recovered ? " (recovered)" : "");
  }
  s.Title(fmt::format("transaction {}: {}{}", id.ToString(), ClassText(d.cls), where));
  const char* dash = d.cls == TxClass::kUnresolved ? " stroke-dasharray=\"4,3\"" : "";
  const Point* prev = nullptr;
  for (const Point& p : d.points) {
    if (!p.timed || m.row_of[p.node] < 0) continue;
    if (prev) {
      const double x1 = l.X(prev->time_us), y1 = l.Y(m.row_of[prev->node]);
      const double x2 = l.X(p.time_us), y2 = l.Y(m.row_of[p.node]);
      const double len = std::hypot(x2 - x1, y2 - y1);
      if (len >= 1) {
        // The tip stops at the edge of the target's dot.
        const double k = len > 8 ? (len - 3.5) / len : 1;
        s.Empty("line", fmt::format("class=\"arrow\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
                                    "stroke-width=\"1.3\"{}{}",
                                    F(x1), F(y1), F(x1 + (x2 - x1) * k), F(y1 + (y2 - y1) * k), color, dash,
                                    len > 8 ? fmt::format(" marker-end=\"url(#arrow-{})\"", ClassName(d.cls)) : ""));
      }
    }
    prev = &p;
  }
  for (const Point& p : d.points) {
    if (m.row_of[p.node] < 0) continue;
    const double x = l.X(p.timed ? p.time_us : m.untimed_us), y = l.Y(m.row_of[p.node]);
    if (!p.timed) {
      s.Empty("circle", fmt::format("class=\"point untimed\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"#ffffff\" "
                                    "stroke=\"{}\" stroke-width=\"1.5\"",
                                    F(x), F(y), color));
      continue;
    }
    s.Empty("circle",
            fmt::format("class=\"point{}\" cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"{}", p.rule5 ? " rule5" : "", F(x),
                        F(y), color, p.rule5 ? " stroke=\"#000000\" stroke-width=\"1.5\"" : ""));
  }
  s.Close("g");
}

void DrawTransactions(Svg& s, const Model& m, const Layout& l) {
  s.Open("g", "class=\"transactions\"");
  for (const auto& [id, d] : m.txs) {
    if (d.selected) DrawTransaction(s, m, l, id, d);
  }
  s.Close("g");
}

// Marks on each node: CUT_START, CUT_FINISH, CUT_ABORT, restart. A label
// right of its mark, or left of it when it would leave the picture (9 px text
// is about 5.5 px a character).
void DrawMarks(Svg& s, const Model& m, const Layout& l) {
  const double width = l.width;
  const auto label_fits_right = [&](double x, const std::string& text) {
    return x + 9 + 5.5 * static_cast<double>(text.size()) <= width - 4;
  };
  const auto LabelX = [&](double x, const std::string& text) { return label_fits_right(x, text) ? x + 9 : x - 9; };
  const auto LabelAnchor = [&](double x, const std::string& text) {
    return std::string(label_fits_right(x, text) ? "text-anchor=\"start\"" : "text-anchor=\"end\"");
  };
  uint64_t abort_no = 0;  // numbered in row order, as in the footnotes
  s.Open("g", "class=\"marks\"");
  for (size_t r = 0; r < m.rows.size(); ++r) {
    if (m.rows[r].omitted) continue;
    const uint32_t i = m.rows[r].node;
    const NodeCut* nc = m.node_cut(i);
    if (!nc) continue;
    const double y = l.Y(static_cast<int>(r));
    if (nc->started) {
      const double x = l.X(nc->start_time_us);
      s.Empty("line", fmt::format("class=\"cut-start\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" "
                                  "stroke-width=\"3\"",
                                  F(x), F(y - 12), F(y + 12), kColorCut));
      s.Text(x, y - 15, "CUT_START", fmt::format("text-anchor=\"middle\" font-size=\"9\" fill=\"{}\"", kColorCut));
    }
    if (nc->finished) {
      const double x = l.X(nc->finish_time_us);
      s.Empty("rect", fmt::format("class=\"cut-finish\" x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" "
                                  "fill=\"#ffffff\" stroke=\"{}\" stroke-width=\"2\"",
                                  F(x - 5), F(y - 5), kColorFinish));
      s.Text(x, y + 20, "CUT_FINISH", fmt::format("text-anchor=\"middle\" font-size=\"9\" fill=\"{}\"", kColorFinish));
    }
    for (size_t k = 0; k < nc->aborts.size(); ++k) {
      const CutAbortMark& a = nc->aborts[k];
      const double x = l.X(a.time_us);
      ++abort_no;
      s.Empty("path",
              fmt::format("class=\"cut-abort\" d=\"M{},{} L{},{} M{},{} L{},{}\" stroke=\"{}\" "
                          "stroke-width=\"2.5\" fill=\"none\"",
                          F(x - 6), F(y - 6), F(x + 6), F(y + 6), F(x - 6), F(y + 6), F(x + 6), F(y - 6), kColorAbort));
      // Short on the line (alternately above and below, so that two aborts
      // close together stay legible); the detail goes to a footnote.
      const std::string label = fmt::format("CUT_ABORT #{}: {}", abort_no, walfmt::CutAbortReasonName(a.reason));
      s.Text(LabelX(x, label), k % 2 == 0 ? y - 8 : y + 17, label,
             fmt::format("{} font-size=\"9\" fill=\"{}\"", LabelAnchor(x, label), kColorAbort));
    }
    for (const StartMark* st : m.restarts[i]) {
      if (st->time_us < l.t0 || st->time_us > l.t1) continue;
      const double x = l.X(st->time_us);
      s.Empty("polygon", fmt::format("class=\"restart\" points=\"{},{} {},{} {},{} {},{}\" fill=\"#000000\"", F(x),
                                     F(y - 7), F(x + 7), F(y), F(x), F(y + 7), F(x - 7), F(y)));
      const std::string label = fmt::format("restart (incarnation {})", st->incarnation);
      s.Text(LabelX(x, label), y + 17, label, LabelAnchor(x, label) + " font-size=\"9\"");
    }
  }
  s.Close("g");
}

// The time axis in milliseconds, ticks at a 1-2-5 step.
void DrawAxis(Svg& s, const Layout& l) {
  const double axis_y = l.axis_y;
  s.Open("g", "class=\"axis\"");
  s.Empty("line", fmt::format("x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#000000\" stroke-width=\"1\"",
                              F(l.plot_x0), F(axis_y), F(l.plot_x1), F(axis_y)));
  const uint64_t step = NiceStep(l.t1 - l.t0, static_cast<uint64_t>(std::max(2.0, (l.plot_x1 - l.plot_x0) / 110)));
  const int decimals = step >= 1000 ? 0 : step >= 100 ? 1 : step >= 10 ? 2 : 3;
  // NiceStep bounds the ticks to about max_ticks; the counter also bounds the loop.
  for (uint64_t t = (l.t0 + step - 1) / step * step, n = 0; t <= l.t1 && n < 1000; t += step, ++n) {
    const double x = l.X(t);
    s.Empty("line", fmt::format("x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#000000\"", F(x), F(axis_y),
                                F(axis_y + 5)));
    const double ms = static_cast<double>(t) / 1000.0;
    s.Text(x, axis_y + 17, fmt::format("{:.{}f}", ms, decimals), "text-anchor=\"middle\" font-size=\"10\"");
  }
  s.Text(l.plot_x1, axis_y + 32, "cluster time (ms)", "text-anchor=\"end\" font-size=\"10\" fill=\"#555555\"");
  s.Close("g");
}

// One legend item's symbol at (x, y); returns its label.
std::string DrawLegendSymbol(Svg& s, int item, double x, double y) {
  const double sx = x + 14;
  if (item < 4) {
    const auto c = static_cast<TxClass>(item);
    s.Empty("line", fmt::format("x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.3\"{} "
                                "marker-end=\"url(#arrow-{})\"",
                                F(x), F(y), F(x + 26), F(y), ClassColor(c),
                                c == TxClass::kUnresolved ? " stroke-dasharray=\"4,3\"" : "", ClassName(c)));
    return ClassText(c);
  }
  if (item == 4) {
    s.Empty("circle", fmt::format("cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\" stroke=\"#000000\" stroke-width=\"1.5\"",
                                  F(sx), F(y), kColorBefore));
    return "rule 5: committed across CUT_START";
  }
  if (item == 5) {
    s.Empty("line", fmt::format("x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"3\"", F(sx),
                                F(y - 8), F(y + 8), kColorCut));
    return "CUT_START";
  }
  if (item == 6) {
    s.Empty("rect", fmt::format("x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"#ffffff\" stroke=\"{}\" "
                                "stroke-width=\"2\"",
                                F(sx - 5), F(y - 5), kColorFinish));
    return "CUT_FINISH";
  }
  if (item == 7) {
    s.Empty("path", fmt::format("d=\"M{},{} L{},{} M{},{} L{},{}\" stroke=\"{}\" stroke-width=\"2.5\"", F(sx - 6),
                                F(y - 6), F(sx + 6), F(y + 6), F(sx - 6), F(y + 6), F(sx + 6), F(y - 6), kColorAbort));
    return "CUT_ABORT";
  }
  if (item == 8) {
    s.Empty("polygon", fmt::format("points=\"{},{} {},{} {},{} {},{}\" fill=\"#000000\"", F(sx), F(y - 7), F(sx + 7),
                                   F(y), F(sx), F(y + 7), F(sx - 7), F(y)));
    return "node restart";
  }
  s.Empty("line", fmt::format("x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\" "
                              "stroke-dasharray=\"6,3\"",
                              F(x), F(y), F(x + 26), F(y), kColorCut));
  return "cut line (through CUT_START)";
}

// The legend: kLegendItems symbols with their labels, legend_cols per row.
void DrawLegend(Svg& s, const Layout& l) {
  s.Open("g", "class=\"legend\"");
  const double col_w = (l.width - 40) / l.legend_cols;
  for (int item = 0; item < kLegendItems; ++item) {
    const double x = 20 + col_w * (item % l.legend_cols);
    const double y = l.legend_y0 + 22.0 * (item / l.legend_cols);
    const double tx = x + 36;
    const std::string label = DrawLegendSymbol(s, item, x, y);
    s.Text(tx, y + 4, label, "");
  }
  s.Close("g");
}

void DrawFootnotes(Svg& s, const Layout& l, const std::vector<std::string>& notes) {
  s.Open("g", "class=\"notes\" font-size=\"10\" fill=\"#555555\"");
  for (size_t k = 0; k < notes.size(); ++k) {
    s.Text(10, l.notes_y0 + 16.0 * static_cast<double>(k), Shorten(notes[k], static_cast<size_t>((l.width - 20) / 5.6)),
           "class=\"note\"");
  }
  s.Close("g");
}

}  // namespace

std::string XmlEscape(std::string_view text) {
  const std::string clean = walfmt::EscapeBytes(text);  // valid UTF-8 XML 1.0 carries, losslessly
  std::string out;
  out.reserve(clean.size());
  for (const char c : clean) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderCutSvg(const ClusterCuts& cc, uint64_t cut_id, const SvgOptions& opt) {
  const GlobalCut* g = cc.Find(cut_id);
  if (!g) return {};
  const Model m = BuildModel(cc, *g, cut_id, opt);
  const std::vector<std::string> notes = Footnotes(m);
  const Layout l = MakeLayout(m, opt, notes.size());
  Svg s;
  DrawHeader(s, m, l);
  DrawNodeLines(s, m, l);
  DrawCutLine(s, m, l);
  DrawTransactions(s, m, l);
  DrawMarks(s, m, l);
  DrawAxis(s, l);
  DrawLegend(s, l);
  DrawFootnotes(s, l, notes);
  s.Close("svg");
  return std::move(s.str());
}

}  // namespace walcut::cut
