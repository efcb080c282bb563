// The one JSON field reader (walfmt/json_fields.h) and the shared text
// helpers (walfmt/strings.h): every refusal names the origin and the field.
#include "walfmt/json_fields.h"

#include <catch2/catch.hpp>

#include <functional>
#include <vector>

#include "walfmt/strings.h"

namespace {
using walfmt::JsonFields;
using json = nlohmann::json;

const json kDoc = json::parse(R"({
  "n": 7, "neg": -3, "big": 5000000000, "s": "text", "b": true, "f": 1.5,
  "id": "00000000000000ff", "pos": "1/2a", "tx": "2:15",
  "arr": [1, 2, 3], "obj": {"inner": {"x": 4}}
})");
}  // namespace

TEST_CASE("JsonFields reads each kind of required field") {
  JsonFields r("doc.json");
  CHECK(r.U64(kDoc, "n", "") == 7);
  CHECK(r.U32(kDoc, "n", "") == 7);
  CHECK(r.I64(kDoc, "neg", "") == -3);
  CHECK(r.Number(kDoc, "f", "") == 1.5);
  CHECK(r.String(kDoc, "s", "") == "text");
  CHECK(r.Bool(kDoc, "b", ""));
  CHECK(r.Hex16(kDoc, "id", "") == 255);
  CHECK(r.Position(kDoc, "pos", "") == walfmt::Lsn{1, 0x2a});
  CHECK(r.Tx(kDoc, "tx", "") == walfmt::TxId{2, 15});
  const json* a = r.Array(kDoc, "arr", "", 3);
  REQUIRE(a != nullptr);
  CHECK(r.U64Value((*a)[2], JsonFields::Element("arr", 2)) == 3);
  const json* o = r.Object(kDoc, "obj", "");
  REQUIRE(o != nullptr);
  const json* inner = r.Object(*o, "inner", "obj");
  REQUIRE(inner != nullptr);
  CHECK(r.U64(*inner, "x", "obj.inner") == 4);
  CHECK(r.ok());
  CHECK(r.status().ok());
}

TEST_CASE("JsonFields refuses a missing or mistyped field and names it, the first problem wins") {
  struct Case {
    std::function<void(JsonFields&)> read;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](JsonFields& r) { (void)r.U64(kDoc, "absent", ""); }, "doc.json: field 'absent': missing"},
      {[](JsonFields& r) { (void)r.U64(kDoc, "s", ""); },
       "doc.json: field 's': expected an unsigned integer, found \"text\""},
      {[](JsonFields& r) { (void)r.U64(kDoc, "neg", ""); },
       "doc.json: field 'neg': expected an unsigned integer, found -3"},
      {[](JsonFields& r) { (void)r.U32(kDoc, "big", ""); },
       "doc.json: field 'big': 5000000000 is larger than the limit 4294967295"},
      {[](JsonFields& r) { (void)r.U64(kDoc, "n", "", 6); }, "doc.json: field 'n': 7 is larger than the limit 6"},
      {[](JsonFields& r) { (void)r.String(kDoc, "n", ""); }, "doc.json: field 'n': expected a string, found 7"},
      {[](JsonFields& r) { (void)r.Bool(kDoc, "n", ""); }, "doc.json: field 'n': expected true or false, found 7"},
      {[](JsonFields& r) { (void)r.I64(kDoc, "s", ""); }, "doc.json: field 's': expected an integer, found \"text\""},
      {[](JsonFields& r) { (void)r.Number(kDoc, "s", ""); }, "doc.json: field 's': expected a number, found \"text\""},
      {[](JsonFields& r) { (void)r.Hex16(kDoc, "s", ""); },
       "doc.json: field 's': \"text\" is not 16 lower-case hex digits"},
      {[](JsonFields& r) { (void)r.Position(kDoc, "s", ""); },
       "doc.json: field 's': \"text\" is not a position (SEGMENT/OFFSET in hex)"},
      {[](JsonFields& r) { (void)r.Tx(kDoc, "s", ""); },
       "doc.json: field 's': \"text\" is not a transaction id NODE:SEQ"},
      {[](JsonFields& r) { (void)r.Array(kDoc, "obj", ""); },
       "doc.json: field 'obj': expected an array, found {\"inner\":{\"x\":4}}"},
      {[](JsonFields& r) { (void)r.Array(kDoc, "arr", "", 2); },
       "doc.json: field 'arr': 3 elements, more than the limit 2"},
      {[](JsonFields& r) { (void)r.Object(kDoc, "arr", ""); },
       "doc.json: field 'arr': expected an object, found [1,2,3]"},
      {[](JsonFields& r) { (void)r.U64(kDoc["obj"]["inner"], "y", "obj.inner"); },
       "doc.json: field 'obj.inner.y': missing"},
      {[](JsonFields& r) { (void)r.U64(kDoc["arr"], "x", "arr"); },
       "doc.json: field 'arr': expected an object, found [1,2,3]"},
      {[](JsonFields& r) {
         (void)r.U64(kDoc, "absent", "");
         (void)r.String(kDoc, "n", "");
       },
       "doc.json: field 'absent': missing"},
      {[](JsonFields& r) { (void)r.OptionalU64(kDoc, "s", ""); },
       "doc.json: field 's': expected an unsigned integer, found \"text\""},
      {[](JsonFields& r) { (void)r.OptionalBool(kDoc, "s", ""); },
       "doc.json: field 's': expected true or false, found \"text\""},
      {[](JsonFields& r) { (void)r.OptionalString(kDoc, "n", ""); }, "doc.json: field 'n': expected a string, found 7"},
      {[](JsonFields& r) { (void)r.OptionalTx(kDoc, "n", ""); }, "doc.json: field 'n': expected a string, found 7"},
      {[](JsonFields& r) { (void)r.OptionalPosition(kDoc, "tx", ""); },
       "doc.json: field 'tx': \"2:15\" is not a position (SEGMENT/OFFSET in hex)"},
      {[](JsonFields& r) { (void)r.OptionalArray(kDoc, "n", ""); }, "doc.json: field 'n': expected an array, found 7"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    JsonFields r("doc.json");
    cases[i].read(r);
    CHECK_FALSE(r.ok());
    CHECK(r.error() == cases[i].error);
    CHECK(r.status().code() == walfmt::ErrorCode::kCorruption);
    CHECK(r.status().message() == cases[i].error);
  }
}

