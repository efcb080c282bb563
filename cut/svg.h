// The space-time diagram of one cut as an SVG 1.1 document (`walcut cut show
// DIR K --svg FILE`).
//
// Layout, top to bottom: a title (cut id, status, reason) and a subtitle
// (counts, the time window); one horizontal line per node, time running left
// to right on the cluster clock; a time axis; a legend; footnotes saying what
// was left out. On each node's line: CUT_START (a tall bar, labelled above),
// CUT_FINISH (a square, labelled below), CUT_ABORT (a cross with its reason)
// and the node's restart (a diamond). The cut line is a polyline through the
// CUT_START points of all nodes. Every tracked transaction (a member of
// before(K) or after(K) on some node) is a chain of arrows joining its commit
// points on the nodes where it is tracked, in time order, coloured by class:
// before (in the cut), after (not in the cut), unresolved or rolled back, and
// "sides disagree" (before on one node, after on another: check 1 fails).
// Commit points on the wrong side of CUT_START (rule 5: a before transaction
// committed after CUT_START, an after transaction committed before it) get a
// black ring.
//
// Large inputs are summarized, never unreadable: more than `max_nodes` nodes
// draw the first `head_nodes` and the last `tail_nodes` with a row "... N
// nodes omitted" between; more than `max_transactions` tracked transactions
// draw that many (sides-disagree first, then rule-5 cases, then unresolved,
// then those closest to the cut) and a footnote counts the rest.
//
// The output depends only on the input: the same ClusterCuts and options give
// the same bytes. Library code: it returns the document and never prints.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cut/cuts.h"

namespace walcut::cut {

struct SvgOptions {
  uint32_t width_px = 1200;        // whole picture; clamped to [480, 8000]
  uint32_t max_nodes = 16;         // more nodes than this are summarized
  uint32_t head_nodes = 8;         // ... drawing the first head_nodes
  uint32_t tail_nodes = 4;         // ... and the last tail_nodes
  uint32_t max_transactions = 60;  // tracked transactions drawn at most
};

// The diagram of cut `cut_id`; an empty string when the cluster has no such
// cut (callers look it up first with ClusterCuts::Find).
std::string RenderCutSvg(const ClusterCuts& cc, uint64_t cut_id, const SvgOptions& opt = {});

// Text made safe for XML character data and attribute values, losslessly:
// walfmt::EscapeBytes (walfmt/text_escape.h: bytes that are not UTF-8, the
// backslash and control characters XML cannot carry become \xhh), then
// & < > " ' as entities.
std::string XmlEscape(std::string_view text);

}  // namespace walcut::cut
