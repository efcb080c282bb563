#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

// scripts/mutation.py builds the tests with its generated header force-included
// (it defines WALCUT_MUTATION_BUILD). There, every test case announces its name
// before it runs, so the trace of the checks it reaches (in this process and in
// every `walcut` it starts, which inherit the environment) names the test case,
// and switching a check off reruns only the test cases that reach it.
#ifdef WALCUT_MUTATION_BUILD
namespace {
struct MutationTestName : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    TestEventListenerBase::testCaseStarting(info);
    walcut_mutation::SetTest(info.name);
  }
  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    walcut_mutation::SetTest("");
    TestEventListenerBase::testCaseEnded(stats);
  }
};
}  // namespace
CATCH_REGISTER_LISTENER(MutationTestName)
#endif
