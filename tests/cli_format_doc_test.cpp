// walfmt/FORMAT.md's worked example is real: this test parses the hex dump
// and the checksum table out of the document itself, checks that the writer
// produces exactly those bytes, that every listed CRC is the CRC32C of the
// listed bytes, and that walcut reads the bytes as the document says.
#include <cstdint>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "cli_support.h"
#include "walfmt/crc32c.h"
#include "walfmt/segment.h"
#include "walfmt/writer.h"

namespace {

using walcut::test::Slurp;
using walcut::test::Spit;
using walcut::test::TempDir;
using walcut::test::Walcut;

// The text between <!-- NAME:begin --> and <!-- NAME:end --> in FORMAT.md.
std::string Section(const std::string& doc, const std::string& name) {
  const std::string begin = "<!-- " + name + ":begin -->";
  const std::string end = "<!-- " + name + ":end -->";
  const size_t a = doc.find(begin);
  const size_t b = doc.find(end);
  if (a == std::string::npos || b == std::string::npos || b < a) return {};
  return doc.substr(a + begin.size(), b - a - begin.size());
}

// Lines "OFFSET  xx xx ...  |ascii|" (hexdump -C) back into bytes; the
// offsets must follow each other.
std::string ParseHexDump(const std::string& text, std::string& error) {
  std::string bytes;
  std::istringstream in(text);
  std::string line;
  const std::regex row(R"(^\s*([0-9a-f]{8})  ((?:[0-9a-f]{2} {1,2}){1,16})\s*\|.*\|\s*$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const size_t offset = std::stoul(m[1].str(), nullptr, 16);
    if (offset != bytes.size()) {
      error = fmt::format("row at {:08x} follows {} bytes", offset, bytes.size());
      return {};
    }
    std::istringstream hex(m[2].str());
    std::string b;
    while (hex >> b) bytes.push_back(static_cast<char>(std::stoul(b, nullptr, 16)));
  }
  return bytes;
}

std::string HexDump(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 16) {
    out += fmt::format("    {:08x}  ", i);
    std::string ascii;
    for (size_t j = i; j < i + 16; ++j) {
      if (j < bytes.size()) {
        const auto c = static_cast<unsigned char>(bytes[j]);
        out += fmt::format("{:02x} ", c);
        ascii.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '.');
      } else {
        out += "   ";
      }
      if (j == i + 7) out += ' ';
    }
    out += fmt::format(" |{}|\n", ascii);
  }
  return out;
}

// The example segment, made by the real writer.
std::string WriteExample(const std::string& dir) {
  walfmt::WriterOptions o;
  o.wal_dir = dir;
  o.node_id = 0;
  o.cluster_id = 0x0123456789ABCDEFull;
  auto w = walfmt::WalWriter::Create(o, 1000);
  REQUIRE(w.ok());
  auto& wr = *w.value();
  REQUIRE(wr.Append(walfmt::NodeStart{0, 1000}).ok());
  REQUIRE(wr.Append(walfmt::TxData{{0, 1}, {{walfmt::WriteOp::kPut, "k1", "v1"}}}).ok());
  REQUIRE(wr.Append(walfmt::TxCommit{{0, 1}, 0, 1200, walfmt::kTxFlagOnePhase, {0}}).ok());
  REQUIRE(wr.Append(walfmt::CutStart{1, 1500}).ok());
  REQUIRE(wr.Append(walfmt::CutFinish{1, 1600, {}, {}}).ok());
  REQUIRE(wr.Close().ok());
  return Slurp(dir + "/0000000000000000.wal");
}

// The checksum table FORMAT.md carries for `bytes`: the segment header's,
// then each record's header and payload checksums.
std::string CrcTable(const std::string& bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  std::string out = "| bytes | stored at | what | `crc32c` | `masked` |\n|---|---|---|---|---|\n";
  auto row = [&](size_t from, size_t to, size_t at, const std::string& what) {
    const uint32_t crc = walfmt::crc32c::Value(p + from, to - from + 1);
    out += fmt::format("| `{:02x}..{:02x}` | `{:02x}` | {} | `{:08x}` | `{:08x}` |\n", from, to, at, what, crc,
                       walfmt::MaskCrc(crc));
  };
  row(0, 59, 60, "segment header");
  for (size_t off = walfmt::kSegmentHeaderSize; off + walfmt::kRecordHeaderSize <= bytes.size();) {
    const walfmt::RecordHeader h = walfmt::LoadRecordHeader(p + off);
    const std::string type(walfmt::RecordTypeName(static_cast<walfmt::RecordType>(h.type)));
    row(off + 4, off + 15, off, type + " header");
    row(off + 16, off + 15 + h.payload_len, off + 12, type + " payload");
    off += walfmt::kRecordHeaderSize + h.payload_len;
  }
  return out;
}

}  // namespace

