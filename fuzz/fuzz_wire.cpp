// The node protocol's decoders (node/wire.h): wire::Decode on any payload,
// and the streaming FrameReader on any stream, fed in chunks.
//
// Input: byte 0 picks the mode, the rest is the bytes.
//   even: one payload. What Decode accepts re-encodes to exactly its bytes
//         (one encoding per message) and equals its own decoding again; what
//         it refuses gets one line of kCorruption starting "wire: ".
//   odd:  a stream (frames of at most 1024 payload bytes), fed in chunks of
//         (byte 0 >> 1) + 1 bytes with a Next after each, against the same
//         stream fed at once: the same frames and the same error. Each frame
//         is the stream's bytes at its offset (AppendFrame of its payload
//         gives them back), and its payload goes through the checks above.
//         Finish is Ok exactly when the frames used up the stream.
//
// fuzz.sh: -max_len=4096
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "check.h"
#include "node/wire.h"

namespace wire = walcut::node::wire;

namespace {

constexpr uint32_t kLimit = 1024;

void CheckPayload(std::string_view payload) {
  auto m = wire::Decode(payload);
  if (!m.ok()) {
    const auto& e = m.status().message();
    Check(m.status().code() == walfmt::ErrorCode::kCorruption, e);
    Check(e.rfind("wire: ", 0) == 0 && e.find('\n') == std::string::npos, e);
    return;
  }
  const std::string again = wire::Encode(*m);
  Check(again == payload, wire::KindName(wire::KindOf(*m)));
  auto twice = wire::Decode(again);
  Check(twice.ok() && *twice == *m, wire::KindName(wire::KindOf(*m)));
}

struct Read {
  std::vector<std::string> payloads;
  std::vector<uint64_t> offsets;  // of each frame in the stream
  std::optional<std::string> error;
};

// Next until it asks for more or fails.
void Drain(wire::FrameReader& r, Read& out) {
  while (!out.error) {
    const uint64_t at = r.offset();
    auto n = r.Next();
    if (!n.ok()) {
      const auto& e = n.status().message();
      Check(n.status().code() == walfmt::ErrorCode::kCorruption, e);
      Check(e.rfind("wire: stream byte ", 0) == 0 && e.find('\n') == std::string::npos, e);
      out.error = e;
      return;
    }
    if (!n->has_value()) return;
    Check(r.offset() == at + wire::kFrameHeaderBytes + (*n)->size(), "offset after a frame");
    out.offsets.push_back(at);
    out.payloads.push_back(std::move(**n));
  }
}

void CheckStream(std::string_view stream, size_t chunk) {
  wire::FrameReader whole(kLimit);
  whole.Feed(stream);
  Read all;
  Drain(whole, all);

  wire::FrameReader pieces(kLimit);
  Read some;
  for (size_t at = 0; at < stream.size() && !some.error; at += chunk) {
    pieces.Feed(stream.substr(at, chunk));
    Drain(pieces, some);
  }
  Check(some.payloads == all.payloads && some.error == all.error, "chunked reading differs");

  uint64_t end = 0;
  for (size_t i = 0; i < all.payloads.size(); ++i) {
    Check(all.offsets[i] == end, "frames follow each other");
    std::string frame;
    Check(wire::AppendFrame(frame, all.payloads[i], kLimit).ok(), "a payload within the limit");
    Check(stream.substr(all.offsets[i], frame.size()) == frame, "the frame is its bytes");
    end += frame.size();
    CheckPayload(all.payloads[i]);
  }
  const auto finish = whole.Finish();
  if (all.error) {
    Check(finish.message() == *all.error, "Finish repeats the error");
  } else {
    Check(finish.ok() == (end == stream.size()), finish.message());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    CheckPayload(bytes);
  } else {
    CheckStream(bytes, (data[0] >> 1) + 1u);
  }
  return 0;
}
