#include "walfmt/source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <zstd.h>

#include "walfmt/chain_check.h"
#ifdef WALCUT_TEST_SEAMS
#include "walfmt/test_seams.h"
#endif

namespace walfmt {
namespace {

// Points p at [offset, offset + n) of a window holding the bytes
// [win_off, win_off + len) at buf, cut at the window's end; none (p null,
// got 0) when offset lies outside it.
void ExposeWindow(const uint8_t* buf, uint64_t win_off, uint64_t len, uint64_t offset, size_t n, const uint8_t*& p,
                  size_t& got) {
  if (offset < win_off || offset >= win_off + len) {
    p = nullptr;
    got = 0;
    return;
  }
  p = buf + (offset - win_off);
  got = static_cast<size_t>(std::min<uint64_t>(n, win_off + len - offset));
}

std::string Errno(const char* what, const std::string& path) {
  return fmt::format("{}: {}: {}", path, what, std::strerror(errno));
}

#ifdef WALCUT_TEST_SEAMS
// A test build's pread: ::pread or a test's stand-in (walfmt/test_seams.h).
std::atomic<detail::PreadFn> g_pread{&::pread};
detail::PreadFn PreadFunction() { return g_pread.load(std::memory_order_relaxed); }
#else
constexpr auto PreadFunction() { return &::pread; }
#endif

// Reads [off, off + n) of a plain file into `to`, retrying on EINTR: `got`
// is n, or less where the file ends (or where a read failed: then an error).
Status PreadAll(int fd, const std::string& path, uint8_t* to, size_t n, uint64_t off, size_t& got) {
  got = 0;
  const auto read_at = PreadFunction();
  while (got < n) {
    const ssize_t r = read_at(fd, to + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::Io(Errno("read", path));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

// --- Plain segments: a window filled by pread().
//
// Measured against a memory map on this project's VM (bench/RESULTS.md,
// "Reading with pread"): the same CPU within 4% (the copy out of the page
// cache costs about what faulting mapped pages in and out did), half the
// peak RSS, and a file that shrinks while it is read ends the read instead
// of killing the process with SIGBUS. Reads are small enough that the bytes
// just copied are still in the core's cache when the reader walks them.
constexpr size_t kReadBlock = 256u << 10;
// The window: the unread tail of the last read (at most one record) plus the
// next read. 2 MiB and aligned to it, so that the kernel can back it with one
// huge page.
constexpr size_t kWindowBytes = 2u << 20;
static_assert(kWindowBytes >= kMaxGetBytes + kReadBlock);

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using WindowBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

// One spare window per thread: the next segment read on the thread reuses the
// last one's (already faulted in, no new huge page to find).
thread_local WindowBuffer t_spare_window;

WindowBuffer TakeWindow() {
  if (t_spare_window) return std::move(t_spare_window);
  void* p = std::aligned_alloc(kWindowBytes, kWindowBytes);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, kWindowBytes, MADV_HUGEPAGE);  // a hint: without huge pages it works the same
  return WindowBuffer(static_cast<uint8_t*>(p));
}

void GiveBackWindow(WindowBuffer w) {
  if (!t_spare_window) t_spare_window = std::move(w);
}

class PreadSource final : public ByteSource {
 public:
  PreadSource(int fd, std::string path, uint64_t size)
      : fd_(fd), path_(std::move(path)), size_(size), buf_(TakeWindow()) {}
  ~PreadSource() override {
    close(fd_);
    GiveBackWindow(std::move(buf_));
  }

  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    if (n > kMaxGetBytes) return Status::Internal(fmt::format("{}: read of {} bytes at once asked for", path_, n));
    Status st = Fill(offset, n);
    if (!st.ok()) return st;
    Expose(offset, n, p, got);
    return Status::Ok();
  }
  void Window(uint64_t offset, size_t want, const uint8_t*& p, size_t& got) override {
    // A failed read leaves what the window holds; the Get of the missing
    // bytes reports the error.
    (void)Fill(offset, std::min(want, kMaxGetBytes));
    Expose(offset, kWindowBytes, p, got);
  }
  std::optional<uint64_t> size() const override { return size_; }

 private:
  uint64_t end() const { return win_off_ + len_; }

  void Expose(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) const {
    ExposeWindow(buf_.get(), win_off_, len_, offset, n, p, got);
  }

  // Makes [offset, offset + n) part of the window, or as much of it as the
  // file holds (the size it had when opened).
  Status Fill(uint64_t offset, size_t n) {
    if (offset >= win_off_ && offset + n <= end()) return Status::Ok();
    if (offset >= size_) return Status::Ok();
    // Keep what the window holds from `offset` on, moved to its start.
    size_t keep = 0;
    if (offset >= win_off_ && offset < end()) {
      keep = static_cast<size_t>(end() - offset);
      if (offset > win_off_) std::memmove(buf_.get(), buf_.get() + (offset - win_off_), keep);
    }
    win_off_ = offset;
    len_ = keep;
    const uint64_t want_end = std::min<uint64_t>(offset + n, size_);
    while (end() < want_end) {
      const uint64_t missing = want_end - end();
      const size_t chunk = static_cast<size_t>(
          std::min<uint64_t>({size_ - end(), kWindowBytes - len_, std::max<uint64_t>(kReadBlock, missing)}));
      size_t got = 0;
      const Status st = PreadAll(fd_, path_, buf_.get() + len_, chunk, end(), got);
      len_ += got;
      if (!st.ok()) return st;
      if (got < chunk) {
        size_ = end();  // the file shrank since it was opened: it ends here
        break;
      }
    }
    return Status::Ok();
  }

  int fd_;
  std::string path_;
  uint64_t size_;
  WindowBuffer buf_;
  uint64_t win_off_ = 0;  // file offset of buf_[0]
  size_t len_ = 0;        // bytes of the file in buf_
};

class MemSource final : public ByteSource {
 public:
  explicit MemSource(std::span<const uint8_t> d) : d_(d) {}
  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    if (offset >= d_.size()) {
      got = 0;
      p = nullptr;
      return Status::Ok();
    }
    p = d_.data() + offset;
    got = static_cast<size_t>(std::min<uint64_t>(n, d_.size() - offset));
    return Status::Ok();
  }
  void Window(uint64_t offset, size_t want, const uint8_t*& p, size_t& got) override {
    (void)want;
    (void)Get(offset, d_.size(), p, got);
  }
  std::optional<uint64_t> size() const override { return d_.size(); }

 private:
  std::span<const uint8_t> d_;
};

// --- Archived segments: zstd.

// Decoded bytes travel from the decoder to the reader a block at a time. A
// block has room in front of its data for the reader's unread tail of the
// block before (at most one record), so a record cut by a block boundary is
// made contiguous by copying that tail, never a whole block.
constexpr size_t kBlockPrefix = kMaxGetBytes;
constexpr size_t kBlockBytes = 512u << 10;
constexpr size_t kBlocksAhead = 2;  // decoded blocks waiting for the reader
// Those, the reader's current block and the one being decoded.
constexpr size_t kMaxBlocks = kBlocksAhead + 2;

struct Block {
  std::unique_ptr<uint8_t[]> mem{new uint8_t[kBlockPrefix + kBlockBytes]};  // not zeroed
  uint8_t* data() { return mem.get() + kBlockPrefix; }
  size_t len = 0;     // bytes at data()
  bool last = false;  // nothing follows: the data ended, or reading it failed (error)
  Status error;
  uint64_t chain_end = 0;  // the chain check's verified_end after this block (0: not checked)
};

// Spare blocks of the sources closed on this thread: the next source opened
// here takes them (their pages already faulted in) before allocating.
thread_local std::vector<std::unique_ptr<Block>> t_spare_blocks;

// What fills a BlockSource's blocks, in order: a zstd decoder, or pread() of
// a plain file.
class BlockFiller {
 public:
  virtual ~BlockFiller() = default;
  // The next block: full, or short with `last` set at the end of the data or
  // on an error.
  virtual void Fill(Block& b) = 0;
};

// A plain file read ahead: pread() of kBlockBytes at a time, from offset 0 to
// the size the file had when opened (less if it shrinks meanwhile).
class PlainFiller final : public BlockFiller {
 public:
  PlainFiller(int fd, std::string path, uint64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
  ~PlainFiller() override { close(fd_); }
  PlainFiller(const PlainFiller&) = delete;
  PlainFiller& operator=(const PlainFiller&) = delete;

  void Fill(Block& b) override {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kBlockBytes, size_ - off_));
    b.error = PreadAll(fd_, path_, b.data(), want, off_, b.len);
    off_ += b.len;
    if (b.len < want) size_ = off_;  // the file shrank since it was opened (or a read failed): it ends here
    b.last = off_ >= size_ || !b.error.ok();
  }

