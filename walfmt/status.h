// Errors as values at library boundaries. Library code never prints and never
// lets an exception escape: it returns a Status or a Result<T>, and the CLI maps
// the error code to an exit code (see README.md, "Exit codes").
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace walfmt {

enum class ErrorCode : uint8_t {
  kOk = 0,
  kCorruption = 1,       // the input is damaged or inconsistent: a finding
  kInvalidArgument = 2,  // the caller asked for something meaningless: usage
  kIo = 3,               // the operating system refused (open, read, write, rename)
  kNotFound = 4,         // a path names nothing usable
  kInternal = 5,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Corruption(std::string m) { return Status(ErrorCode::kCorruption, std::move(m)); }
  static Status InvalidArgument(std::string m) { return Status(ErrorCode::kInvalidArgument, std::move(m)); }
  static Status Io(std::string m) { return Status(ErrorCode::kIo, std::move(m)); }
  static Status NotFound(std::string m) { return Status(ErrorCode::kNotFound, std::move(m)); }
  static Status Internal(std::string m) { return Status(ErrorCode::kInternal, std::move(m)); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(ErrorCode c, std::string m) : code_(c), message_(std::move(m)) {}
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// A T or the Status of the failure that kept it from being made. value(),
// * and -> are only for a Result that is ok() (on an error they throw
// std::bad_variant_access); status() is Ok for one that is.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                                    // NOLINT: implicit by design
  Result(Status s) : v_(std::move(s)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace walfmt
