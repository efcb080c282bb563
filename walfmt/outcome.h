// How a run came out, as the library decides it: all good, findings, a
// request that means nothing (usage), or a failure to read or write. The CLI
// turns an Outcome into its exit code in one place (cli/output.h, ExitCode;
// README.md, "Exit codes"); the library never names exit codes.
#pragma once

#include <cstdint>

#include "walfmt/reader.h"
#include "walfmt/status.h"

namespace walfmt {

enum class Outcome : uint8_t {
  kOk,        // all good (a torn tail at the very end of a WAL is a notice, not a finding)
  kFindings,  // corruption, an inconsistent cut, a failed check
  kUsage,     // bad arguments, a path that names nothing to read
  kIo,        // an I/O or internal error
};

// The outcome of a failed (or ok) Status: kCorruption is a finding,
// kInvalidArgument and kNotFound are usage, kIo and kInternal are I/O.
Outcome OutcomeOf(ErrorCode code);
inline Outcome OutcomeOf(const Status& st) { return OutcomeOf(st.code()); }

// Counts problems by consequence: I/O failures beat findings.
struct ProblemTally {
  uint64_t findings = 0;  // fatal problems
  uint64_t notices = 0;   // reported, not findings (torn tail at the end, duplicate archive)
  uint64_t io = 0;
  void Add(const Problem& p);
  Outcome outcome() const;
};

}  // namespace walfmt
