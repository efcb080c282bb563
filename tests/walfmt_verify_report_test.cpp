// What verify decides (walfmt/verify_report.h) from segment outcomes built by
// hand: the status of each segment, the problems of a node and of the inputs
// together, the tallies and the outcome (walfmt/outcome.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "walfmt/outcome.h"
#include "walfmt/verify_report.h"

namespace {

using namespace walfmt;

SegmentOutcome Seg(uint64_t cluster, uint64_t records, uint64_t bytes) {
  SegmentOutcome o;
  o.scan.header_ok = true;
  o.scan.header.cluster_id = cluster;
  o.scan.records = records;
  o.scan.file_bytes = bytes;
  return o;
}

Problem Prob(ProblemKind kind, bool fatal) {
  Problem p;
  p.kind = kind;
  p.fatal = fatal;
  p.detail = "made up";
  return p;
}

}  // namespace

TEST_CASE("verify report: outcomes map the error codes as the exit codes table says") {
  CHECK(OutcomeOf(ErrorCode::kOk) == Outcome::kOk);
  CHECK(OutcomeOf(ErrorCode::kCorruption) == Outcome::kFindings);
  CHECK(OutcomeOf(ErrorCode::kInvalidArgument) == Outcome::kUsage);
  CHECK(OutcomeOf(ErrorCode::kNotFound) == Outcome::kUsage);
  CHECK(OutcomeOf(ErrorCode::kIo) == Outcome::kIo);
  CHECK(OutcomeOf(ErrorCode::kInternal) == Outcome::kIo);
  CHECK(OutcomeOf(Status::NotFound("x")) == Outcome::kUsage);
}

TEST_CASE("verify report: the tally counts by consequence, I/O beating findings") {
  ProblemTally t;
  CHECK(t.outcome() == Outcome::kOk);
  t.Add(Prob(ProblemKind::kTornTail, false));
  CHECK(t.notices == 1);
  CHECK(t.outcome() == Outcome::kOk);
  t.Add(Prob(ProblemKind::kPayloadChecksum, true));
  CHECK(t.findings == 1);
  CHECK(t.outcome() == Outcome::kFindings);
  t.Add(Prob(ProblemKind::kIo, true));
  CHECK(t.io == 1);
  CHECK(t.findings == 1);
  CHECK(t.outcome() == Outcome::kIo);
}

TEST_CASE("verify report: segment status, I/O first, then damage, then a torn tail") {
  SegmentOutcome o = Seg(1, 3, 100);
  CHECK(StatusOf(o) == SegmentStatus::kOk);
  o.scan.end = SegmentEnd::kTornTail;
  CHECK(StatusOf(o) == SegmentStatus::kTornTail);
  o.problems.push_back(Prob(ProblemKind::kPayloadChecksum, true));
  CHECK(StatusOf(o) == SegmentStatus::kCorrupt);
  o.scan.header_ok = false;
  CHECK(StatusOf(o) == SegmentStatus::kBadHeader);
  o.problems.push_back(Prob(ProblemKind::kIo, true));
  CHECK(StatusOf(o) == SegmentStatus::kIoError);
  CHECK(SegmentStatusName(SegmentStatus::kIoError) == "io-error");
  CHECK(SegmentStatusName(SegmentStatus::kTornTail) == "torn-tail");
}

TEST_CASE("verify report: a clean WAL with a torn tail at its end is ok") {
  std::vector<std::vector<SegmentOutcome>> oc(2);
  oc[0] = {Seg(7, 10, 1000), Seg(7, 5, 500)};
  oc[1] = {Seg(7, 4, 400)};
  oc[1][0].scan.end = SegmentEnd::kTornTail;
  oc[1][0].problems.push_back(Prob(ProblemKind::kTornTail, false));
  const VerifyReport r = MakeVerifyReport({{"a/node-0", 0}, {"a/node-1", 1}}, {}, oc);
  CHECK(r.ok());
  CHECK(r.segments == 3);
  CHECK(r.records == 19);
  CHECK(r.bytes == 1900);
  CHECK(r.nodes[0].records == 15);
  CHECK(r.nodes[1].bytes == 400);
  CHECK(r.torn_tails == 1);
  CHECK(r.bad_segments == 0);
  CHECK(r.tally.notices == 1);
  CHECK(r.problems.empty());
  CHECK(r.nodes[1].segments[0].status == SegmentStatus::kTornTail);
}

TEST_CASE("verify report: a node id given twice is a finding of the second node") {
  std::vector<std::vector<SegmentOutcome>> oc{{Seg(7, 1, 10)}, {Seg(7, 1, 10)}};
  const VerifyReport r = MakeVerifyReport({{"x/node-0", 0}, {"y/node-0", 0}}, {}, oc);
  CHECK(r.outcome == Outcome::kFindings);
  CHECK(r.nodes[0].problems.empty());
  REQUIRE(r.nodes[1].problems.size() == 1);
  CHECK(r.nodes[1].problems[0].kind == ProblemKind::kSegmentMismatch);
  CHECK(r.nodes[1].problems[0].detail == "node id 0 also used by x/node-0");
  CHECK(r.bad_segments == 0);
  CHECK(r.tally.findings == 1);
}

TEST_CASE("verify report: segments of several clusters together are a finding of the inputs") {
  std::vector<std::vector<SegmentOutcome>> oc{{Seg(7, 1, 10)}, {Seg(8, 1, 10)}};
  const VerifyReport r = MakeVerifyReport({{"x/node-0", 0}, {"y/node-1", 1}}, {}, oc);
  CHECK(r.outcome == Outcome::kFindings);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].detail == "segments of 2 different clusters were given together");
  // A segment whose header did not read names no cluster.
  oc[1][0].scan.header_ok = false;
  CHECK(MakeVerifyReport({{"x/node-0", 0}, {"y/node-1", 1}}, {}, oc).problems.empty());
}

TEST_CASE("verify report: a node without segments, and the listing's problems, go to their node") {
  std::vector<std::vector<SegmentOutcome>> oc{{}, {Seg(7, 1, 10)}};
  Problem listed = Prob(ProblemKind::kSegmentMismatch, false);
  listed.file = "y/node-1/wal/0000000000000001.wal.zst";
  const VerifyReport r = MakeVerifyReport({{"x/node-0", std::nullopt}, {"y/node-1", 1}}, {listed}, oc);
  REQUIRE(r.nodes[0].problems.size() == 1);
  CHECK(r.nodes[0].problems[0].kind == ProblemKind::kMissingSegment);
  CHECK_FALSE(r.nodes[0].problems[0].node_known);
  REQUIRE(r.nodes[1].problems.size() == 1);
  CHECK(r.nodes[1].problems[0].file == listed.file);
  CHECK(r.tally.findings == 1);
  CHECK(r.tally.notices == 1);
  CHECK(r.outcome == Outcome::kFindings);
}

TEST_CASE("verify report: damaged and unreadable segments are counted as bad") {
  std::vector<std::vector<SegmentOutcome>> oc{{Seg(7, 1, 10), Seg(7, 1, 10), Seg(7, 1, 10)}};
  oc[0][0].problems.push_back(Prob(ProblemKind::kPayloadChecksum, true));
  oc[0][1].problems.push_back(Prob(ProblemKind::kIo, true));
  const VerifyReport r = MakeVerifyReport({{"x/node-0", 0}}, {}, oc);
  CHECK(r.bad_segments == 2);
  CHECK(r.outcome == Outcome::kIo);
  CHECK(r.tally.findings == 1);
  CHECK(r.tally.io == 1);
}
