// walcut dump's ordered parallel output: worker threads read segments ahead
// and format their records (dump_format.h) into chunks of text, which the
// main thread writes in WAL order. The comment below says why the bytes are
// the same as those of a sequential read.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/dump_format.h"
#include "walfmt/reader.h"
#include "walfmt/segment.h"
#include "walfmt/source.h"

namespace walcut::cli::dump {

// Ordered parallel output.
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
  bool done = false;         // no more chunks; `scan` is set when speculative
  std::exception_ptr error;  // the worker failed (header_known and done are set)
  walfmt::SegmentScan scan;
  std::atomic<bool> cancelled{false};
};

class Pipeline {
 public:
  Pipeline(std::vector<std::unique_ptr<Item>>& items, const std::vector<NodeCtx>& nodes, const Filter& f,
           walfmt::RecoveryMode mode, unsigned jobs)
      : items_(items),
        nodes_(nodes),
        f_(f),
        mode_(mode),
        jobs_(jobs),
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
        case LineFormatter::Outcome::kStop:
          return false;
        case LineFormatter::Outcome::kSkip:
          return true;
        case LineFormatter::Outcome::kBadPayload:
          c->problems.emplace_back(c->text.size(), bad);
          return true;
        case LineFormatter::Outcome::kLine:
          break;
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
inline bool FollowsQuietly(const walfmt::SegmentScan* prev, const walfmt::SegmentFile& file,
                           const walfmt::SegmentHeader& h) {
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

}  // namespace walcut::cli::dump
