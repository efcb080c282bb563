// walcut dump PATH...: one line per record, in the spirit of pg_waldump.
#include <charconv>
#include <cstdio>
#include <algorithm>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/inputs.h"
#include "cli/output.h"

namespace walcut::cli {
namespace {

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
};

// Buffered stdout: one fwrite per 64 KiB, not one per record.
class Out {
 public:
  ~Out() { Flush(); }
  fmt::memory_buffer& buf() { return buf_; }
  void MaybeFlush() {
    if (buf_.size() >= (64u << 10)) Flush();
  }
  void Flush() {
    if (buf_.size() > 0) std::fwrite(buf_.data(), 1, buf_.size(), stdout);
    buf_.clear();
    std::fflush(stdout);
  }

 private:
  fmt::memory_buffer buf_;
};

void AppendPadded(std::string& out, std::string_view text, size_t width, bool right) {
  if (right && text.size() < width) out.append(width - text.size(), ' ');
  out += text;
  if (!right && text.size() < width) out.append(width - text.size(), ' ');
}

// "SEG/OFFSET" in upper-case hex, the offset zero-padded to 8 digits.
std::string_view LsnText(const walfmt::Lsn& l, char (&buf)[40]) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  char* p = buf;
  char tmp[16];
  int n = 0;
  uint64_t seg = l.segment;
  do {
    tmp[n++] = kDigits[seg & 0xF];
    seg >>= 4;
  } while (seg != 0);
  while (n > 0) *p++ = tmp[--n];
  *p++ = '/';
  uint64_t off = l.offset;
  n = 0;
  do {
    tmp[n++] = kDigits[off & 0xF];
    off >>= 4;
  } while (off != 0);
  for (int i = n; i < 8; ++i) *p++ = '0';
  while (n > 0) *p++ = tmp[--n];
  return std::string_view(buf, static_cast<size_t>(p - buf));
}

const walfmt::TxId* TxOf(const walfmt::Record& r) {
  return std::visit(
      [](const auto& x) -> const walfmt::TxId* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, walfmt::TxData> || std::is_same_v<T, walfmt::TxPrepare> ||
                      std::is_same_v<T, walfmt::TxCommit> || std::is_same_v<T, walfmt::TxRollback>) {
          return &x.tx;
        } else {
          return nullptr;
        }
      },
      r);
}

bool MentionsTx(const walfmt::Record& r, const walfmt::TxId& tx) {
  if (const walfmt::TxId* t = TxOf(r)) return *t == tx;
  if (const auto* f = std::get_if<walfmt::CutFinish>(&r)) {
    return std::find(f->before.begin(), f->before.end(), tx) != f->before.end() ||
           std::find(f->after.begin(), f->after.end(), tx) != f->after.end();
  }
  return false;
}

nlohmann::json TxListJson(const std::vector<walfmt::TxId>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& t : v) a.push_back(t.ToString());
  return a;
}

nlohmann::json RecordJson(const walfmt::Record& rec) {
  using walfmt::Printable;
  return std::visit(
      [](const auto& r) -> nlohmann::json {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, walfmt::TxData>) {
          nlohmann::json w = nlohmann::json::array();
          for (const auto& x : r.writes) {
            nlohmann::json jw{{"op", x.op == walfmt::WriteOp::kDelete ? "delete" : "put"},
                              {"key", Printable(x.key, 0)}};
            if (x.op != walfmt::WriteOp::kDelete) jw["value"] = Printable(x.value, 0);
            w.push_back(jw);
          }
          return {{"writes", w}};
        } else if constexpr (std::is_same_v<T, walfmt::TxPrepare>) {
          return {{"time_us", r.time_us}, {"participants", r.participants}};
        } else if constexpr (std::is_same_v<T, walfmt::TxCommit>) {
          return {{"marker", r.marker},
                  {"time_us", r.time_us},
                  {"participants", r.participants},
                  {"one_phase", (r.flags & walfmt::kTxFlagOnePhase) != 0},
                  {"recovered", (r.flags & walfmt::kTxFlagRecovered) != 0}};
        } else if constexpr (std::is_same_v<T, walfmt::TxRollback>) {
          return {{"time_us", r.time_us},
                  {"participants", r.participants},
                  {"one_phase", (r.flags & walfmt::kTxFlagOnePhase) != 0},
                  {"recovered", (r.flags & walfmt::kTxFlagRecovered) != 0}};
        } else if constexpr (std::is_same_v<T, walfmt::CutStart>) {
          return {{"cut", r.cut_id}, {"time_us", r.time_us}};
        } else if constexpr (std::is_same_v<T, walfmt::CutFinish>) {
          return {{"cut", r.cut_id}, {"time_us", r.time_us}, {"before", TxListJson(r.before)},
                  {"after", TxListJson(r.after)}};
        } else if constexpr (std::is_same_v<T, walfmt::CutAbort>) {
          return {{"cut", r.cut_id},
                  {"time_us", r.time_us},
                  {"reason", std::string(walfmt::CutAbortReasonName(r.reason))},
                  {"detail", Printable(r.detail, 0)}};
        } else if constexpr (std::is_same_v<T, walfmt::Snapshot>) {
          return {{"name", Printable(r.name, 0)},
                  {"time_us", r.time_us},
                  {"fingerprint", fmt::format("{:016x}", r.fingerprint)}};
        } else {
          return {{"incarnation", r.incarnation}, {"time_us", r.time_us}};
        }
      },
      rec);
}

