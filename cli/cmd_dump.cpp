// walcut dump PATH...: one line per record, in the spirit of pg_waldump.
//
// Speed (issue 2: at least 3 M records/s of text). Lines are written into raw
// char buffers, for the common record types straight from the payload bytes
// (no decoded Record, no allocation per record). With more than one job,
// worker threads read and format segments ahead of the main thread, which
// writes their output in WAL order; "Ordered parallel output" below says why
// the bytes are the same as those of a sequential read.
#include <cerrno>
#include <system_error>
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/inputs.h"
#include "cli/output.h"
#include "walfmt/record_text.h"

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
  unsigned jobs = 0;
};

// Buffered stdout: one fwrite per 64 KiB, not one per record. A write that
// fails stops the dump at once (main reports "cannot write output").
class Out {
 public:
  static constexpr size_t kFlushBytes = 64u << 10;
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
};

// One node as its lines and problems name it.
struct NodeCtx {
  const NodeWal* wal = nullptr;
  // "node 3 " ("node ? " when the id is unknown): at most 16 bytes for a
  // 32-bit id, kept in a 16-byte array so that one fixed-size copy writes it.
  std::array<char, 16> prefix{};
  size_t prefix_len = 0;
};

NodeCtx MakeNodeCtx(const NodeWal& n) {
  NodeCtx c;
  c.wal = &n;
  const std::string s = n.node_id ? fmt::format("node {} ", *n.node_id) : std::string("node ? ");
  c.prefix_len = std::min(s.size(), c.prefix.size());  // "node 4294967295 " is 16
  std::memcpy(c.prefix.data(), s.data(), c.prefix_len);
  return c;
}

// --- Raw line writing. The writers write through a pointer into room the
// caller reserved from the bounds; nothing checks or allocates per field.
// Fixed-size copies of spaces followed by the digits keep the padding free
// of calls.

// Room for a text line but its description: node prefix (16), LSN (up to 33,
// padded to 18), type (11), length (10), tx (up to 31), separators, newline;
// and slack for the fixed-size copies below, which may write past the end of
// a short field.
constexpr size_t kLineFixedBound = 160;

char* Begin(fmt::memory_buffer& b, size_t bound) {
  const size_t old = b.size();
  b.resize(old + bound);  // fmt's buffer does not initialise what it adds
  return b.data() + old;
}
void End(fmt::memory_buffer& b, const char* p) { b.resize(static_cast<size_t>(p - b.data())); }

int HexDigits(uint64_t v) { return v == 0 ? 1 : (67 - std::countl_zero(v)) / 4; }
int DecimalDigits(uint64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}
// Writes `v` in `digits` hex (upper case) or decimal digits, ending at p + digits.
void PutHex(char* p, uint64_t v, int digits) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  for (int i = digits - 1; i >= 0; --i) {
    p[i] = kDigits[v & 0xF];
    v >>= 4;
  }
}
void PutDecimal(char* p, uint64_t v, int digits) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  int i = digits;
  while (v >= 100) {
    const auto r = static_cast<size_t>(v % 100) * 2;
    v /= 100;
    p[--i] = kPairs[r + 1];
    p[--i] = kPairs[r];
  }
  if (v >= 10) {
    p[--i] = kPairs[v * 2 + 1];
    p[--i] = kPairs[v * 2];
  } else {
    p[--i] = static_cast<char>('0' + v);
  }
}

// Type names padded to their 11-column field.
constexpr size_t kTypeWidth = 11;
const std::array<std::array<char, 16>, walfmt::kMaxKnownRecordType + 2> kPaddedTypeNames = [] {
  std::array<std::array<char, 16>, walfmt::kMaxKnownRecordType + 2> t{};
  for (size_t i = 0; i < t.size(); ++i) {
    t[i].fill(' ');
    const std::string_view name = walfmt::RecordTypeName(static_cast<walfmt::RecordType>(i));  // last: UNKNOWN
    std::memcpy(t[i].data(), name.data(), std::min(name.size(), t[i].size()));
  }
  return t;
}();