 private:
  int fd_;
  std::string path_;
  uint64_t size_;
  uint64_t off_ = 0;
};

// Bytes in memory handed out `step` bytes at a time (tests of the chain
// check across block edges).
class MemFiller final : public BlockFiller {
 public:
  MemFiller(std::span<const uint8_t> data, size_t step) : data_(data), step_(step) {}
  void Fill(Block& b) override {
    b.len = std::min(step_, data_.size() - off_);
    if (b.len > 0) std::memcpy(b.data(), data_.data() + off_, b.len);  // empty data may have no address
    off_ += b.len;
    b.last = off_ == data_.size();
  }

 private:
  std::span<const uint8_t> data_;
  size_t step_;
  size_t off_ = 0;
};

// The decoder: compressed input (a file or memory) in, blocks out.
class ZstdDecoder final : public BlockFiller {
 public:
  // `prefix`: bytes already read from fd (the magic of a stream), decoded first.
  ZstdDecoder(int fd, std::string path, std::string prefix = {}) : fd_(fd), path_(std::move(path)) {
    in_buf_.resize(std::max(ZSTD_DStreamInSize(), prefix.size()));
    if (!prefix.empty()) {
      std::memcpy(in_buf_.data(), prefix.data(), prefix.size());
      in_ = {in_buf_.data(), prefix.size(), 0};
      compressed_read_ = prefix.size();
    }
  }
  // `max_bytes`: the most the data may decompress to (kMaxSegmentBytes but in tests).
  explicit ZstdDecoder(std::span<const uint8_t> mem, uint64_t max_bytes = kMaxSegmentBytes)
      : mem_(mem), path_("<memory>"), max_bytes_(max_bytes) {}
  ~ZstdDecoder() override {
    if (fd_ >= 0) close(fd_);
    ZSTD_freeDCtx(dctx_);
  }
  ZstdDecoder(const ZstdDecoder&) = delete;
  ZstdDecoder& operator=(const ZstdDecoder&) = delete;

