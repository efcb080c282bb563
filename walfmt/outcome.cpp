#include "walfmt/outcome.h"

namespace walfmt {

Outcome OutcomeOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return Outcome::kOk;
    case ErrorCode::kCorruption:
      return Outcome::kFindings;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
      return Outcome::kUsage;
    case ErrorCode::kIo:
    case ErrorCode::kInternal:
      return Outcome::kIo;
  }
  return Outcome::kIo;
}

void ProblemTally::Add(const Problem& p) {
  if (p.kind == ProblemKind::kIo) {
    ++io;
  } else if (p.fatal) {
    ++findings;
  } else {
    ++notices;
  }
}

Outcome ProblemTally::outcome() const {
  if (io > 0) return Outcome::kIo;
  if (findings > 0) return Outcome::kFindings;
  return Outcome::kOk;
}

}  // namespace walfmt
