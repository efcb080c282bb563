// The segments of an increment, compressed or copied into its staging
// directory (repo/segment_store.h).
#include "repo/segment_store.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <zstd.h>

#include "repo/manifest.h"
#include "walfmt/file_io.h"
#include "walfmt/segment.h"
#include "walfmt/strings.h"
#include "walfmt/workers.h"

namespace walcut::repo {
namespace fs = std::filesystem;
using walfmt::Status;

namespace {

unsigned JobsOr(unsigned jobs) { return jobs ? jobs : std::max(1u, std::thread::hardware_concurrency()); }

// Compresses the plain segment `path` into one zstd frame (its size in the
// header) at `level`, read in pieces of 1 MiB (compressed while still in the
// cache); `out` (grown to the bound, never zero-filled) gets the frame, `n`
// its size. A plain segment is at most the segment size
// (a single larger record: that record); its first `size` bytes at the stat
// are compressed.
Status CompressFile(ZSTD_CCtx* cctx, const std::string& path, int level, std::unique_ptr<char[]>& out, size_t& cap,
                    size_t& n) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return Status::Io(fmt::format("{}: cannot stat: {}", path, ec.message()));
  if (size > walfmt::kMaxSegmentBytes) {
    return Status::Io(
        fmt::format("{}: {} bytes, more than the {} a segment may hold", path, size, walfmt::kMaxSegmentBytes));
  }
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setPledgedSrcSize(cctx, size);
  const size_t bound = ZSTD_compressBound(size);
  if (cap < bound) {  // zstd writes straight into it
    out.reset(new char[bound]);
    cap = bound;
  }
  ZSTD_outBuffer ob{out.get(), bound, 0};
  auto zerr = [&path](size_t r) { return Status::Internal(fmt::format("{}: zstd: {}", path, ZSTD_getErrorName(r))); };
  uint64_t read = 0;
  Status st = walfmt::ReadFileChunks(path, size_t{1} << 20, [&](std::string_view piece) -> Status {
    // The segment as it was when stat'ed (an active segment a node still
    // appends to may grow meanwhile), as a whole read of that size would get.
    piece = piece.substr(0, static_cast<size_t>(std::min<uint64_t>(piece.size(), size - read)));
    read += piece.size();
    ZSTD_inBuffer in{piece.data(), piece.size(), 0};
    while (in.pos < in.size) {
      const size_t r = ZSTD_compressStream2(cctx, &ob, &in, ZSTD_e_continue);
      if (ZSTD_isError(r)) return zerr(r);
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (read != size) return Status::Io(fmt::format("{}: shrank while being read", path));
  ZSTD_inBuffer none{nullptr, 0, 0};
  for (;;) {
    const size_t r = ZSTD_compressStream2(cctx, &ob, &none, ZSTD_e_end);
    if (ZSTD_isError(r)) return zerr(r);
    if (r == 0) break;
  }
  n = ob.pos;
  return Status::Ok();
}

}  // namespace

Status StoreSegments(const std::string& stage, std::vector<SegmentTask>& tasks, int level, unsigned jobs,
                     const SegmentStored& stored) {
  std::vector<Status> errors(tasks.size(), Status::Ok());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const unsigned want = jobs ? jobs : JobsOr(0) + 1;
  const unsigned threads = static_cast<unsigned>(std::min<size_t>(want, std::max<size_t>(tasks.size(), 1)));
  walfmt::RunWorkers(threads, [&] {
    std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
    std::unique_ptr<char[]> out;
    size_t cap = 0, n = 0;
    for (size_t x; !failed.load() && (x = next.fetch_add(1)) < tasks.size();) {
      SegmentTask& t = tasks[x];
      Status st = Status::Ok();
      if (t.seg->compressed) {
        Hasher h;
        st = walfmt::CopyToNewFile(t.seg->path, walfmt::JoinPath(stage, t.rel),
                                   [&h](std::string_view p) { h.Update(p); });
        if (st.ok()) t.entry = {t.rel, h.bytes(), h.Hex()};
      } else if (!cctx) {
        st = Status::Internal("zstd: cannot create a compression context");
      } else if (st = CompressFile(cctx.get(), t.seg->path, level, out, cap, n); st.ok()) {
        const std::string_view z(out.get(), n);
        st = walfmt::WriteNewFile(walfmt::JoinPath(stage, t.rel), z);
        if (st.ok()) t.entry = {t.rel, z.size(), Xxh3Hex(z)};
      }
      if (st.ok() && stored) st = stored(t, walfmt::JoinPath(stage, t.rel));
      if (!st.ok()) {
        errors[x] = st;
        failed.store(true);
      }
    }
  });
  for (const auto& st : errors) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace walcut::repo
