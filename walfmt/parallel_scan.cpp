#include "walfmt/parallel_scan.h"

#include <algorithm>
#include <thread>

#include "walfmt/workers.h"

namespace walfmt {

std::vector<std::vector<SegmentOutcome>> ScanInParallel(const std::vector<NodeSegments>& nodes,
                                                        const ParallelScanOptions& opt) {
  std::vector<std::vector<SegmentOutcome>> out(nodes.size());
  struct Item {
    size_t node;
    size_t seg;
  };
  std::vector<Item> items;
  for (size_t n = 0; n < nodes.size(); ++n) {
    out[n].resize(nodes[n].segments.size());
    for (size_t s = 0; s < nodes[n].segments.size(); ++s) items.push_back({n, s});
  }
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0}, bytes{0};
  auto worker = [&] {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= items.size()) return;
      const Item it = items[i];
      const NodeSegments& ns = nodes[it.node];
      ScanOptions so;
      so.mode = opt.mode;
      so.check_payload_crc = opt.check_payload_crc;
      so.visit_types = opt.visit_types;
      so.is_last = it.seg + 1 == ns.segments.size();
      if (ns.expected_node) {
        so.expect_node = true;
        so.node_id = *ns.expected_node;
      }
      SegmentOutcome& o = out[it.node][it.seg];
      RecordVisitor v = opt.make_visitor ? opt.make_visitor(it.node, it.seg) : RecordVisitor();
      o.scan = ScanSegmentFile(ns.segments[it.seg], so, v, [&o](const Problem& p) { o.problems.push_back(p); });
      const uint64_t d = done.fetch_add(1) + 1;
      const uint64_t b = bytes.fetch_add(o.scan.file_bytes) + o.scan.file_bytes;
      if (opt.progress) opt.progress(d, b);
    }
  };
  unsigned jobs = opt.jobs != 0 ? opt.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(items.size(), 1)));
  RunWorkers(jobs, worker);

  // Continuity, and a node id that stays the same across the node's files.
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (size_t s = 1; s < out[n].size(); ++s) {
      SegmentOutcome& cur = out[n][s];
      CheckContinuity(out[n][s - 1].scan, cur.scan, [&cur](const Problem& p) { cur.problems.push_back(p); });
    }
  }
  return out;
}

}  // namespace walfmt
