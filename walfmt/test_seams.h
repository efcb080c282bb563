// Fault injection for the tests, compiled only into a test build: the CMake
// option WALCUT_TEST_SEAMS builds walfmt's file_io.cpp and source.cpp once
// more with WALCUT_TEST_SEAMS defined (the object library walfmt_test_seams),
// linked into walcut_seams and the test suites ahead of libwalfmt, so that
// their objects replace the library's. The walcut and libwalfmt that are
// installed have none of it: the functions below are not in them, and they
// ignore WALCUT_FAIL_IO_AT (walfmt/file_io.h). Internal to walfmt.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace walfmt::detail {

// The pread() every plain segment source calls (the window and the
// read-ahead): ::pread, or for a test a stand-in that fails where it is told
// to, since nothing else makes pread of a regular file fail on demand.
// nullptr restores ::pread. Not for use while sources are reading.
using PreadFn = ssize_t (*)(int fd, void* buf, size_t n, off_t offset);
void SetPreadForTesting(PreadFn fn);

}  // namespace walfmt::detail
