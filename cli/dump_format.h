// walcut dump's lines: the record filter, the node a line names, and the
// LineFormatter that turns one record into its text or JSON line. Lines are
// written into raw char buffers, for the common record types straight from
// the payload bytes (no decoded Record, no allocation per record).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/inputs.h"
#include "cli/output.h"
#include "walfmt/duration.h"
#include "walfmt/lsn.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"

namespace walcut::cli::dump {

// What to print, from the options; shared read-only by every thread.
struct Filter {
  std::array<bool, walfmt::kMaxKnownRecordType + 1> type_ok{};  // by type code
  bool all_types = true;
  bool by_tx = false;
  walfmt::TxId tx;
  bool by_key = false;
  std::string key;
  walfmt::Lsn from{0, 0};
  walfmt::Lsn to{UINT64_MAX, UINT64_MAX};
  size_t max_bytes = 32;
  Format format = Format::kText;
  uint64_t limit = 0;
  // Record times (CUT_*, SNAPSHOT, NODE_START in text; every time in JSON)
  // print with the cluster's epoch when the input's cluster.json has one.
  walfmt::ClusterClock clock;
};

// One node as its lines and problems name it.
struct NodeCtx {
  const NodeWal* wal = nullptr;
  // "node 3 " ("node ? " when the id is unknown): at most 16 bytes for a
  // 32-bit id, kept in a 16-byte array so that one fixed-size copy writes it.
  std::array<char, 16> prefix{};
  size_t prefix_len = 0;
};

NodeCtx MakeNodeCtx(const NodeWal& n);

// Turns one record into its line (or not). One per thread: it keeps scratch
// space between records so that the common records allocate nothing.
class LineFormatter {
 public:
  explicit LineFormatter(const Filter& f) : f_(f) {}
  enum class Outcome {
    kSkip,        // filtered out
    kLine,        // one line appended
    kBadPayload,  // intact record whose payload does not decode: `bad` says where and why
    kStop,        // at or past --to: the node ends here
  };
  Outcome Format(const NodeCtx& n, const walfmt::RecordView& v, fmt::memory_buffer& out, walfmt::Problem& bad);

 private:
  const Filter& f_;
  walfmt::TxId tx_;
  std::vector<walfmt::WriteView> views_;
  walfmt::TxOutcomeView outcome_;
  std::string desc_;
};

}  // namespace walcut::cli::dump
