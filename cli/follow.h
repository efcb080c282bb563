// Following one node's WAL as the runtime appends to it (dump --follow,
// verify --follow): segment after segment, the live end re-read once the
// writer added to it, until a stop flag is set.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

#include "cli/inputs.h"
#include "walfmt/parallel_scan.h"
#include "walfmt/reader.h"

namespace walcut::cli {

struct FollowOptions {
  walfmt::RecoveryMode mode = walfmt::RecoveryMode::kTolerateTornTail;
  std::chrono::milliseconds interval{100};
  // Called before each wait for more WAL (the caller flushes its output).
  std::function<void()> idle;
};

// Reads the WAL of `nw` (a WAL directory is required) from its segment
// `first` (an index into nw.wal.segments) on, giving each record to `visit`
// and each problem to `report` once, in order. It returns when `stop` is
// set (SIGINT, SIGTERM; checked between records and while waiting), when
// `visit` returns false, or when damage that is not the live end of the WAL
// stops the read (any damage but in salvage mode). The live end — a record
// or a segment header still being written — is never reported: it is read
// again once more bytes arrived, and a segment is complete once its
// successor exists.
//
// The result: one outcome per segment read, each the passes over it merged
// into one scan with the problems reported for it; the last one is the
// segment being read when the follow ended (possibly incomplete).
std::vector<walfmt::SegmentOutcome> FollowNodeWal(const NodeWal& nw, size_t first, const FollowOptions& opt,
                                                  const std::atomic<bool>& stop, const walfmt::RecordVisitor& visit,
                                                  const walfmt::ProblemSink& report);

}  // namespace walcut::cli