  void Fill(Block& b) override {
    b.len = 0;
    b.last = false;
    b.error = Status::Ok();
    while (b.len < kBlockBytes) {
      Status st = Step(b.data() + b.len, kBlockBytes - b.len, b.len);
      if (!st.ok()) {
        b.error = std::move(st);
        b.last = true;
        return;
      }
      if (eof_) {
        b.last = true;
        return;
      }
    }
  }

 private:
  // One call of the decoder into [out, out + room); adds what it wrote to
  // `len`. Bytes of a call that fails are dropped, but for those within the
  // limit of a call that decompresses past it.
  Status Step(uint8_t* out_ptr, size_t room, size_t& len) {
    if (dctx_ == nullptr) {
      dctx_ = ZSTD_createDCtx();
      if (dctx_ == nullptr) return Status::Internal("zstd: cannot create a decompression context");
    }
    if (in_.pos == in_.size && !in_eof_) {
      if (fd_ >= 0) {
        ssize_t r;
        do {
          r = read(fd_, in_buf_.data(), in_buf_.size());
        } while (r < 0 && errno == EINTR);
        if (r < 0) return Status::Io(Errno("read", path_));
        in_ = {in_buf_.data(), static_cast<size_t>(r), 0};
        in_eof_ = r == 0;
      } else {
        in_ = {mem_.data(), mem_.size(), 0};
        in_eof_ = true;  // the whole input is handed over at once
      }
      compressed_read_ += in_.size;
    }
    if (!header_seen_) {
      header_seen_ = true;
      if (Status st = DeclaredSize(); !st.ok()) return st;
    }
    ZSTD_outBuffer out{out_ptr, room, 0};
    const size_t before_in = in_.pos;
    const size_t rc = ZSTD_decompressStream(dctx_, &out, &in_);
    if (ZSTD_isError(rc)) {
      return Status::Corruption(fmt::format("{}: zstd: {} (compressed bytes read so far: {})", path_,
                                            ZSTD_getErrorName(rc), compressed_read_));
    }
    if (produced_ + out.pos > max_bytes_) {
      // The bytes up to the budget are handed over: the records in them are read.
      len += static_cast<size_t>(max_bytes_ - produced_);
      produced_ = max_bytes_;
      return Status::Corruption(
          fmt::format("{}: decompresses to more than {} bytes, the most a segment may hold (compressed bytes read: {})",
                      path_, max_bytes_, compressed_read_));
    }
    produced_ += out.pos;
    len += out.pos;
    // rc == 0: a frame just ended. Input consumed after that starts another
    // (concatenated frames are valid zstd), which must end too.
    if (rc == 0) {
      frame_done_ = true;
    } else if (in_.pos > before_in) {
      frame_done_ = false;
    }
    if (out.pos == 0 && in_.pos == before_in && in_.pos == in_.size && in_eof_) {
      eof_ = true;
      if (!frame_done_ && (compressed_read_ > 0)) {
        return Status::Corruption(
            fmt::format("{}: zstd frame cut short after {} compressed bytes", path_, compressed_read_));
      }
      if (compressed_read_ == 0) {
        return Status::Corruption(fmt::format("{}: empty file, not a zstd frame", path_));
      }
    }
    return Status::Ok();
  }

