// The simulation's event queue (node/scheduler.h) and the assertion that
// guards its slots (walfmt/assert.h's WALCUT_ASSERT, on in every build type:
// this suite is built with NDEBUG).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "node/scheduler.h"
#include "walfmt/assert.h"

using walcut::node::sim::Scheduler;
using walcut::node::sim::StepKind;

namespace {

struct ChildEnd {
  bool aborted = false;  // killed by SIGABRT
  std::string err;       // what it wrote to stderr
};

// Runs fn in a child process (an assertion aborts the whole process) and
// reports how the child ended.
ChildEnd RunInChild(const std::function<void()>& fn) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Catch2's own SIGABRT handler would report a failed test from the child.
    ::signal(SIGABRT, SIG_DFL);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    fn();
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildEnd end;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) end.err.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  end.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return end;
}

// Schedules one event, runs and releases it; returns its slot.
uint32_t RunOne(Scheduler& s) {
  s.Add(1);
  uint32_t slot = 0;
  s.Pop(slot);
  s.Release(slot);
  return slot;
}

// The child aborted and said `message`, naming the file of the assertion.
void CheckAborted(const ChildEnd& end, const std::string& file, const std::string& message) {
  INFO(end.err);
  CHECK(end.aborted);
  CHECK(end.err.find(file + ":") != std::string::npos);
  CHECK(end.err.find("internal error") != std::string::npos);
  CHECK(end.err.find(message) != std::string::npos);
}

}  // namespace

TEST_CASE("scheduler: events run by time, ties in the order they were added") {
  Scheduler s;
  const std::vector<uint64_t> times = {30, 10, 20, 10, 30, 10};
  for (size_t i = 0; i < times.size(); ++i) s.Add(times[i]).step_k = i;
  std::vector<uint64_t> order, at;
  uint32_t slot = 0;
  while (s.Pop(slot)) {
    order.push_back(s.at(slot).step_k);
    at.push_back(s.now());
    s.Release(slot);
  }
  CHECK(order == std::vector<uint64_t>{1, 3, 5, 2, 0, 4});
  CHECK(at == std::vector<uint64_t>{10, 10, 10, 20, 30, 30});
}

TEST_CASE("scheduler: a released slot is reused, cleared") {
  Scheduler s;
  Scheduler::Event& e = s.Add(5);
  e.step = StepKind::kCommitStep;
  e.fn = [] {};
  uint32_t first = 0;
  REQUIRE(s.Pop(first));
  s.Release(first);
  s.Add(7);
  uint32_t second = 0;
  REQUIRE(s.Pop(second));
  CHECK(second == first);
  CHECK(s.at(second).step == StepKind::kNone);
  CHECK_FALSE(s.at(second).fn);
  CHECK(s.now() == 7);
}

TEST_CASE("scheduler: releasing a slot twice aborts with file, line and message") {
  const ChildEnd end = RunInChild([] {
    Scheduler s;
    const uint32_t slot = RunOne(s);
    s.Release(slot);
  });
  CheckAborted(end, "node/scheduler.h", "Scheduler::Release: slot released twice");
}

TEST_CASE("scheduler: a slot that holds no event cannot be read") {
  const ChildEnd end = RunInChild([] {
    Scheduler s;
    const uint32_t slot = RunOne(s);
    (void)s.at(slot);
  });
  CheckAborted(end, "node/scheduler.h", "Scheduler::at: not an event's slot");
}

TEST_CASE("WALCUT_ASSERT: silent when the condition holds, aborts naming it when not") {
  const ChildEnd ok = RunInChild([] { WALCUT_ASSERT(1 + 1 == 2, "arithmetic"); });
  CHECK_FALSE(ok.aborted);
  CHECK(ok.err.empty());
  const ChildEnd bad = RunInChild([] {
    const int two = 2;
    WALCUT_ASSERT(two == 3, "two is not three");
  });
  CheckAborted(bad, "node_scheduler_test.cpp", "two == 3: two is not three");
}
