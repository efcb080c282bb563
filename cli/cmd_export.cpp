// walcut export CLUSTER --from-cut A --to-cut B: the change set between two
// consistent cuts (recovery/export.h), net (every key whose value differs)
// or by transaction, as JSON lines or CSV.
#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/cut_common.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "cli/repo_access.h"
#include "recovery/export.h"
#include "repo/export_repo.h"
#include "walfmt/file_io.h"
#include "walfmt/record_text.h"
#include "walfmt/staging.h"
#include "walfmt/text_escape.h"

namespace walcut::cli {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // the fields in the order documented

struct ExportOptions {
  std::string dir;
  std::string repo;
  uint64_t from_cut = 0;
  uint64_t to_cut = 0;
  std::string format = "jsonl";
  bool net = false;
  bool by_transaction = false;
  std::vector<std::string> keys;
  int node = -1;
  std::string out;
  unsigned jobs = 0;
};

// Where the lines go: standard output, or a temporary file beside -o FILE
// renamed over it once every line is written.
class LineSink {
 public:
  walfmt::Status Open(const std::string& out) {
    if (out.empty()) {
      f_ = stdout;
      return walfmt::Status::Ok();
    }
    std::error_code ec;
    target_ = fs::absolute(out, ec).string();
    temp_ = walfmt::TempNameBeside(target_);
    walfmt::RegisterStaging(temp_);  // a signal from now on removes it
    f_ = std::fopen(temp_.c_str(), "wbx");
    if (f_ == nullptr) {
      const int err = errno;
      walfmt::RemoveStaging(temp_);
      temp_.clear();
      return walfmt::Status::Io(fmt::format("{}: cannot create: {}", out, std::strerror(err)));
    }
    return walfmt::Status::Ok();
  }
  void Line(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), f_);
    std::fputc('\n', f_);
  }
  // Standard output is checked at exit (cli/main.cpp); a file is synced and
  // renamed into place here, or removed.
  walfmt::Status Finish(const std::string& out) {
    if (temp_.empty()) return walfmt::Status::Ok();
    bool ok = std::fflush(f_) == 0 && std::ferror(f_) == 0;
    int err = ok ? 0 : errno;
    walfmt::Status st = walfmt::SyncAndClose(fileno(f_), temp_);
    std::fclose(f_);  // the descriptor is closed: this only frees the stream
    f_ = nullptr;
    if (ok && !st.ok()) ok = false;
    if (ok) st = walfmt::CommitStaging(temp_, target_);
    if (!ok || !st.ok()) {
      walfmt::RemoveStaging(temp_);
      temp_.clear();
      return st.ok() ? walfmt::Status::Io(fmt::format("{}: cannot write: {}", out, std::strerror(err != 0 ? err : EIO)))
                     : st;
    }
    temp_.clear();
    return walfmt::Status::Ok();
  }
  ~LineSink() {
    if (!temp_.empty()) {
      if (f_ != nullptr) std::fclose(f_);
      walfmt::RemoveStaging(temp_);
    }
  }

 private:
  std::FILE* f_ = nullptr;
  std::string target_, temp_;
};

// RFC 4180: a field with a comma, a double quote or a line break goes in
// double quotes, each double quote doubled. Keys and values are escaped
// first (walfmt::Printable), so no line break is left in them.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string CsvRow(std::initializer_list<std::string> fields) {
  std::string row;
  for (const auto& f : fields) {
    if (!row.empty() || &f != fields.begin()) row += ',';
    row += CsvField(f);
  }
  return row;
}

std::string Bytes(const std::string& s) { return walfmt::Printable(s, 0); }

const char* ChangeKind(const recovery::KeyChange& c) {
  return !c.old_value ? "insert" : !c.new_value ? "delete" : "update";
}

void WriteNet(const recovery::ExportResult& r, bool csv, LineSink& sink) {
  if (csv) sink.Line("node,key,change,old,new");
  for (const auto& n : r.nodes) {
    for (const auto& c : n.changes) {
      if (csv) {
        sink.Line(CsvRow({std::to_string(n.node), Bytes(c.key), ChangeKind(c), c.old_value ? Bytes(*c.old_value) : "",
                          c.new_value ? Bytes(*c.new_value) : ""}));
        continue;
      }
      json j{{"node", n.node}, {"key", Bytes(c.key)}, {"change", ChangeKind(c)}};
      j["old"] = c.old_value ? json(Bytes(*c.old_value)) : json(nullptr);
      j["new"] = c.new_value ? json(Bytes(*c.new_value)) : json(nullptr);
      sink.Line(walfmt::DumpJson(j));
    }
  }
}

