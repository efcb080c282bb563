// walcut dump PATH...: one line per record, in the spirit of pg_waldump.
//
// Speed (issue 2: at least 3 M records/s of text). The lines come from
// dump_format.h (raw char buffers, the common records straight from their
// payload bytes). With more than one job, worker threads read and format
// segments ahead of the main thread, which writes their output in WAL order
// (ordered_pipeline.h says why the bytes are the same as those of a
// sequential read). This file holds the subcommand: its options, and RunDump
// in named steps.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "cli/clock.h"
#include "cli/command.h"
#include "cli/dump_format.h"
#include "cli/follow.h"
#include "cli/inputs.h"
#include "cli/numbers.h"
#include "cli/ordered_pipeline.h"
#include "cli/output.h"
#include "cli/signals.h"

namespace walcut::cli {
namespace {

using dump::Chunk;
using dump::Filter;
using dump::Item;
using dump::LineFormatter;
using dump::NodeCtx;
using dump::Pipeline;

struct DumpOptions {
  std::vector<std::string> paths;
  Format format = Format::kText;
  std::vector<std::string> types;
  std::string tx;
  std::string key;
  std::string from;
  std::string to;
  std::vector<uint32_t> nodes;
  uint64_t limit = 0;
  size_t max_bytes = 32;
  std::string mode = "tolerate-torn-tail";
  unsigned jobs = 0;
  unsigned io_threads = 1;
  bool follow = false;
  unsigned follow_interval_ms = 100;
};

// Buffered stdout: one fwrite per 1 MiB, not one per record (per 64 KiB it
// took 46,000 write calls for a 1 GB WAL, a tenth of the dump's time). A write that
// fails stops the dump at once (main reports "cannot write output").
class Out {
 public:
  static constexpr size_t kFlushBytes = 1u << 20;
  ~Out() {
    try {
      Flush();
    } catch (const std::system_error&) {
      // Unwinding already, or nothing left to report it to: main's final
      // check of stdout sees the error.
    }
  }
  fmt::memory_buffer& buf() { return buf_; }
  void MaybeFlush() {
    if (buf_.size() >= kFlushBytes) Flush();
  }
  void Flush() {
    Put(buf_.data(), buf_.size());
    buf_.clear();
    if (std::fflush(stdout) != 0) throw std::system_error(errno, std::generic_category(), "cannot write to file");
  }
  // Appends `text` after what is buffered; a large block goes out in one
  // fwrite of its own instead of being copied.
  void Write(std::string_view text) {
    if (text.size() < kFlushBytes) {
      buf_.append(text.data(), text.data() + text.size());
      MaybeFlush();
      return;
    }
    Put(buf_.data(), buf_.size());
    buf_.clear();
    Put(text.data(), text.size());
  }

 private:
  static void Put(const char* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, stdout) != n) {
      throw std::system_error(errno, std::generic_category(), "cannot write to file");
    }
  }
  fmt::memory_buffer buf_;
};

// Step 1: the filter and the recovery mode from the options. False (after an
// error line) on a usage error.
bool ParseDumpOptions(const DumpOptions& o, Filter& f, walfmt::RecoveryMode& mode) {
  for (const std::string& t : o.types) {
    walfmt::RecordType rt;
    if (!walfmt::ParseRecordType(t, rt)) {
      PrintError(
          fmt::format("--type {}: unknown record type (known: tx_data, tx_prepare, tx_commit, tx_rollback, "
                      "cut_start, cut_finish, cut_abort, snapshot, node_start)",
                      t));
      return false;
    }
    f.all_types = false;
    f.type_ok[static_cast<uint16_t>(rt)] = true;
  }
  if (!o.tx.empty() && !walfmt::TxId::Parse(o.tx, f.tx)) {
    PrintError(fmt::format("--tx {}: expected NODE:SEQ, e.g. 1:4711", o.tx));
    return false;
  }
  f.by_tx = !o.tx.empty();
  f.by_key = !o.key.empty();
  f.key = o.key;
  if (!o.from.empty()) {
    auto l = walfmt::Lsn::Parse(o.from);
    if (!l) {
      PrintError(fmt::format("--from {}: expected a position SEGMENT/OFFSET in hex, e.g. 3/0001F2A0", o.from));
      return false;
    }
    f.from = *l;
  }
  if (!o.to.empty()) {
    auto l = walfmt::Lsn::Parse(o.to);
    if (!l) {
      PrintError(fmt::format("--to {}: expected a position SEGMENT/OFFSET in hex, e.g. 3/0001F2A0", o.to));
      return false;
    }
    f.to = *l;
  }
  f.max_bytes = o.max_bytes;
  f.format = o.format;
  f.limit = o.limit;
  if (!walfmt::ParseRecoveryMode(o.mode, mode)) {
    PrintError(fmt::format("--mode {}: expected strict, tolerate-torn-tail, point-in-time or salvage", o.mode));
    return false;
  }
  return true;
}

