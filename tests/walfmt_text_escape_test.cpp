// walfmt/text_escape.h: byte strings in JSON, XML and SVG, losslessly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "walfmt/text_escape.h"

using walfmt::EscapeBytes;
using walfmt::IsCleanText;
using walfmt::UnescapeBytes;

TEST_CASE("EscapeBytes: valid UTF-8 passes, every other byte becomes a two-digit hex escape") {
  CHECK(EscapeBytes("plain/path-1.wal") == "plain/path-1.wal");
  CHECK(EscapeBytes("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80");
  CHECK(EscapeBytes("dir-\xff\xfe/x") == "dir-\\xff\\xfe/x");
  CHECK(EscapeBytes("a\\b") == "a\\x5cb");                                    // the backslash: escapes stay unambiguous
  CHECK(EscapeBytes(std::string("a\0b\x01\x1f", 5)) == "a\\x00b\\x01\\x1f");  // controls XML cannot carry
  CHECK(EscapeBytes("t\tn\nr\r") == "t\tn\nr\r");                             // those it can
  CHECK(EscapeBytes("\xef\xbf\xbe\xef\xbf\xbf") == "\\xef\\xbf\\xbe\\xef\\xbf\\xbf");  // U+FFFE, U+FFFF
  CHECK(EscapeBytes("\xef\xbf\xbd") == "\xef\xbf\xbd");                                // U+FFFD is a character
  CHECK(EscapeBytes("\xc0\xaf") == "\\xc0\\xaf");                                      // overlong
  CHECK(EscapeBytes("\xed\xa0\x80") == "\\xed\\xa0\\x80");                             // a UTF-16 surrogate
  CHECK(EscapeBytes("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");                    // above U+10FFFF
  CHECK(EscapeBytes("\xe2\x86") == "\\xe2\\x86");                                      // cut short
  CHECK(EscapeBytes("\xe2\x86x") == "\\xe2\\x86x");
  CHECK(IsCleanText("caf\xc3\xa9"));
  CHECK_FALSE(IsCleanText("a\\b"));
  CHECK_FALSE(IsCleanText("\xff"));
  CHECK_FALSE(IsCleanText(std::string("\x01", 1)));
}

TEST_CASE("UnescapeBytes inverts EscapeBytes for every byte string") {
  const uint32_t seed = 20261201;
  std::mt19937 rng(seed);
  CAPTURE(seed);
  for (int round = 0; round < 2000; ++round) {
    std::string s(rng() % 24, '\0');
    // Mostly bytes that make UTF-8 sequences and escapes likely.
    static const char kPool[] = {'a',    '\\',   'x',    'f',    '0',    '\xc3', '\xa9', '\xe2', '\x86', '\x92',
                                 '\xf0', '\x9f', '\xff', '\xfe', '\x80', '\xbf', '\xef', '\x01', '\n',   '\xed'};
    for (char& c : s) c = kPool[rng() % sizeof(kPool)];
    const std::string e = EscapeBytes(s);
    INFO("round " << round);
    CHECK(UnescapeBytes(e) == s);
    CHECK(IsCleanText(s) == (e == s));
    // Valid UTF-8 (json::dump throws otherwise), no character XML cannot carry.
    CHECK_NOTHROW(nlohmann::json(e).dump());
    CHECK(std::none_of(e.begin(), e.end(),
                       [](char c) { return c >= 0 && c < 0x20 && c != '\t' && c != '\n' && c != '\r'; }));
  }
  // Text EscapeBytes did not write: a backslash without two hex digits stays.
  CHECK(UnescapeBytes("a\\b\\x4") == "a\\b\\x4");
  CHECK(UnescapeBytes("\\x41\\X41") == "A\\X41");
}

TEST_CASE("DumpJson: any byte string, member names included, gives valid JSON that reads back") {
  nlohmann::json j = {{"path", "/tmp/\xff\xfe/cluster"}, {"list", {"ok", "a\\b"}}, {"n", 3}};
  j["k\xff"] = "v";
  CHECK_THROWS(j.dump());  // what every --format json command did with such a path
  const std::string text = walfmt::DumpJson(j, 2);
  const nlohmann::json back = walfmt::UnescapeJsonStrings(nlohmann::json::parse(text));
  CHECK(back == j);
  CHECK(nlohmann::json::parse(text)["path"] == "/tmp/\\xff\\xfe/cluster");
  const nlohmann::json clean = {{"a", "b"}};
  CHECK(walfmt::DumpJson(clean, 2) == clean.dump(2));
}