// "node N  SEG/OFFSET TYPE        len    LEN  tx NODE:SEQ    " up to the
// description (pg_waldump's columns). The same bytes as the padded fields
// of the first version: LSN right-aligned in 18 columns ("%X/%08X"), type
// left-aligned in 11, length right-aligned in 6, tx left-aligned in 12.
char* WritePrefix(char* p, const NodeCtx& n, const walfmt::RecordView& v, const walfmt::TxId* t) {
  static constexpr char kSpaces[] = "                                ";  // 32
  std::memcpy(p, n.prefix.data(), 16);
  p += n.prefix_len;
  // LSN.
  const int seg_digits = HexDigits(v.lsn.segment);
  const int off_digits = std::max(8, HexDigits(v.lsn.offset));
  const size_t lsn_len = static_cast<size_t>(seg_digits + 1 + off_digits);
  std::memcpy(p, kSpaces, 18);
  if (lsn_len < 18) p += 18 - lsn_len;
  PutHex(p, v.lsn.segment, seg_digits);
  p[seg_digits] = '/';
  PutHex(p + seg_digits + 1, v.lsn.offset, off_digits);
  p += lsn_len;
  *p++ = ' ';
  // Type (UNKNOWN never reaches here: the reader skips unknown types).
  const auto code = std::min<size_t>(static_cast<uint16_t>(v.type), walfmt::kMaxKnownRecordType + 1);
  std::memcpy(p, kPaddedTypeNames[code].data(), 16);
  p += std::max(kTypeWidth, walfmt::RecordTypeName(v.type).size());
  // Length.
  std::memcpy(p, " len       ", 11);
  p += 5;
  const int len_digits = DecimalDigits(v.size());
  if (len_digits < 6) p += 6 - len_digits;
  PutDecimal(p, v.size(), len_digits);
  p += len_digits;
  // Transaction.
  std::memcpy(p, "  tx ", 5);
  p += 5;
  std::memcpy(p, kSpaces, 16);
  if (t != nullptr) {
    const int a = DecimalDigits(t->node);
    const int b = DecimalDigits(t->seq);
    PutDecimal(p, t->node, a);
    p[a] = ':';
    PutDecimal(p + a + 1, t->seq, b);
    p += std::max(12, a + 1 + b);
  } else {
    *p = '-';
    p += 12;
  }
  *p++ = ' ';
  return p;
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

LineFormatter::Outcome LineFormatter::Format(const NodeCtx& n, const walfmt::RecordView& v, fmt::memory_buffer& out,
                                             walfmt::Problem& bad) {
  if (!(v.lsn < f_.to)) return Outcome::kStop;
  const auto code = static_cast<uint16_t>(v.type);
  if (!f_.all_types && (code >= f_.type_ok.size() || !f_.type_ok[code])) return Outcome::kSkip;
  if (f_.format == Format::kText) {
    // Hot paths, straight from the payload bytes: TX_DATA and the records
    // that end a transaction step are nearly all of a WAL. The parsers accept
    // exactly what DecodePayload accepts; anything else takes the general
    // path below, which reports it.
    if (v.type == walfmt::RecordType::kTxData && walfmt::ParseTxData(v.payload, tx_, views_)) {
      if (f_.by_tx && !(tx_ == f_.tx)) return Outcome::kSkip;
      if (f_.by_key && std::none_of(views_.begin(), views_.end(),
                                    [&](const walfmt::WriteView& w) { return w.key == f_.key; })) {
        return Outcome::kSkip;
      }
      char* p = Begin(out, kLineFixedBound + walfmt::WritesDescriptionBound(views_, f_.max_bytes));
      p = WritePrefix(p, n, v, &tx_);
      p = walfmt::WriteWritesDescription(p, views_, f_.max_bytes);
      *p++ = '\n';
      End(out, p);
      return Outcome::kLine;
    }
    if (walfmt::ParseTxOutcome(v.type, v.payload, outcome_)) {
      if (f_.by_tx && !(outcome_.tx == f_.tx)) return Outcome::kSkip;
      if (f_.by_key) return Outcome::kSkip;  // only TX_DATA writes keys
      char* p = Begin(out, kLineFixedBound + walfmt::TxOutcomeDescriptionBound(outcome_));
      p = WritePrefix(p, n, v, &outcome_.tx);
      p = walfmt::WriteTxOutcomeDescription(p, v.type, outcome_);
      *p++ = '\n';
      End(out, p);
      return Outcome::kLine;
    }
  }
  auto rec = walfmt::DecodePayload(v.type, v.payload);
  if (!rec.ok()) {
    bad = walfmt::Problem{};
    bad.kind = walfmt::ProblemKind::kBadPayload;
    bad.node = n.wal->node_id.value_or(0);
    bad.node_known = n.wal->node_id.has_value();
    bad.file = n.wal->label;
    bad.segment = v.lsn.segment;
    bad.offset = v.lsn.offset;
    bad.detail = rec.status().message();
    return Outcome::kBadPayload;
  }
  if (f_.by_tx && !MentionsTx(*rec, f_.tx)) return Outcome::kSkip;
  if (f_.by_key) {
    const auto* d = std::get_if<walfmt::TxData>(&*rec);
    if (d == nullptr) return Outcome::kSkip;
    bool hit = false;
    for (const auto& w : d->writes) hit = hit || w.key == f_.key;
    if (!hit) return Outcome::kSkip;
  }
  const walfmt::TxId* t = TxOf(*rec);
  if (f_.format == Format::kJson) {
    const NodeWal& w = *n.wal;
    nlohmann::json j{{"schema", kDumpSchema},
                     {"node", w.node_id ? nlohmann::json(*w.node_id) : nlohmann::json(nullptr)},
                     {"lsn", v.lsn.ToString()},
                     {"segment", v.lsn.segment},
                     {"offset", v.lsn.offset},
                     {"type", std::string(walfmt::RecordTypeName(v.type))},
                     {"length", v.size()},
                     {"tx", t ? nlohmann::json(t->ToString()) : nlohmann::json(nullptr)},
                     {"record", RecordJson(*rec)}};
    const std::string s = j.dump();
    out.append(s.data(), s.data() + s.size());
    out.push_back('\n');
    return Outcome::kLine;
  }
  desc_.clear();
  walfmt::AppendDescription(desc_, *rec, f_.max_bytes);
  char* p = Begin(out, kLineFixedBound + desc_.size());
  p = WritePrefix(p, n, v, t);
  std::memcpy(p, desc_.data(), desc_.size());
  p += desc_.size();
  *p++ = '\n';
  End(out, p);
  return Outcome::kLine;
}

// --- Ordered parallel output.
//
// The sequential dump is walfmt::ReadNodeWal per node with a visitor that
// prints. Reading a segment depends on its predecessor in only two ways: the
// identity the predecessor's header sets (node, cluster) and the continuity
// check between the two, both decided from the segment's header before any
// record is read. So a worker reads a segment ahead without its predecessor
// ("speculatively"): it publishes the header first, then formats the records
// into chunks, each chunk carrying the problems reported while it was filled
// at their positions in the text. The main thread takes the segments in WAL
// order and, once the predecessor is done, checks the header against it the
// way ScanSegment would. When nothing would be reported (the normal case),
// the worker's text and problems are exactly those of the sequential read and
// are written; otherwise (a bad or unreadable header, a foreign or
// discontinuous segment: damage) the main thread drops them and reads that
// segment itself with the sequential code. --limit cuts a chunk after its
// N-th line (one line per record: text escapes every control byte, JSON is
// one object per line) and drops the problems after that point, as stopping
// the sequential read there would.
//
// Memory is bounded: at most `jobs` segments are in flight, and each holds
// at most kSegmentBudgetBytes / jobs of text before its worker waits for the
// main thread to reach it. Two workers keep both cores busy as long as the
// segment after the one being written can run ahead by half its text: 12 MiB
// covers the ~19 MiB of text of a 16 MiB segment at the default --max-bytes;
// with longer lines the second worker waits part of the time.

constexpr size_t kChunkBytes = 1u << 20;           // a chunk is handed over past this size
constexpr size_t kSegmentBudgetBytes = 24u << 20;  // text buffered ahead, all segments together

struct Chunk {
  fmt::memory_buffer text;
  std::vector<std::pair<size_t, walfmt::Problem>> problems;  // each reported after text[0, first)
};

struct Item {
  size_t node_pos = 0;  // in the dump's node list
  size_t seg = 0;       // in that node's segment list
  bool is_last = false;
  // Below: guarded by Pipeline::mu_.
  bool header_known = false;  // the worker opened the file and read its header (or could not)
  bool speculative = false;   // the header is intact: the worker reads the records
  walfmt::SegmentHeader header;
  std::deque<std::unique_ptr<Chunk>> chunks;
  size_t queued_bytes = 0;
  bool done = false;  // no more chunks; `scan` is set when speculative
  std::exception_ptr error;  // the worker failed (header_known and done are set)
  walfmt::SegmentScan scan;
  std::atomic<bool> cancelled{false};
};

class Pipeline {
 public:
  Pipeline(std::vector<std::unique_ptr<Item>>& items, const std::vector<NodeCtx>& nodes, const Filter& f,
           walfmt::RecoveryMode mode, unsigned jobs)
      : items_(items), nodes_(nodes), f_(f), mode_(mode), jobs_(jobs),
        item_budget_(std::max<size_t>(kSegmentBudgetBytes / jobs, kChunkBytes)) {
    for (unsigned j = 0; j < jobs_; ++j) threads_.emplace_back([this] { Work(); });
  }
  ~Pipeline() { Shutdown(); }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The main thread is at item `i`: workers may start items up to i + jobs.
  void SetHead(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    head_ = i;
    work_cv_.notify_all();
  }
  // Waits for the worker to read item i's header; false when it could not
  // (the main thread then reads the segment itself).
  bool WaitHeader(size_t i, walfmt::SegmentHeader& h) {
    std::unique_lock<std::mutex> lock(mu_);
    Item& it = *items_[i];
    main_cv_.wait(lock, [&] { return it.header_known; });
    if (it.error) std::rethrow_exception(it.error);
    h = it.header;
    return it.speculative;
  }
  // The next chunk of item i, in order; nullptr once the item is done.
  std::unique_ptr<Chunk> Next(size_t i) {
    std::unique_lock<std::mutex> lock(mu_);
    Item& it = *items_[i];
    main_cv_.wait(lock, [&] { return !it.chunks.empty() || it.done; });
    if (it.error) std::rethrow_exception(it.error);
    if (it.chunks.empty()) return nullptr;
    std::unique_ptr<Chunk> c = std::move(it.chunks.front());
    it.chunks.pop_front();
    it.queued_bytes -= c->text.size();
    work_cv_.notify_all();
    return c;
  }
  walfmt::SegmentScan TakeScan(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(items_[i]->scan);
  }
  void Recycle(std::unique_ptr<Chunk> c) {
    std::lock_guard<std::mutex> lock(mu_);
    RecycleLocked(std::move(c));
  }
  // Item i will not be written: its worker stops at the next record.
  void Cancel(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    Item& it = *items_[i];
    it.cancelled.store(true, std::memory_order_relaxed);
    while (!it.chunks.empty()) {
      RecycleLocked(std::move(it.chunks.front()));
      it.chunks.pop_front();
    }
    it.queued_bytes = 0;
    work_cv_.notify_all();
  }
  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
      for (auto& it : items_) it->cancelled.store(true, std::memory_order_relaxed);
      work_cv_.notify_all();
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void RecycleLocked(std::unique_ptr<Chunk> c) {
    // Keep a few ordinary chunks; one grown by a huge line goes back to the heap.
    if (pool_.size() < jobs_ + 2 && c->text.capacity() <= 2 * kChunkBytes) {
      c->text.clear();
      c->problems.clear();
      pool_.push_back(std::move(c));
    }
  }
  std::unique_ptr<Chunk> TakeChunkLocked() {
    if (pool_.empty()) {
      auto c = std::make_unique<Chunk>();
      c->text.reserve(kChunkBytes + (64u << 10));
      return c;
    }
    std::unique_ptr<Chunk> c = std::move(pool_.back());
    pool_.pop_back();
    return c;
  }
  std::unique_ptr<Chunk> TakeChunk() {
    std::lock_guard<std::mutex> lock(mu_);
    return TakeChunkLocked();
  }

  void Work() {
    LineFormatter fmt(f_);
    for (;;) {
      size_t i = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return shutdown_ || next_ >= items_.size() || next_ < head_ + jobs_; });
        if (shutdown_ || next_ >= items_.size()) return;
        i = next_++;
      }
      try {
        Read(*items_[i], fmt);
      } catch (...) {
        // The main thread rethrows it when it reaches the item (an escaping
        // exception would end the process without an error line).
        std::lock_guard<std::mutex> lock(mu_);
        Item& it = *items_[i];
        it.error = std::current_exception();
        it.header_known = true;
        it.done = true;
        main_cv_.notify_all();
      }
    }
  }

  // Hands a full chunk over; waits while the item is over its budget.
  std::unique_ptr<Chunk> Hand(Item& it, std::unique_ptr<Chunk> c) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!it.cancelled.load(std::memory_order_relaxed)) {
      it.queued_bytes += c->text.size();
      it.chunks.push_back(std::move(c));
      main_cv_.notify_all();
    } else {
      RecycleLocked(std::move(c));
    }
    work_cv_.wait(lock, [&] { return it.cancelled.load(std::memory_order_relaxed) || it.queued_bytes < item_budget_; });
    return TakeChunkLocked();
  }

  void Finish(Item& it, bool speculative, const walfmt::SegmentHeader& h) {
    std::lock_guard<std::mutex> lock(mu_);
    it.header_known = true;
    it.speculative = speculative;
    it.header = h;
    it.done = true;
    main_cv_.notify_all();
  }

  void Read(Item& it, LineFormatter& fmt) {
    const NodeCtx& n = nodes_[it.node_pos];
    const walfmt::SegmentFile& file = n.wal->wal.segments[it.seg];
    walfmt::SegmentHeader h;
    if (it.cancelled.load(std::memory_order_relaxed)) return Finish(it, false, h);
    auto opened = walfmt::OpenSegmentSource(file.path, file.compressed);
    if (!opened.ok()) return Finish(it, false, h);
    std::unique_ptr<walfmt::ByteSource> src = std::move(*opened);
    const uint8_t* p = nullptr;
    size_t got = 0;
    walfmt::HeaderError herr;
    if (!src->Get(0, walfmt::kSegmentHeaderSize, p, got).ok() || !walfmt::DecodeSegmentHeader({p, got}, h, herr)) {
      return Finish(it, false, h);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      it.header_known = true;
      it.speculative = true;
      it.header = h;
      main_cv_.notify_all();
    }
    walfmt::ScanOptions so;  // as ReadNodeWal's, but without the predecessor's identity
    so.mode = mode_;
    so.is_last = it.is_last;
    std::unique_ptr<Chunk> c = TakeChunk();
    walfmt::Problem bad;
    auto visit = [&](const walfmt::RecordView& v) -> bool {
      if (it.cancelled.load(std::memory_order_relaxed)) return false;
      if (v.lsn < f_.from) return true;
      switch (fmt.Format(n, v, c->text, bad)) {
        case LineFormatter::Outcome::kStop: return false;
        case LineFormatter::Outcome::kSkip: return true;
        case LineFormatter::Outcome::kBadPayload:
          c->problems.emplace_back(c->text.size(), bad);
          return true;
        case LineFormatter::Outcome::kLine: break;
      }
      if (c->text.size() >= kChunkBytes) c = Hand(it, std::move(c));
      return true;
    };
    auto sink = [&](const walfmt::Problem& pr) { c->problems.emplace_back(c->text.size(), pr); };
    walfmt::SegmentScan s = walfmt::ScanSegment(*src, file, so, visit, sink);
    src.reset();  // unmap before the next segment is opened
    std::lock_guard<std::mutex> lock(mu_);
    if (!it.cancelled.load(std::memory_order_relaxed) && (c->text.size() > 0 || !c->problems.empty())) {
      it.queued_bytes += c->text.size();
      it.chunks.push_back(std::move(c));
    } else {
      RecycleLocked(std::move(c));
    }
    it.scan = std::move(s);
    it.done = true;
    main_cv_.notify_all();
  }

  std::vector<std::unique_ptr<Item>>& items_;
  const std::vector<NodeCtx>& nodes_;
  const Filter& f_;
  const walfmt::RecoveryMode mode_;
  const unsigned jobs_;
  const size_t item_budget_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // workers wait here: for an item, or for room
  std::condition_variable main_cv_;  // the main thread waits here: for a header, a chunk, the end
  size_t head_ = 0;
  size_t next_ = 0;
  bool shutdown_ = false;
  std::vector<std::unique_ptr<Chunk>> pool_;
  std::vector<std::thread> threads_;
};