void WriteByTransaction(const recovery::ExportResult& r, bool csv, LineSink& sink) {
  if (csv) sink.Line("seq,tx,tx_readable,node,op,key,value");
  uint64_t seq = 0;
  for (const auto& t : r.txs) {
    ++seq;
    if (csv) {
      for (const auto& w : t.writes) {
        const bool del = w.op == walfmt::WriteOp::kDelete;
        sink.Line(CsvRow({std::to_string(seq), t.tx.ToString(), t.tx.Readable(), std::to_string(w.node),
                          del ? "delete" : "put", Bytes(w.key), del ? "" : Bytes(w.value)}));
      }
      continue;
    }
    json nodes = json::array(), commits = json::array(), writes = json::array();
    for (const auto& [node, at] : t.commits) {
      nodes.push_back(node);
      commits.push_back({{"node", node}, {"at", at.ToString()}});
    }
    for (const auto& w : t.writes) {
      json jw{{"node", w.node}, {"op", w.op == walfmt::WriteOp::kDelete ? "delete" : "put"}, {"key", Bytes(w.key)}};
      if (w.op != walfmt::WriteOp::kDelete) jw["value"] = Bytes(w.value);
      writes.push_back(std::move(jw));
    }
    sink.Line(walfmt::DumpJson(json{{"seq", seq},
                                    {"tx", t.tx.ToString()},
                                    {"tx_readable", t.tx.Readable()},
                                    {"nodes", nodes},
                                    {"commits", commits},
                                    {"writes", writes}}));
  }
}

// The usage checks that need no file: kExitOk, or kExitUsage (printed).
int CheckArgs(const ExportOptions& o) {
  std::string bad;
  if (o.net && o.by_transaction) {
    bad = "give --net or --by-transaction, not both";
  } else if (!o.repo.empty() && !o.dir.empty()) {
    bad = "give CLUSTER or --repo REPO, not both";
  } else if (o.dir.empty() && o.repo.empty()) {
    bad = "CLUSTER is required: the cluster directory (or --repo REPO)";
  } else if (o.from_cut > o.to_cut) {
    bad = fmt::format("--from-cut {} is after --to-cut {}: the change set runs from the earlier cut to the later one",
                      o.from_cut, o.to_cut);
  } else if (const std::string p = OutputInsideInput("-o", o.out, {o.dir, o.repo}); !p.empty()) {
    bad = p;
  }
  if (bad.empty()) return kExitOk;
  PrintError(bad);
  return kExitUsage;
}

// The exit code of a refusal: a cut that is not consistent, or a WAL that
// cannot give the change set, is a finding (1); a request that names no cut
// or node of the cluster is usage (2).
int ExitForExport(const cut::ClusterCuts& cc, const ExportOptions& o, const walfmt::Status& st) {
  if (st.code() != walfmt::ErrorCode::kInvalidArgument) return ExitForStatus(st);
  if (o.node >= 0 && static_cast<size_t>(o.node) >= cc.nodes.size()) return kExitUsage;
  if (st.message().starts_with("--keys")) return kExitUsage;
  return kExitFindings;
}

recovery::ExportRequest RequestOf(const ExportOptions& o) {
  recovery::ExportRequest req;
  req.from_cut = o.from_cut;
  req.to_cut = o.to_cut;
  req.subset.prefixes = o.keys;
  if (o.node >= 0) req.node = static_cast<uint32_t>(o.node);
  req.by_transaction = o.by_transaction;
  req.net = !o.by_transaction;
  req.jobs = o.jobs;
  return req;
}

// The change set from CLUSTER's WAL; on failure `rc` is the exit code.
walfmt::Result<recovery::ExportResult> FromCluster(const ExportOptions& o, int& rc) {
  auto layout = cut::FindClusterLayout(o.dir);
  if (!layout.ok()) {
    rc = ExitForStatus(layout.status());
    return layout.status();
  }
  auto cc = LoadCuts({o.dir}, o.jobs);
  if (!cc.ok()) {
    rc = ExitForStatus(cc.status());
    return cc.status();
  }
  recovery::ExportRequest req = RequestOf(o);
  Progress progress("export", 0);
  req.progress = [&progress](uint64_t b) { progress.Update(b); };
  auto r = recovery::Export(*cc, *layout, req);
  progress.Finish();
  if (!r.ok()) rc = ExitForExport(*cc, o, r.status());
  return r;
}

// The change set from a repository's increments: a request the repository
// cannot serve (no artifact of a cut, A not in B's chain) is usage.
walfmt::Result<recovery::ExportResult> FromRepo(const ExportOptions& o, int& rc) {
  // A directory or file://PATH; any other scheme is refused, never taken
  // for a path. Export reads increments' segments where they lie, which an
  // S3 repository does not offer yet.
  const auto loc = RepoLocationOf(o.repo);
  if (!loc || loc->s3) {
    rc = kExitUsage;
    return walfmt::Status::InvalidArgument(
        loc ? fmt::format("export --repo {}: export reads a repository in a directory, not in S3 (restore --repo "
                          "reads S3; copy the artifacts into a directory to export from them)",
                          o.repo)
            : std::string());
  }
  repo::RepoExportRequest req;
  req.repo = loc->dir;
  req.exp = RequestOf(o);
  if (!o.out.empty()) {
    std::error_code ec;
    req.work = fs::absolute(o.out, ec).parent_path().string();
  }
  auto r = repo::ExportFromRepository(req);
  if (!r.ok()) rc = ExitForStatus(r.status());
  return r;
}