TEST_CASE("JsonFields: an absent optional field is no error, after an error every read is empty") {
  JsonFields r("doc.json");
  CHECK_FALSE(r.OptionalU64(kDoc, "absent", "").has_value());
  CHECK_FALSE(r.OptionalBool(kDoc, "absent", "").has_value());
  CHECK_FALSE(r.OptionalString(kDoc, "absent", "").has_value());
  CHECK_FALSE(r.OptionalPosition(kDoc, "absent", "").has_value());
  CHECK_FALSE(r.OptionalTx(kDoc, "absent", "").has_value());
  CHECK(r.OptionalArray(kDoc, "absent", "") == nullptr);
  CHECK(r.Find(kDoc, "absent", "") == nullptr);
  CHECK(r.ok());
  CHECK(r.OptionalU64(kDoc, "n", "").value() == 7);
  CHECK(r.OptionalTx(kDoc, "tx", "").value() == walfmt::TxId{2, 15});
  r.Fail("somewhere", "broken");
  CHECK(r.U64(kDoc, "n", "") == 0);
  CHECK(r.String(kDoc, "s", "").empty());
  CHECK(r.error() == "doc.json: field 'somewhere': broken");
}

TEST_CASE("Hex16, ParseHex16 and JoinPath") {
  CHECK(walfmt::Hex16(0) == "0000000000000000");
  CHECK(walfmt::Hex16(0xdeadbeefULL) == "00000000deadbeef");
  CHECK(walfmt::Hex16(UINT64_MAX) == "ffffffffffffffff");
  uint64_t v = 1;
  CHECK(walfmt::ParseHex16("00000000deadbeef", v));
  CHECK(v == 0xdeadbeefULL);
  for (const char* bad : {"", "deadbeef", "00000000DEADBEEF", "00000000deadbeefa", "0000000 deadbeef",
                          "-000000000000001", "000000000000000g"}) {
    INFO(bad);
    v = 9;
    CHECK_FALSE(walfmt::ParseHex16(bad, v));
    CHECK(v == 9);
  }
  CHECK(walfmt::JoinPath("", "a") == "a");
  CHECK(walfmt::JoinPath("d", "a") == "d/a");
  CHECK(walfmt::JoinPath("d/", "a") == "d/a");
  CHECK(walfmt::JoinPath("/", "a") == "/a");
}