// Whether reading a segment with the header `h` after `prev` reports nothing
// that reading it without `prev` would not: the checks ScanSegment makes with
// the predecessor's identity and CheckContinuity.
bool FollowsQuietly(const walfmt::SegmentScan* prev, const walfmt::SegmentFile& file, const walfmt::SegmentHeader& h) {
  if (prev == nullptr) return true;
  if (prev->header_ok && (h.node_id != prev->header.node_id || h.cluster_id != prev->header.cluster_id)) return false;
  walfmt::SegmentScan cur;
  cur.file = file;
  cur.header = h;
  cur.header_ok = true;
  bool reported = false;
  const bool ok = walfmt::CheckContinuity(*prev, cur, [&](const walfmt::Problem&) { reported = true; });
  return ok && !reported;
}

int RunDump(const DumpOptions& o) {
  // --- Arguments.
  Filter f;
  for (const std::string& t : o.types) {
    walfmt::RecordType rt;
    if (!walfmt::ParseRecordType(t, rt)) {
      PrintError(fmt::format("--type {}: unknown record type (known: tx_data, tx_prepare, tx_commit, tx_rollback, "
                             "cut_start, cut_finish, cut_abort, snapshot, node_start)",
                             t));
      return kExitUsage;
    }
    f.all_types = false;
    f.type_ok[static_cast<uint16_t>(rt)] = true;
  }
  if (!o.tx.empty() && !walfmt::TxId::Parse(o.tx, f.tx)) {
    PrintError(fmt::format("--tx {}: expected NODE:SEQ, e.g. 1:4711", o.tx));
    return kExitUsage;
  }
  f.by_tx = !o.tx.empty();
  f.by_key = !o.key.empty();
  f.key = o.key;
  if (!o.from.empty()) {
    auto l = walfmt::Lsn::Parse(o.from);
    if (!l) {
      PrintError(fmt::format("--from {}: expected a position SEGMENT/OFFSET in hex, e.g. 3/0001F2A0", o.from));
      return kExitUsage;
    }
    f.from = *l;
  }
  if (!o.to.empty()) {
    auto l = walfmt::Lsn::Parse(o.to);
    if (!l) {
      PrintError(fmt::format("--to {}: expected a position SEGMENT/OFFSET in hex, e.g. 3/0001F2A0", o.to));
      return kExitUsage;
    }
    f.to = *l;
  }
  f.max_bytes = o.max_bytes;
  f.format = o.format;
  f.limit = o.limit;
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

  // --- What to read: the nodes asked for, and of each the segments
  // walfmt::ReadNodeWal would open (those wholly before --from are not).
  std::vector<NodeCtx> nodes;
  for (const NodeWal& n : in->nodes) {
    if (!o.nodes.empty() &&
        (!n.node_id || std::find(o.nodes.begin(), o.nodes.end(), *n.node_id) == o.nodes.end())) {
      continue;
    }
    nodes.push_back(MakeNodeCtx(n));
  }
  std::vector<std::unique_ptr<Item>> items;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const auto& segs = nodes[k].wal->wal.segments;
    for (size_t i = 0; i < segs.size(); ++i) {
      if (segs[i].index < f.from.segment && i + 1 < segs.size() && segs[i + 1].index <= f.from.segment) continue;
      auto it = std::make_unique<Item>();
      it->node_pos = k;
      it->seg = i;
      it->is_last = i + 1 == segs.size();
      items.push_back(std::move(it));
    }
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
  uint64_t printed = 0;
  bool limit_hit = false;

  // The sequential read of one segment, straight into `out`.
  LineFormatter line(f);
  const NodeCtx* cur = nullptr;
  walfmt::Problem bad;
  auto visit = [&](const walfmt::RecordView& v) -> bool {
    if (v.lsn < f.from) return true;
    switch (line.Format(*cur, v, out.buf(), bad)) {
      case LineFormatter::Outcome::kStop: return false;
      case LineFormatter::Outcome::kSkip: return true;
      case LineFormatter::Outcome::kBadPayload:
        report(bad);
        return true;
      case LineFormatter::Outcome::kLine: break;
    }
    out.MaybeFlush();
    if (f.limit != 0 && ++printed >= f.limit) {
      limit_hit = true;
      return false;
    }
    return true;
  };
  // A chunk read ahead: its text and problems in order, up to --limit.
  auto write_chunk = [&](const Chunk& c) {
    const std::string_view text(c.text.data(), c.text.size());
    size_t cut = text.size();
    if (f.limit != 0) {
      size_t pos = 0;
      while (pos < text.size()) {
        const void* nl = std::memchr(text.data() + pos, '\n', text.size() - pos);
        if (nl == nullptr) break;
        pos = static_cast<size_t>(static_cast<const char*>(nl) - text.data()) + 1;
        if (++printed >= f.limit) {
          limit_hit = true;
          cut = pos;
          break;
        }
      }
    }
    size_t pos = 0;
    for (const auto& [at, p] : c.problems) {
      if (limit_hit && at >= cut) break;  // after the last line: the sequential read stopped before it
      out.Write(text.substr(pos, at - pos));
      pos = at;
      report(p);
    }
    out.Write(text.substr(pos, cut - pos));
  };

  const unsigned jobs = o.jobs != 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::optional<Pipeline> pipe;
  if (jobs > 1 && items.size() > 1) pipe.emplace(items, nodes, f, mode, jobs);
  size_t k = 0;
  for (size_t np = 0; np < nodes.size() && !limit_hit; ++np) {
    // walfmt::ReadNodeWal, with each segment either taken from a worker or read here.
    cur = &nodes[np];
    std::optional<walfmt::SegmentScan> prev;
    for (; k < items.size() && items[k]->node_pos == np; ++k) {
      const walfmt::SegmentFile& file = cur->wal->wal.segments[items[k]->seg];
      walfmt::SegmentScan s;
      bool read_ahead = false;
      if (pipe) {
        pipe->SetHead(k);
        walfmt::SegmentHeader h;
        if (pipe->WaitHeader(k, h) && FollowsQuietly(prev ? &*prev : nullptr, file, h)) {
          read_ahead = true;
          while (!limit_hit) {
            std::unique_ptr<Chunk> c = pipe->Next(k);
            if (!c) break;
            write_chunk(*c);
            pipe->Recycle(std::move(c));
          }
          if (!limit_hit) s = pipe->TakeScan(k);
        } else {
          pipe->Cancel(k);
        }
      }
      if (!read_ahead) {
        walfmt::ScanOptions so;
        so.mode = mode;
        so.is_last = items[k]->is_last;
        if (prev && prev->header_ok) {
          so.expect_node = true;
          so.node_id = prev->header.node_id;
          so.expect_cluster = true;
          so.cluster_id = prev->header.cluster_id;
        }
        s = walfmt::ScanSegmentFile(file, so, visit, report, prev ? &*prev : nullptr);
      }
      if (limit_hit) break;
      const bool damaged = s.end == walfmt::SegmentEnd::kDamaged || s.end == walfmt::SegmentEnd::kBadHeader ||
                           s.end == walfmt::SegmentEnd::kIoError;
      const bool stop = s.failed || s.end == walfmt::SegmentEnd::kStopped ||
                        (damaged && mode != walfmt::RecoveryMode::kSalvage);
      prev = std::move(s);
      if (stop) break;
    }
    // The rest of this node's segments are not read (damage, --to, --limit).
    for (; k < items.size() && items[k]->node_pos == np; ++k) {
      if (pipe) pipe->Cancel(k);
    }
  }
  if (pipe) pipe->Shutdown();
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
  cmd->add_option("-j,--jobs", o->jobs,
                  "Threads reading and formatting segments ahead of the output (default: one per core; 1: none)");
  reg.Add(cmd, [o] { return RunDump(*o); });
}

namespace {
const CommandRegistrar kRegister{20, RegisterDump};
}  // namespace

}  // namespace walcut::cli