int RunDump(const DumpOptions& o) {
  // --- Arguments.
  std::set<walfmt::RecordType> types;
  for (const std::string& t : o.types) {
    walfmt::RecordType rt;
    if (!walfmt::ParseRecordType(t, rt)) {
      PrintError(fmt::format("--type {}: unknown record type (known: tx_data, tx_prepare, tx_commit, tx_rollback, "
                             "cut_start, cut_finish, cut_abort, snapshot, node_start)",
                             t));
      return kExitUsage;
    }
    types.insert(rt);
  }
  walfmt::TxId tx;
  if (!o.tx.empty() && !walfmt::TxId::Parse(o.tx, tx)) {
    PrintError(fmt::format("--tx {}: expected NODE:SEQ, e.g. 1:4711", o.tx));
    return kExitUsage;
  }
  walfmt::Lsn from{0, 0}, to{UINT64_MAX, UINT64_MAX};
  if (!o.from.empty()) {
    auto l = walfmt::Lsn::Parse(o.from);
    if (!l) {
      PrintError(fmt::format("--from {}: expected a position SEGMENT/OFFSET in hex, e.g. 3/0001F2A0", o.from));
      return kExitUsage;
    }
    from = *l;
  }
  if (!o.to.empty()) {
    auto l = walfmt::Lsn::Parse(o.to);
    if (!l) {
      PrintError(fmt::format("--to {}: expected a position SEGMENT/OFFSET in hex, e.g. 3/0001F2A0", o.to));
      return kExitUsage;
    }
    to = *l;
  }
  walfmt::RecoveryMode mode;
  if (!walfmt::ParseRecoveryMode(o.mode, mode)) {
    PrintError(fmt::format("--mode {}: expected strict, tolerate-torn-tail, point-in-time or salvage", o.mode));
    return kExitUsage;
  }
  auto in = ResolveInputs(o.paths);
  if (!in.ok()) {
    PrintError(in.status().message());
    return ExitForStatus(in.status());
  }

  // --- Records.
  Out out;
  ProblemTally tally;
  auto report = [&](const walfmt::Problem& p) {
    tally.Add(p);
    out.Flush();
    PrintProblem(p);
  };
  for (const auto& p : in->problems) report(p);
  const std::set<uint32_t> nodes(o.nodes.begin(), o.nodes.end());
  uint64_t printed = 0;
  bool limit_hit = false;
  std::string line;
  char lsn_buf[40];
  walfmt::TxId view_tx;
  std::vector<walfmt::WriteView> views;
  for (const NodeWal& n : in->nodes) {
    if (!nodes.empty() && (!n.node_id || nodes.count(*n.node_id) == 0)) continue;
    if (limit_hit) break;
    const uint32_t node = n.node_id.value_or(0);
    const std::string node_label = n.node_id ? fmt::format("{}", *n.node_id) : std::string("?");
    walfmt::NodeReadOptions ro;
    ro.mode = mode;
    ro.from = from;
    // One text line, built by hand: a format-string parse per record would
    // dominate the cost of the dump.
    auto EmitLine = [&](const walfmt::RecordView& v, const walfmt::TxId* t, const auto& describe) {
      line.clear();
      line += "node ";
      line += node_label;
      line.push_back(' ');
      AppendPadded(line, LsnText(v.lsn, lsn_buf), 18, /*right=*/true);
      line.push_back(' ');
      AppendPadded(line, walfmt::RecordTypeName(v.type), 11, false);
      line += " len ";
      char num[24];
      const auto nr = std::to_chars(num, num + sizeof(num), v.size());
      AppendPadded(line, std::string_view(num, static_cast<size_t>(nr.ptr - num)), 6, true);
      line += "  tx ";
      if (t != nullptr) {
        char txt[48];
        char* p = std::to_chars(txt, txt + 20, t->node).ptr;
        *p++ = ':';
        p = std::to_chars(p, txt + sizeof(txt), t->seq).ptr;
        AppendPadded(line, std::string_view(txt, static_cast<size_t>(p - txt)), 12, false);
      } else {
        AppendPadded(line, "-", 12, false);
      }
      line.push_back(' ');
      describe(line);
      line.push_back('\n');
      out.buf().append(line.data(), line.data() + line.size());
    };
    auto AfterRecord = [&]() -> bool {
      out.MaybeFlush();
      if (o.limit != 0 && ++printed >= o.limit) {
        limit_hit = true;
        return false;
      }
      return true;
    };
    auto visit = [&](const walfmt::RecordView& v) -> bool {
      if (!(v.lsn < to)) return false;
      if (!types.empty() && types.count(v.type) == 0) return true;
      // Hot path: TX_DATA (most of a WAL) in text, straight from the payload
      // bytes, without copying keys and values.
      const bool fast = o.format == Format::kText && v.type == walfmt::RecordType::kTxData &&
                        walfmt::ParseTxData(v.payload, view_tx, views);
      std::optional<walfmt::Result<walfmt::Record>> decoded;
      if (!fast) decoded.emplace(walfmt::DecodePayload(v.type, v.payload));
      if (fast) {
        if (!o.tx.empty() && !(view_tx == tx)) return true;
        if (!o.key.empty() &&
            std::none_of(views.begin(), views.end(), [&](const walfmt::WriteView& w) { return w.key == o.key; })) {
          return true;
        }
        EmitLine(v, &view_tx, [&](std::string& l) { walfmt::AppendWritesDescription(l, views, o.max_bytes); });
        return AfterRecord();
      }
      auto& rec = *decoded;
      if (!rec.ok()) {
        walfmt::Problem p;
        p.kind = walfmt::ProblemKind::kBadPayload;
        p.node = node;
        p.node_known = n.node_id.has_value();
        p.file = n.label;
        p.segment = v.lsn.segment;
        p.offset = v.lsn.offset;
        p.detail = rec.status().message();
        report(p);
        return true;
      }
      if (!o.tx.empty() && !MentionsTx(*rec, tx)) return true;
      if (!o.key.empty()) {
        const auto* d = std::get_if<walfmt::TxData>(&*rec);
        if (d == nullptr) return true;
        bool hit = false;
        for (const auto& w : d->writes) hit = hit || w.key == o.key;
        if (!hit) return true;
      }
      const walfmt::TxId* t = TxOf(*rec);
      if (o.format == Format::kJson) {
        nlohmann::json j{{"schema", kDumpSchema},
                         {"node", n.node_id ? nlohmann::json(*n.node_id) : nlohmann::json(nullptr)},
                         {"lsn", v.lsn.ToString()},
                         {"segment", v.lsn.segment},
                         {"offset", v.lsn.offset},
                         {"type", std::string(walfmt::RecordTypeName(v.type))},
                         {"length", v.size()},
                         {"tx", t ? nlohmann::json(t->ToString()) : nlohmann::json(nullptr)},
                         {"record", RecordJson(*rec)}};
        const std::string s = j.dump();
        out.buf().append(s.data(), s.data() + s.size());
        out.buf().push_back('\n');
      } else {
        EmitLine(v, t, [&](std::string& l) { walfmt::AppendDescription(l, *rec, o.max_bytes); });
      }
      return AfterRecord();
    };
    walfmt::ReadNodeWal(n.wal.segments, ro, visit, report);
  }
  out.Flush();
  return tally.ExitCode();
}

}  // namespace