int RunExport(const ExportOptions& o) {
  if (const int rc = CheckArgs(o); rc != kExitOk) return rc;
  int rc = kExitOk;
  auto r = o.repo.empty() ? FromCluster(o, rc) : FromRepo(o, rc);
  if (!r.ok()) {
    if (!r.status().message().empty()) PrintError(r.status().message());  // empty: printed already
    return rc;
  }
  if (o.by_transaction && r->order == recovery::TxOrder::kConflict && !Quiet()) {
    PrintError(
        "note: two transactions committed in opposite orders on two nodes, so no order agrees with every node's "
        "commit order; the transactions are in the commit order of the writers of each key on its node");
  }
  LineSink sink;
  if (auto st = sink.Open(o.out); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  }
  const bool csv = o.format == "csv";
  if (o.by_transaction) {
    WriteByTransaction(*r, csv, sink);
  } else {
    WriteNet(*r, csv, sink);
  }
  if (auto st = sink.Finish(o.out); !st.ok()) {
    PrintError(st.message());
    return kExitIo;
  }
  return kExitOk;
}

void RegisterExport(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = root.add_subcommand(
      "export",
      "The change set between two consistent cuts A < B of a cluster: what a restore of B holds that a restore\n"
      "of A does not. --net (the default): one line per key whose value differs, with its value at A and at B\n"
      "(absent: null in JSON, an empty field and the change kind in CSV). --by-transaction: one line per\n"
      "transaction in cut B and not in cut A, with its writes, in an order consistent with every node's commit\n"
      "order when one exists, else with the commit order of every key's writers on its node; applying the\n"
      "writes in that order to a restore of A gives a restore of B. --from-cut 0 is genesis.\n"
      "Reads each node's WAL from where cut A continues to CUT_FINISH(B), and (--net) cut A's values of the\n"
      "keys written; memory holds the keys written and their values, never a whole state.\n"
      "--repo REPO: from a repository, B the cut of an increment and A (> 0) the cut of an artifact in its\n"
      "chain: the increments between them are exported from their own segments and joined.\n"
      "Exit 0 written (A == B: nothing), 1 a cut that is not consistent or a WAL that no longer holds what\n"
      "the export reads, or a damaged WAL range or artifact, 2 usage (A after B, no such cut, directory, node\n"
      "or artifact), 3 I/O error or output that cannot be written.");
  cmd->add_option("CLUSTER", o->dir, "Cluster directory (none with --repo)");
  cmd->add_option("--repo", o->repo,
                  "Export from a repository of snapshot artifacts instead of CLUSTER: B is the cut of an increment, "
                  "A the cut of an artifact in its chain");
  AddNumber(cmd, "--from-cut", o->from_cut, {0, std::numeric_limits<uint64_t>::max()},
            "Cut A, the older one; 0 is genesis")
      ->required();
  AddNumber(cmd, "--to-cut", o->to_cut, kCutIdRange, "Cut B, the newer one")->required();
  cmd->add_option(
         "--format", o->format,
         "jsonl (default): one JSON object a line; csv: RFC 4180 with a header row. Keys and values as "
         "`walcut diff --format json` prints them: printable ASCII as is, other bytes and the backslash as \\xNN")
      ->check(CLI::IsMember({"jsonl", "csv"}))
      ->type_name("jsonl|csv");
  cmd->add_flag("--net", o->net, "Every key whose value differs between A and B, with both values (the default)");
  cmd->add_flag("--by-transaction", o->by_transaction,
                "Every transaction of B that is not in A, ordered, with its writes on every node");
  cmd->add_option("--keys", o->keys, "Only the keys that start with PREFIX (repeatable): the union")
      ->type_name("PREFIX");
  AddNumber(cmd, "--node", o->node, kNodeIdRange, "Only node I (only its WAL is read)");
  cmd->add_option("-o,--output", o->out,
                  "Write to FILE (through a temporary file renamed into place; nothing is left on failure) "
                  "instead of standard output");
  AddNumber(cmd, "-j,--jobs", o->jobs, kJobsRange, "Nodes read at once (default: one per core)");
  AddProgressOptions(cmd);
  reg.Add(cmd, [o] { return RunExport(*o); });
}

const CommandRegistrar kRegister{72, RegisterExport};

}  // namespace
}  // namespace walcut::cli