// Step 2: the nodes asked for (--node), in the inputs' order.
std::vector<NodeCtx> SelectNodes(const Inputs& in, const std::vector<uint32_t>& wanted) {
  std::vector<NodeCtx> nodes;
  for (const NodeWal& n : in.nodes) {
    if (!wanted.empty() && (!n.node_id || std::find(wanted.begin(), wanted.end(), *n.node_id) == wanted.end())) {
      continue;
    }
    nodes.push_back(dump::MakeNodeCtx(n));
  }
  return nodes;
}

// Step 3: of each node, the segments walfmt::ReadNodeWal would open (those
// wholly before --from are not), in dump order.
std::vector<std::unique_ptr<Item>> PlanSegments(const std::vector<NodeCtx>& nodes, const walfmt::Lsn& from) {
  std::vector<std::unique_ptr<Item>> items;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const auto& segs = nodes[k].wal->wal.segments;
    for (size_t i = 0; i < segs.size(); ++i) {
      if (segs[i].index < from.segment && i + 1 < segs.size() && segs[i + 1].index <= from.segment) continue;
      auto it = std::make_unique<Item>();
      it->node_pos = k;
      it->seg = i;
      it->is_last = i + 1 == segs.size();
      items.push_back(std::move(it));
    }
  }
  return items;
}

// Step 4: the records, node after node, each segment either taken from a
// worker of the pipeline or read here; problems on stderr in their place
// among the lines; --limit counted over both.
class RecordWriter {
 public:
  RecordWriter(const Filter& f, walfmt::RecoveryMode mode, bool read_ahead)
      : f_(f), mode_(mode), read_ahead_(read_ahead), line_(f) {}

  void Report(const walfmt::Problem& p) {
    tally_.Add(p);
    out_.Flush();
    PrintProblem(p);
  }

  void WriteAll(const std::vector<NodeCtx>& nodes, std::vector<std::unique_ptr<Item>>& items, unsigned jobs) {
    std::optional<Pipeline> pipe;
    if (jobs > 1 && items.size() > 1) pipe.emplace(items, nodes, f_, mode_, jobs);
    size_t k = 0;
    for (size_t np = 0; np < nodes.size() && !limit_hit_; ++np) {
      // walfmt::ReadNodeWal, one segment at a time.
      cur_ = &nodes[np];
      std::optional<walfmt::SegmentScan> prev;
      for (; k < items.size() && items[k]->node_pos == np; ++k) {
        walfmt::SegmentScan s = ReadSegment(*items[k], k, prev ? &*prev : nullptr, pipe ? &*pipe : nullptr);
        if (limit_hit_) break;
        const bool damaged = s.end == walfmt::SegmentEnd::kDamaged || s.end == walfmt::SegmentEnd::kBadHeader ||
                             s.end == walfmt::SegmentEnd::kIoError;
        const bool stop =
            s.failed || s.end == walfmt::SegmentEnd::kStopped || (damaged && mode_ != walfmt::RecoveryMode::kSalvage);
        prev = std::move(s);
        if (stop) break;
      }
      // The rest of this node's segments are not read (damage, --to, --limit).
      for (; k < items.size() && items[k]->node_pos == np; ++k) {
        if (pipe) pipe->Cancel(k);
      }
    }
    if (pipe) pipe->Shutdown();
    out_.Flush();
  }

  // --follow: the records of one node as they are appended, from the
  // segment `first` (an index into its segments) on, until `stop` is set
  // (SIGINT, SIGTERM), --to or --limit is reached, or damage that is not
  // the live end of the WAL stops the read (follow.h).
  void Follow(const NodeCtx& node, size_t first, std::chrono::milliseconds interval, const std::atomic<bool>& stop) {
    cur_ = &node;
    FollowOptions fo;
    fo.mode = mode_;
    fo.interval = interval;
    fo.idle = [this] { out_.Flush(); };
    FollowNodeWal(
        *node.wal, first, fo, stop, [this](const walfmt::RecordView& v) { return Visit(v); },
        [this](const walfmt::Problem& p) { Report(p); });
    out_.Flush();
  }