  // The content size the first frame's header declares, when it does: more
  // than a segment may hold is refused before decompressing anything. (A
  // frame that decompresses to more than it declares, zstd refuses itself,
  // as soon as a block passes that size.) Looked at in the first input read
  // (a frame header that does not fit in it, as after a stream's four magic
  // bytes, declares nothing here).
  Status DeclaredSize() {
    if (in_.pos != 0 || in_.size == 0) return Status::Ok();
    const unsigned long long n = ZSTD_getFrameContentSize(in_.src, in_.size);
    if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR) return Status::Ok();
    if (n > max_bytes_) {
      return Status::Corruption(
          fmt::format("{}: decompresses to {} bytes (its zstd frame header says), more than {}, the most a segment "
                      "may hold",
                      path_, n, max_bytes_));
    }
    return Status::Ok();
  }

  int fd_ = -1;
  std::span<const uint8_t> mem_;
  std::string path_;
  uint64_t max_bytes_ = kMaxSegmentBytes;
  bool header_seen_ = false;
  ZSTD_DCtx* dctx_ = nullptr;
  std::vector<uint8_t> in_buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool in_eof_ = false;
  bool eof_ = false;
  bool frame_done_ = false;
  uint64_t compressed_read_ = 0;
  uint64_t produced_ = 0;
};

