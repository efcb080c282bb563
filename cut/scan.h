// One streaming pass over one node's WAL producing its NodeSummary
// (cut/summary.h). Memory is bounded by the transactions in flight on the
// node (and a window of recent commits), not by the size of the WAL.
//
// The WAL is read in point-in-time mode: a torn tail ends it quietly; damage
// stops the pass there and is recorded (summary.damaged), so everything the
// summary says holds for the intact prefix.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cut/summary.h"
#include "walfmt/reader.h"
#include "walfmt/status.h"

namespace walcut::cut {

// Sees every record a node scan visits, right after the scanner, while the
// scan reads on (a restore applying the WAL in the same pass as its verdict
// scan: recovery/restore_one_pass.cpp). It cannot stop the scan.
class RecordTap {
 public:
  virtual void Record(const walfmt::RecordView& v) = 0;

 protected:
  ~RecordTap() = default;
};

struct ScanOptions {
  uint32_t node = 0;            // the node the WAL belongs to
  bool expect_cluster = false;  // check segment headers against cluster_id
  uint64_t cluster_id = 0;
  size_t max_findings = 200;  // findings kept per node; the rest are counted
  // Commits remembered in full for the cut that may start next (rule 5 lets
  // a transaction that committed just before CUT_START be tracked): at least
  // this many, and 4 x the peak in flight.
  size_t recent_commits = 256;
  // Where transactions finished (position, commit or rollback) is remembered
  // to catch one that finishes twice: for the last 1024 transaction numbers
  // of each of the first 8 coordinators seen (cut/tx_window.h), and for the
  // last this many finishes of other transactions, in a ring.
  size_t finished_window = 4096;
  // The WAL does not start at genesis (its first segment's index is above
  // 0; NodeScan sets this from the segment list). Records of transactions
  // and cuts that began before the first segment are then missing by
  // design: they make the evidence of those cuts pruned, never a finding.
  bool wal_after_genesis = false;
  // A transaction that began on the node after its last restart and has no
  // outcome there although the WAL goes on for more than this much cluster
  // time is an atomicity finding naming it (0: not checked). The runtime
  // resolves a stuck transaction after 200 ms.
  uint64_t outcome_overdue_us = 500000;
  std::optional<uint32_t> witness_peer;  // collect (tx, first cut) of transactions shared with this peer
  // Stop as soon as everything the scan says about cut `settle_cut` (and
  // every earlier cut) is decided on this node (0: read the whole WAL). That
  // is once the node has started a later cut (a CUT_ABORT of cut K, or a
  // commit the marker check places in it, can come until then), every
  // transaction that began here before CUT_START(K) has finished (one that
  // never does is a finding at the end of the WAL), and no commit counted in
  // cut K or before is among the recent commits a later cut's sets could
  // still move. A WAL where that never happens is read to the end. The
  // summary then holds for the prefix read (NodeSummary::settled_cut): what
  // it says of cut K and before is what the whole WAL says, except for a
  // record after that point naming cut K again, which the runtime never
  // writes; later cuts look unfinished.
  uint64_t settle_cut = 0;
  // Start at this position (a record boundary, usually where a restore of
  // an earlier cut continues from) instead of the first segment: the scan
  // treats the WAL as starting after genesis there, as when the older
  // segments were removed (NodeSummary::pruned, wal_start). Fails
  // (kNotFound) when the segment holding it is not in the directory.
  Lsn from;
  // Called now and then with the WAL bytes read so far (progress display).
  std::function<void(uint64_t bytes)> progress;
  // Shown every record the scanner visited (nullptr: none); must outlive the scan.
  RecordTap* tap = nullptr;
};

// The scan's logic without the reader: feed it the intact records of one
// node's WAL in order, then take the summary. The summary's WAL facts
// (segments, end, damage, torn tail) are left to the caller, who did the
// reading; bench/scanbench times the logic alone this way.
class SummaryBuilder {
 public:
  explicit SummaryBuilder(const ScanOptions& opt);
  ~SummaryBuilder();
  SummaryBuilder(const SummaryBuilder&) = delete;
  SummaryBuilder& operator=(const SummaryBuilder&) = delete;
  void Visit(const walfmt::RecordView& v);
  NodeSummary Finish();

 private:
  struct State;
  std::unique_ptr<State> st_;
};

// Scans the WAL directory `wal_dir` (segments as walfmt writes them). Fails
// only when nothing can be read at all (no such directory, no segments, I/O
// error on the first segment); damage is part of the summary.
walfmt::Result<NodeSummary> ScanNode(const std::string& wal_dir, const ScanOptions& opt);

// ScanNode one segment at a time: ScanCluster interleaves the nodes' scans on
// its threads so that the cores stay busy whatever the number of nodes.
class NodeScan {
 public:
  // Fails as ScanNode does when the directory or its segment list is unusable.
  static walfmt::Result<std::unique_ptr<NodeScan>> Open(const std::string& wal_dir, const ScanOptions& opt);
  ~NodeScan();
  NodeScan(const NodeScan&) = delete;
  NodeScan& operator=(const NodeScan&) = delete;

  bool done() const;
  void Step();  // scans the next segment
  // After done(): the summary, or the failure when nothing could be read.
  walfmt::Result<NodeSummary> Finish();

 private:
  struct State;
  explicit NodeScan(std::unique_ptr<State> st);
  std::unique_ptr<State> st_;
};

}  // namespace walcut::cut
