#include "walfmt/source.h"

#include "walfmt/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <zstd.h>

namespace walfmt {
namespace {

std::string Errno(const char* what, const std::string& path) {
  return fmt::format("{}: {}: {}", path, what, std::strerror(errno));
}

// Drop mapped pages every this many bytes of progress, so a long scan keeps a
// small resident set (file-backed pages stay in the page cache).
constexpr uint64_t kReleaseStepBytes = 8u << 20;

class MmapSource final : public ByteSource {
 public:
  MmapSource(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}
  ~MmapSource() override {
    if (base_ != nullptr && size_ > 0) munmap(const_cast<uint8_t*>(base_), size_);
  }
  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    if (offset >= size_) {
      got = 0;
      p = nullptr;
      return Status::Ok();
    }
    p = base_ + offset;
    got = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    return Status::Ok();
  }
  void Release(uint64_t offset) override {
    static const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (offset < released_ + kReleaseStepBytes) return;
    const uint64_t end = offset / kPage * kPage;
    madvise(const_cast<uint8_t*>(base_) + released_, end - released_, MADV_DONTNEED);
    released_ = end;
  }
  std::optional<uint64_t> size() const override { return size_; }
  bool Contiguous(const uint8_t*& base, uint64_t& size) const override {
    base = base_;
    size = size_;
    return true;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t released_ = 0;
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
  std::optional<uint64_t> size() const override { return d_.size(); }
  bool Contiguous(const uint8_t*& base, uint64_t& size) const override {
    base = d_.data();
    size = d_.size();
    return true;
  }

 private:
  std::span<const uint8_t> d_;
};

// Streams a zstd frame through a sliding window of decompressed bytes.
class ZstdSource final : public ByteSource {
 public:
  // Input comes either from a file descriptor (owned) or from memory.
  ZstdSource(int fd, std::string path) : fd_(fd), path_(std::move(path)) { in_buf_.resize(ZSTD_DStreamInSize()); }
  explicit ZstdSource(std::span<const uint8_t> mem) : mem_(mem), path_("<memory>") {}
  ~ZstdSource() override {
    if (fd_ >= 0) close(fd_);
    ZSTD_freeDCtx(dctx_);
  }

  Status Get(uint64_t offset, size_t n, const uint8_t*& p, size_t& got) override {
    if (offset < win_off_) return Status::Internal("zstd source asked to go backwards");
    if (offset + n > win_off_ + win_len_) {
      // Slide: keep only the bytes from `offset` on.
      const uint64_t drop = std::min<uint64_t>(offset - win_off_, win_len_);
      if (drop > 0) {
        std::memmove(win_.data(), win_.data() + drop, win_len_ - drop);
        win_len_ -= drop;
        win_off_ += drop;
      }
      const uint64_t need = offset + n - win_off_;
      if (win_.size() < need + kChunk) win_.resize(need + kChunk);
      while (win_len_ < need && !eof_) {
        Status st = Fill();
        if (!st.ok()) return st;
      }
    }
    if (offset >= win_off_ + win_len_) {
      got = 0;
      p = nullptr;
      return Status::Ok();
    }
    p = win_.data() + (offset - win_off_);
    got = static_cast<size_t>(std::min<uint64_t>(n, win_off_ + win_len_ - offset));
    return Status::Ok();
  }
  std::optional<uint64_t> size() const override { return std::nullopt; }

 private:
  static constexpr size_t kChunk = 1u << 20;

  // Decompresses more bytes into the window's free space.
  Status Fill() {
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
    ZSTD_outBuffer out{win_.data() + win_len_, win_.size() - win_len_, 0};
    const size_t before_in = in_.pos;
    const size_t rc = ZSTD_decompressStream(dctx_, &out, &in_);
    if (ZSTD_isError(rc)) {
      return Status::Corruption(fmt::format("{}: zstd: {} (compressed bytes read so far: {})", path_,
                                            ZSTD_getErrorName(rc), compressed_read_));
    }
    win_len_ += out.pos;
    if (win_off_ + win_len_ > kMaxSegmentBytes) {
      return Status::Corruption(fmt::format(
          "{}: decompresses to more than {} bytes, the most a segment may hold (compressed bytes read: {})", path_,
          kMaxSegmentBytes, compressed_read_));
    }
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
        return Status::Corruption(fmt::format("{}: zstd frame cut short after {} compressed bytes", path_,
                                              compressed_read_));
      }
      if (compressed_read_ == 0) {
        return Status::Corruption(fmt::format("{}: empty file, not a zstd frame", path_));
      }
    }
    return Status::Ok();
  }

  int fd_ = -1;
  std::span<const uint8_t> mem_;
  std::string path_;
  ZSTD_DCtx* dctx_ = nullptr;
  std::vector<uint8_t> in_buf_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool in_eof_ = false;
  bool eof_ = false;
  bool frame_done_ = false;
  uint64_t compressed_read_ = 0;
  std::vector<uint8_t> win_;
  uint64_t win_off_ = 0;
  uint64_t win_len_ = 0;
};

}  // namespace

Result<std::unique_ptr<ByteSource>> OpenSegmentSource(const std::string& path, bool compressed) {
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
  if (compressed) {
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::unique_ptr<ByteSource>(new ZstdSource(fd, path));
  }
  const auto size = static_cast<uint64_t>(sb.st_size);
  const uint8_t* base = nullptr;
  if (size > 0) {
    void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      Status st = Status::Io(Errno("mmap", path));
      close(fd);
      return st;
    }
    madvise(m, size, MADV_SEQUENTIAL);
    base = static_cast<const uint8_t*>(m);
  }
  close(fd);  // the mapping keeps the file open
  return std::unique_ptr<ByteSource>(new MmapSource(base, size));
}

std::unique_ptr<ByteSource> MemorySource(std::span<const uint8_t> data, bool zstd_frame) {
  if (zstd_frame) return std::make_unique<ZstdSource>(data);
  return std::make_unique<MemSource>(data);
}

Result<std::string> ZstdCompress(std::span<const uint8_t> data, int level) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) return Status::Internal(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
  out.resize(n);
  return out;
}

}  // namespace walfmt