// Streams data to the reader through blocks, forward only: a zstd frame, or
// a plain file read ahead. From a file, the first block is filled on the
// reader's thread (a caller that wants only the segment header starts no
// thread); from the second on, a thread fills up to kBlocksAhead blocks ahead
// while the reader parses. From memory (tests, the fuzzer) everything runs on
// the calling thread.
class BlockSource final : public ByteSource {
 public:
  // `recycle`: the blocks go to this thread's spares when the source closes
  // (never for standard input's source, which lives until exit, after the
  // thread's spares are gone).
  // `check_chain`: the filling side runs the chain check over each block
  // (a plain segment's bytes; CheckedChainEnd).
  // `inflates`: the filler is a decoder (ByteSource::Inflates).
  BlockSource(std::unique_ptr<BlockFiller> filler, bool threaded, std::optional<uint64_t> size, bool recycle,
              bool check_chain = false, bool inflates = false)
      : filler_(std::move(filler)),
        threaded_(threaded),
        size_(size),
        recycle_(recycle),
        check_chain_(check_chain),
        inflates_(inflates) {}
  ~BlockSource() override {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
      }
      free_cv_.notify_all();
      thread_.join();
    }
    if (!recycle_) return;
    for (auto& b : blocks_) {
      if (t_spare_blocks.size() < kMaxBlocks) t_spare_blocks.push_back(std::move(b));
    }
  }

  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    if (n > kMaxGetBytes) return Status::Internal(fmt::format("block source: read of {} bytes at once asked for", n));
    if (offset < floor_) return Status::Internal("block source asked to go backwards");
    floor_ = offset;
    Advance(offset, n);
    if (offset + n > win_off_ + win_len_ && !pending_.ok()) return pending_;
    Expose(offset, n, p, got);
    return Status::Ok();
  }
  void Window(uint64_t offset, size_t want, const uint8_t*& p, size_t& got) override {
    if (offset < floor_) {
      p = nullptr;
      got = 0;
      return;
    }
    floor_ = offset;
    Advance(offset, std::min(want, kMaxGetBytes));
    Expose(offset, kBlockPrefix + kBlockBytes, p, got);
  }
  std::optional<uint64_t> size() const override { return size_; }
  uint64_t CheckedChainEnd() const override { return checked_; }
  bool ChecksChain() const override { return check_chain_; }
  bool Inflates() const override { return inflates_; }

 private:
  void Expose(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) const {
    if (offset >= win_off_ + win_len_) {
      p = nullptr;
      got = 0;
      return;
    }
    p = data_ + (offset - win_off_);
    got = static_cast<size_t>(std::min<uint64_t>(n, win_off_ + win_len_ - offset));
  }

  // Takes blocks until [offset, offset + n) is in the window or the data
  // ends (then pending_ holds a decoding error, if that is why).
  void Advance(uint64_t offset, size_t n) {
    while (offset + n > win_off_ + win_len_ && !ended_) {
      Block* next = NextBlock();
      const uint64_t end = win_off_ + win_len_;
      const size_t keep = offset < end ? static_cast<size_t>(end - offset) : 0;  // < n <= kBlockPrefix
      uint8_t* start = next->data() - keep;
      if (keep > 0) std::memcpy(start, data_ + (offset - win_off_), keep);
      data_ = start;
      win_off_ = end - keep;
      win_len_ = keep + next->len;
      checked_ = next->chain_end;
      if (next->last) {
        ended_ = true;
        pending_ = next->error;
      }
      Recycle(cur_);
      cur_ = next;
    }
  }

  Block* NextBlock() {
    if (threaded_ && !started_ && decoded_inline_ > 0) Start();
    if (!started_) {
      Block* b = TakeFreeInline();
      Fill(*b);
      ++decoded_inline_;
      return b;
    }
    std::unique_lock<std::mutex> lock(mu_);
    ready_cv_.wait(lock, [&] { return !ready_.empty(); });
    Block* b = ready_.front();
    ready_.pop_front();
    lock.unlock();
    free_cv_.notify_one();
    return b;
  }

  Block* TakeFreeInline() {
    if (!free_.empty()) {
      Block* b = free_.back();
      free_.pop_back();
      return b;
    }
    blocks_.push_back(NewBlock());
    return blocks_.back().get();
  }
  static std::unique_ptr<Block> NewBlock() {
    if (t_spare_blocks.empty()) return std::make_unique<Block>();
    std::unique_ptr<Block> b = std::move(t_spare_blocks.back());
    t_spare_blocks.pop_back();
    return b;
  }

  void Recycle(Block* b) {
    if (b == nullptr) return;
    if (!started_) {
      free_.push_back(b);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(b);
    }
    free_cv_.notify_one();
  }

  // Starts the filling thread (the blocks it needs first, so that it never
  // allocates). Without a thread to be had, filling goes on inline.
  void Start() {
    while (blocks_.size() < kMaxBlocks) {
      blocks_.push_back(NewBlock());
      free_.push_back(blocks_.back().get());
    }
    try {
      thread_ = std::thread([this] { Produce(); });
      started_ = true;
    } catch (const std::system_error&) {
      threaded_ = false;
    }
  }

  // On the filling side: the next block, checked when asked.
  void Fill(Block& b) {
    filler_->Fill(b);
    b.chain_end = 0;
    if (check_chain_) {
      chain_.Feed(b.data(), b.len);
      b.chain_end = chain_.verified_end();
    }
  }

  void Produce() {
    for (;;) {
      Block* b = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        free_cv_.wait(lock, [&] { return stop_ || (!free_.empty() && ready_.size() < kBlocksAhead); });
        if (stop_) return;
        b = free_.back();
        free_.pop_back();
      }
      Fill(*b);
      const bool last = b->last;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_.push_back(b);
      }
      ready_cv_.notify_one();
      if (last) return;
    }
  }

  std::unique_ptr<BlockFiller> filler_;  // the reader's thread until Start(), the filling thread after
  bool threaded_;
  std::optional<uint64_t> size_;
  bool recycle_;
  bool check_chain_;
  bool inflates_;
  detail::ChainCheck chain_;  // the filling side's, as filler_
  bool started_ = false;
  uint64_t decoded_inline_ = 0;
  std::vector<std::unique_ptr<Block>> blocks_;

  // Shared once started.
  std::mutex mu_;
  std::condition_variable free_cv_;   // the decoder waits for a free block (or stop_)
  std::condition_variable ready_cv_;  // the reader waits for a decoded block
  std::vector<Block*> free_;
  std::deque<Block*> ready_;
  bool stop_ = false;
  std::thread thread_;

  // The reader's window: stream bytes [win_off_, win_off_ + win_len_) at data_.
  Block* cur_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t win_off_ = 0;
  uint64_t win_len_ = 0;
  bool ended_ = false;
  Status pending_;
  uint64_t floor_ = 0;    // the highest offset asked for: a stream does not go back
  uint64_t checked_ = 0;  // the window's last block's chain_end
};