  int ExitCode() const { return cli::ExitCode(tally_.outcome()); }

 private:
  // Segment `item` (number k of the pipeline) after `prev`: its worker's
  // chunks when the worker read it as the sequential read would have,
  // otherwise read here.
  walfmt::SegmentScan ReadSegment(const Item& item, size_t k, const walfmt::SegmentScan* prev, Pipeline* pipe) {
    const walfmt::SegmentFile& file = cur_->wal->wal.segments[item.seg];
    walfmt::SegmentScan s;
    if (pipe) {
      pipe->SetHead(k);
      walfmt::SegmentHeader h;
      if (pipe->WaitHeader(k, h) && dump::FollowsQuietly(prev, file, h)) {
        while (!limit_hit_) {
          std::unique_ptr<Chunk> c = pipe->Next(k);
          if (!c) break;
          WriteChunk(*c);
          pipe->Recycle(std::move(c));
        }
        if (!limit_hit_) s = pipe->TakeScan(k);
        return s;
      }
      pipe->Cancel(k);
    }
    walfmt::ScanOptions so;
    so.mode = mode_;
    so.is_last = item.is_last;
    so.read_ahead = read_ahead_;  // the copy out of the page cache overlaps the formatting
    if (prev && prev->header_ok) {
      so.expect_node = true;
      so.node_id = prev->header.node_id;
      so.expect_cluster = true;
      so.cluster_id = prev->header.cluster_id;
    }
    return walfmt::ScanSegmentFile(
        file, so, [this](const walfmt::RecordView& v) { return Visit(v); },
        [this](const walfmt::Problem& p) { Report(p); }, prev);
  }

  // The sequential read of one record, straight into the output.
  bool Visit(const walfmt::RecordView& v) {
    if (v.lsn < f_.from) return true;
    switch (line_.Format(*cur_, v, out_.buf(), bad_)) {
      case LineFormatter::Outcome::kStop:
        return false;
      case LineFormatter::Outcome::kSkip:
        return true;
      case LineFormatter::Outcome::kBadPayload:
        Report(bad_);
        return true;
      case LineFormatter::Outcome::kLine:
        break;
    }
    out_.MaybeFlush();
    if (f_.limit != 0 && ++printed_ >= f_.limit) {
      limit_hit_ = true;
      return false;
    }
    return true;
  }

  // A chunk read ahead: its text and problems in order, up to --limit.
  void WriteChunk(const Chunk& c) {
    const std::string_view text(c.text.data(), c.text.size());
    size_t cut = text.size();
    if (f_.limit != 0) {
      size_t pos = 0;
      while (pos < text.size()) {
        const void* nl = std::memchr(text.data() + pos, '\n', text.size() - pos);
        if (nl == nullptr) break;
        pos = static_cast<size_t>(static_cast<const char*>(nl) - text.data()) + 1;
        if (++printed_ >= f_.limit) {
          limit_hit_ = true;
          cut = pos;
          break;
        }
      }
    }
    size_t pos = 0;
    for (const auto& [at, p] : c.problems) {
      if (limit_hit_ && at >= cut) break;  // after the last line: the sequential read stopped before it
      out_.Write(text.substr(pos, at - pos));
      pos = at;
      Report(p);
    }
    out_.Write(text.substr(pos, cut - pos));
  }

  const Filter& f_;
  const walfmt::RecoveryMode mode_;
  const bool read_ahead_;
  Out out_;
  walfmt::ProblemTally tally_;
  LineFormatter line_;
  const NodeCtx* cur_ = nullptr;
  walfmt::Problem bad_;
  uint64_t printed_ = 0;
  bool limit_hit_ = false;
};