TEST_CASE("FORMAT.md: the worked WAL example is the writer's bytes and reads as documented", "[format][doc]") {
  const std::string doc = Slurp(std::string(WALCUT_SOURCE_DIR) + "/walfmt/FORMAT.md");
  REQUIRE(!doc.empty());
  const std::string dump_text = Section(doc, "wal-example");
  REQUIRE(!dump_text.empty());
  std::string error;
  const std::string bytes = ParseHexDump(dump_text, error);
  INFO(error);
  REQUIRE(error.empty());

  TempDir dir;
  const std::string written = WriteExample(dir.path + "/node-0/wal");
  // WALCUT_FORMAT_EXAMPLE_OUT=FILE writes the three blocks the document
  // holds, made from the writer's bytes, to FILE (to update FORMAT.md).
  if (const char* out = std::getenv("WALCUT_FORMAT_EXAMPLE_OUT")) {
    TempDir c;
    const std::string wal = c.path + "/node-0/wal";
    REQUIRE(std::system(fmt::format("mkdir -p '{}'", wal).c_str()) == 0);
    Spit(wal + "/0000000000000000.wal", written);
    const auto d = Walcut(fmt::format("dump '{}'", c.path));
    std::string dump;
    std::istringstream lines(d.out);
    for (std::string l; std::getline(lines, l);) dump += "    " + l + "\n";
    Spit(out, HexDump(written) + "\n" + CrcTable(written) + "\n" + dump);
  }
  REQUIRE(bytes == written);

  SECTION("every checksum in the table is the CRC32C of the bytes it covers") {
    const std::string table = Section(doc, "crc-vectors");
    // | `from..to` | `at` | what | `crc32c` | `masked` |: the CRC32C of bytes
    // from..to (inclusive), masked, is stored at `at`.
    const std::regex row(
        R"(^\|\s*`([0-9a-f]+)\.\.([0-9a-f]+)`\s*\|\s*`([0-9a-f]+)`\s*\|[^|]*\|\s*`([0-9a-f]{8})`\s*\|\s*`([0-9a-f]{8})`\s*\|)");
    size_t rows = 0;
    std::istringstream in(table);
    std::string line;
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, row)) continue;
      ++rows;
      const size_t from = std::stoul(m[1].str(), nullptr, 16);
      const size_t to = std::stoul(m[2].str(), nullptr, 16);
      const size_t at = std::stoul(m[3].str(), nullptr, 16);
      const auto crc = static_cast<uint32_t>(std::stoul(m[4].str(), nullptr, 16));
      const auto masked = static_cast<uint32_t>(std::stoul(m[5].str(), nullptr, 16));
      INFO(line);
      REQUIRE(from <= to);
      REQUIRE(to < bytes.size());
      REQUIRE(at + 4 <= bytes.size());
      CHECK(walfmt::crc32c::Value(p + from, to - from + 1) == crc);
      CHECK(walfmt::MaskCrc(crc) == masked);
      CHECK(walfmt::LoadU32(p + at) == masked);
    }
    // The segment header, then a header and a payload checksum per record.
    CHECK(rows == 1 + 2 * 5);
  }

  SECTION("walcut verifies the bytes and dumps the records the document lists") {
    TempDir c;
    const std::string wal = c.path + "/node-0/wal";
    REQUIRE(std::system(fmt::format("mkdir -p '{}'", wal).c_str()) == 0);
    Spit(wal + "/0000000000000000.wal", bytes);
    const auto v = Walcut(fmt::format("verify '{}'", c.path));
    INFO(v.out << v.err);
    CHECK(v.code == 0);
    const auto d = Walcut(fmt::format("dump '{}'", c.path));
    INFO(d.err);
    REQUIRE(d.code == 0);
    std::string expected = Section(doc, "wal-example-dump");
    // The document indents the block by four spaces.
    expected = std::regex_replace(expected, std::regex("(^|\n)    "), "$1");
    expected = std::regex_replace(expected, std::regex("^\n+|\n+$"), "");
    std::string got = std::regex_replace(d.out, std::regex("\n+$"), "");
    CHECK(got == expected);
  }
}