// --- A stream (standard input): read() into a window, forward only.
class StreamSource final : public ByteSource {
 public:
  StreamSource(int fd, std::string path, std::string prefix)
      : fd_(fd), path_(std::move(path)), buf_(new uint8_t[kWindowBytes]) {
    std::memcpy(buf_.get(), prefix.data(), prefix.size());
    len_ = prefix.size();
  }
  ~StreamSource() override { close(fd_); }

  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    if (n > kMaxGetBytes) return Status::Internal(fmt::format("{}: read of {} bytes at once asked for", path_, n));
    if (offset < win_off_) return Status::Internal(fmt::format("{}: a stream cannot go backwards", path_));
    if (Status st = Fill(offset, n); !st.ok()) return st;
    Expose(offset, n, p, got);
    return Status::Ok();
  }
  void Window(uint64_t offset, size_t want, const uint8_t*& p, size_t& got) override {
    if (offset < win_off_ || !Fill(offset, std::min(want, kMaxGetBytes)).ok()) {
      Expose(offset, 0, p, got);
      return;
    }
    Expose(offset, kWindowBytes, p, got);
  }
  std::optional<uint64_t> size() const override { return std::nullopt; }

 private:
  uint64_t end() const { return win_off_ + len_; }
  void Expose(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) const {
    ExposeWindow(buf_.get(), win_off_, len_, offset, n, p, got);
  }
  Status Fill(uint64_t offset, size_t n) {
    if (offset + n <= end() || eof_) return Status::Ok();
    // Drop what lies before `offset` (read and dropped when it was never
    // in the window), keep the rest at the start of the window.
    if (offset >= end()) {
      win_off_ = end();
      len_ = 0;
      while (win_off_ < offset && !eof_) {
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(offset - win_off_, kWindowBytes));
        size_t r = 0;
        if (Status st = ReadSome(buf_.get(), chunk, r); !st.ok()) return st;
        win_off_ += r;
      }
      if (eof_) return Status::Ok();
    } else if (offset > win_off_) {
      const size_t keep = static_cast<size_t>(end() - offset);
      std::memmove(buf_.get(), buf_.get() + (offset - win_off_), keep);
      win_off_ = offset;
      len_ = keep;
    }
    while (end() < offset + n && !eof_) {
      size_t r = 0;
      if (Status st = ReadSome(buf_.get() + len_, kWindowBytes - len_, r); !st.ok()) return st;
      len_ += r;
    }
    return Status::Ok();
  }
  Status ReadSome(uint8_t* to, size_t room, size_t& got) {
    ssize_t r;
    do {
      r = read(fd_, to, room);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return Status::Io(Errno("read", path_));
    got = static_cast<size_t>(r);
    eof_ = r == 0;
    return Status::Ok();
  }

  int fd_;
  std::string path_;
  std::unique_ptr<uint8_t[]> buf_;
  uint64_t win_off_ = 0;
  size_t len_ = 0;
  bool eof_ = false;
};

// The one stream of standard input, and the views OpenSegmentSource hands out.
class StdinView final : public ByteSource {
 public:
  explicit StdinView(ByteSource& s) : s_(s) {}
  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override { return s_.Get(offset, n, p, got); }
  void Window(uint64_t offset, size_t want, const uint8_t*& p, size_t& got) override {
    s_.Window(offset, want, p, got);
  }
  void Release(uint64_t offset) override { s_.Release(offset); }
  bool Inflates() const override { return s_.Inflates(); }
  std::optional<uint64_t> size() const override { return std::nullopt; }

 private:
  ByteSource& s_;
};