void RegisterDump(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<DumpOptions>();
  CLI::App* cmd = root.add_subcommand(
      "dump",
      "Print one line per record: node, position SEGMENT/OFFSET (hex), type, length, transaction, summary.\n"
      "Nodes are printed one after the other. Damage is reported on stderr: exit 1 (a torn tail at the\n"
      "end is a note, exit 0), 2 usage error, 3 I/O error.");
  cmd->add_option("paths", o->paths, "Cluster dir, node dir, wal dir or segment files")->required();
  AddFormatOption(cmd, o->format);
  cmd->add_option("-t,--type", o->types, "Only these record types (repeat or comma-separate; e.g. commit,cut_start)")
      ->delimiter(',');
  cmd->add_option("-x,--tx", o->tx, "Only records of this transaction NODE:SEQ (and CUT_FINISH records naming it)");
  cmd->add_option("-k,--key", o->key, "Only TX_DATA records writing this key (exact bytes)");
  cmd->add_option("-s,--from", o->from, "Start at this position SEGMENT/OFFSET (hex), per node");
  cmd->add_option("-e,--to", o->to, "Stop before this position SEGMENT/OFFSET (hex), per node");
  cmd->add_option("--node", o->nodes, "Only these node ids (repeat or comma-separate)")->delimiter(',');
  cmd->add_option("-n,--limit", o->limit, "Stop after this many records (0: no limit)");
  cmd->add_option("--max-bytes", o->max_bytes, "Shorten keys and values to this many bytes in text (0: in full)")
      ->default_val(32);
  cmd->add_option("--mode", o->mode,
                  "Recovery mode: strict, tolerate-torn-tail (default), point-in-time (stop quietly at damage), "
                  "salvage (skip damage)")
      ->default_str("tolerate-torn-tail");
  reg.Add(cmd, [o] { return RunDump(*o); });
}

namespace {
const CommandRegistrar kRegister{20, RegisterDump};
}  // namespace

}  // namespace walcut::cli