int RunDump(const DumpOptions& o) {
  Filter f;
  walfmt::RecoveryMode mode;
  if (!ParseDumpOptions(o, f, mode)) return kExitUsage;
  auto in = ResolveInputs(o.paths);
  if (!in.ok()) {
    PrintError(in.status().message());
    return ExitForStatus(in.status());
  }
  if (!o.paths.empty()) f.clock = ClockNear(o.paths[0]);
  for (const uint32_t want : o.nodes) {
    const bool present = std::any_of(in->nodes.begin(), in->nodes.end(),
                                     [want](const NodeWal& n) { return n.node_id && *n.node_id == want; });
    if (!present) {
      std::vector<std::string> ids;
      for (const NodeWal& n : in->nodes) {
        if (n.node_id) ids.push_back(std::to_string(*n.node_id));
      }
      PrintError(fmt::format("--node {}: no such node in the input (its nodes: {})", want,
                             ids.empty() ? std::string("none known") : fmt::format("{}", fmt::join(ids, ", "))));
      return kExitUsage;
    }
  }
  const std::vector<NodeCtx> nodes = SelectNodes(*in, o.nodes);
  if (o.follow) {
    if (nodes.size() != 1) {
      PrintError(fmt::format("--follow reads one node's WAL; the input has {} nodes: give --node I", nodes.size()));
      return kExitUsage;
    }
    if (nodes.front().wal->wal_dir.empty()) {
      PrintError("--follow reads a WAL directory (a cluster, node or WAL directory), not segment files");
      return kExitUsage;
    }
  }
  std::vector<std::unique_ptr<Item>> items = PlanSegments(nodes, f.from);
  RecordWriter w(f, mode, o.io_threads > 0);
  for (const auto& p : in->problems) w.Report(p);
  if (o.follow) {
    std::atomic<bool> stop{false};
    StopOnSignal(&stop);
    w.Follow(nodes.front(), items.empty() ? 0 : items.front()->seg, std::chrono::milliseconds(o.follow_interval_ms),
             stop);
    StopOnSignal(nullptr);
    return w.ExitCode();
  }
  const unsigned jobs = o.jobs != 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  w.WriteAll(nodes, items, jobs);
  return w.ExitCode();
}

}  // namespace

void RegisterDump(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<DumpOptions>();
  CLI::App* cmd = root.add_subcommand(
      "dump",
      "Print one line per record: node, position SEGMENT/OFFSET (hex), type, length, transaction, summary.\n"
      "Nodes are printed one after the other. Damage is reported on stderr: exit 1 (a torn tail at the\n"
      "end is a note, exit 0), 2 usage error, 3 I/O error.");
  cmd->add_option(
         "paths", o->paths,
         "Cluster dir, node dir, wal dir or segment files; - reads one segment (plain or zstd) from standard input")
      ->required();
  AddFormatOption(cmd, o->format);
  cmd->add_option("-t,--type", o->types, "Only these record types (repeat or comma-separate; e.g. commit,cut_start)")
      ->delimiter(',');
  cmd->add_option("-x,--tx", o->tx, "Only records of this transaction NODE:SEQ (and CUT_FINISH records naming it)");
  cmd->add_option("-k,--key", o->key, "Only TX_DATA records writing this key (exact bytes)");
  cmd->add_option("-s,--from", o->from, "Start at this position SEGMENT/OFFSET (hex), per node");
  cmd->add_option("-e,--to", o->to, "Stop before this position SEGMENT/OFFSET (hex), per node");
  AddNumberList(cmd, "--node", o->nodes, kNodeIdRange, "Only these node ids (repeat or comma-separate)");
  AddNumber(cmd, "-n,--limit", o->limit, {0, 1000000000000}, "Stop after this many records (0: no limit)");
  AddNumber(cmd, "--max-bytes", o->max_bytes, kMaxBytesRange,
            "Shorten keys and values to this many bytes in text (0: in full)")
      ->default_str("32");
  cmd->add_option("--mode", o->mode,
                  "Recovery mode: strict, tolerate-torn-tail (default), point-in-time (stop quietly at damage), "
                  "salvage (skip damage)")
      ->default_str("tolerate-torn-tail");
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange,
            "Worker threads parsing and formatting segments ahead of the output (default: one per core); -j1: "
            "the output's thread parses and formats, and a helper thread still reads ahead and checks the "
            "checksums (unless --io-threads 0), so -j1 uses two threads");
  AddNumber(cmd, "--io-threads", o->io_threads, {0, 1},
            "With -j1: 1 (default) reads each plain segment ahead, and checks its checksums, on a thread of its "
            "own; 0 reads it on the output's thread, so that the whole dump runs on one thread");
  cmd->add_flag("-f,--follow", o->follow,
                "Keep reading as the WAL grows, across new segments, until interrupted (SIGINT, SIGTERM: exit 0); "
                "one node (--node with a cluster); an incomplete record at the end is read once it is complete");
  AddNumber(cmd, "--follow-interval", o->follow_interval_ms, {1, 60000},
            "With --follow: milliseconds between looks for more WAL (default 100)");
  reg.Add(cmd, [o] { return RunDump(*o); });
}

namespace {
const CommandRegistrar kRegister{20, RegisterDump};
}  // namespace

}  // namespace walcut::cli