Result<ByteSource*> Stdin() {
  static std::mutex mu;
  static std::unique_ptr<ByteSource> src;
  std::lock_guard<std::mutex> lock(mu);
  if (src) return src.get();
  const int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Status::Io(Errno("dup", kStdinPath));
  // The first four bytes tell a zstd frame from a plain segment.
  std::string magic;
  while (magic.size() < 4) {
    char c[4];
    const ssize_t r = read(fd, c, 4 - magic.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      Status st = Status::Io(Errno("read", kStdinPath));
      close(fd);
      return st;
    }
    if (r == 0) break;
    magic.append(c, static_cast<size_t>(r));
  }
  if (magic == std::string("\x28\xb5\x2f\xfd", 4)) {
    src = std::make_unique<BlockSource>(std::make_unique<ZstdDecoder>(fd, kStdinPath, std::move(magic)), true,
                                        std::nullopt, false, false, true);
  } else {
    src = std::make_unique<StreamSource>(fd, kStdinPath, std::move(magic));
  }
  return src.get();
}

}  // namespace

Result<std::unique_ptr<ByteSource>> OpenSegmentSource(const std::string& path, bool compressed, bool read_ahead) {
  if (path == kStdinPath) {
    auto s = Stdin();
    if (!s.ok()) return s.status();
    return std::unique_ptr<ByteSource>(new StdinView(**s));
  }
  // O_NONBLOCK: a FIFO (or a device) named like a segment must not block the
  // open; it is refused below as not a regular file. Reads of a regular file
  // ignore the flag.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(Errno("open", path));
    return Status::Io(Errno("open", path));
  }
  struct stat sb {};
  if (fstat(fd, &sb) != 0) {
    Status st = Status::Io(Errno("stat", path));
    close(fd);
    return st;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return Status::Io(fmt::format("{}: not a regular file", path));
  }
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // larger read-ahead when the file is not cached
  if (compressed) {
    return std::unique_ptr<ByteSource>(
        new BlockSource(std::make_unique<ZstdDecoder>(fd, path), true, std::nullopt, true, false, true));
  }
  if (read_ahead) {
    const auto size = static_cast<uint64_t>(sb.st_size);
    return std::unique_ptr<ByteSource>(
        new BlockSource(std::make_unique<PlainFiller>(fd, path, size), true, size, true, true));
  }
  return std::unique_ptr<ByteSource>(new PreadSource(fd, path, static_cast<uint64_t>(sb.st_size)));
}

uint64_t SegmentDataBytes(const std::string& path, bool compressed) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  struct stat sb {};
  uint64_t bytes = 0;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
    bytes = static_cast<uint64_t>(sb.st_size);
    if (compressed) {
      uint8_t head[18];  // ZSTD_FRAMEHEADERSIZE_MAX, the most a frame header takes
      const ssize_t r = pread(fd, head, sizeof head, 0);
      if (r > 0) {
        const unsigned long long n = ZSTD_getFrameContentSize(head, static_cast<size_t>(r));
        if (n != ZSTD_CONTENTSIZE_UNKNOWN && n != ZSTD_CONTENTSIZE_ERROR && n <= kMaxSegmentBytes) bytes = n;
      }
    }
  }
  close(fd);
  return bytes;
}

std::unique_ptr<ByteSource> MemorySource(std::span<const uint8_t> data, bool zstd_frame) {
  if (zstd_frame) return detail::ZstdMemorySource(data, kMaxSegmentBytes);
  return std::make_unique<MemSource>(data);
}

namespace detail {

#ifdef WALCUT_TEST_SEAMS
void SetPreadForTesting(PreadFn fn) { g_pread.store(fn != nullptr ? fn : &::pread, std::memory_order_relaxed); }
#endif

std::unique_ptr<ByteSource> ZstdMemorySource(std::span<const uint8_t> data, uint64_t max_bytes) {
  return std::make_unique<BlockSource>(std::make_unique<ZstdDecoder>(data, max_bytes), false, std::nullopt, false,
                                       false, true);
}

std::unique_ptr<ByteSource> CheckedMemorySource(std::span<const uint8_t> data, size_t block_bytes) {
  block_bytes = std::clamp<size_t>(block_bytes, 1, kBlockBytes);
  // Recycled: its blocks go to this thread's spares, as a file's do (and a
  // fuzzer's next input does not allocate them again).
  return std::make_unique<BlockSource>(std::make_unique<MemFiller>(data, block_bytes), false, data.size(), true, true);
}

}  // namespace detail

Result<std::string> ZstdCompress(std::span<const uint8_t> data, int level) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) return Status::Internal(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
  out.resize(n);
  return out;
}

}  // namespace walfmt
