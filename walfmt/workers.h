// Worker threads whose exceptions reach the thread that joins them. An
// exception escaping a std::thread's function ends the process (std::terminate)
// with no error line; bodies run through FirstError::Run instead, and the
// joining thread calls Rethrow after the joins, so the command reports it as
// an internal error (exit 3) like any other.
#pragma once

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace walfmt {

class FirstError {
 public:
  // Runs f; keeps the first exception any Run saw.
  template <typename F>
  void Run(F&& f) noexcept {
    try {
      f();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_ != nullptr;
  }
  // Call after every thread that ran a body has been joined.
  void Rethrow() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mu_;
  std::exception_ptr error_;
};

// Runs `work` on `jobs` threads (the calling thread is one of them), joins
// them, and rethrows the first exception any of them threw.
template <typename F>
void RunWorkers(unsigned jobs, F&& work) {
  FirstError error;
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j) threads.emplace_back([&] { error.Run(work); });
  error.Run(work);
  for (auto& t : threads) t.join();
  error.Rethrow();
}

}  // namespace walfmt
