// Internal to repo/: libcurl, loaded when the first S3 client is made rather
// than when walcut starts. Linking it would map libcurl and the 30 libraries
// it needs (TLS, HTTP/2, LDAP, Kerberos...) into every walcut process, about
// 10 ms of CPU at each start-up on this kind of machine: as much as a third
// of a short command, for the few that talk to S3. The functions are those of
// <curl/curl.h>, called through the pointers of CurlApi.
#pragma once

#include <curl/curl.h>

#include <string>

#include "walfmt/status.h"

namespace walcut::repo {

struct CurlApi {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL* h, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* h);
  CURLcode (*easy_getinfo)(CURL* h, CURLINFO info, ...);
  void (*easy_reset)(CURL* h);
  void (*easy_cleanup)(CURL* h);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* line);
  void (*slist_free_all)(curl_slist* list);
};

// The soname walcut loads: the one Debian's libcurl4 package installs.
inline constexpr const char* kLibcurlSoname = "libcurl.so.4";

// Loads the library `soname`, fills `api` with its functions and
// initializes it (curl_global_init). Internal with a one-line message when
// the library or one of the functions is missing or curl_global_init fails.
// A library loaded stays loaded until the process ends.
walfmt::Status LoadCurlFrom(const std::string& soname, CurlApi& api);

// LoadCurlFrom(kLibcurlSoname) once per process; later calls return the
// first one's outcome.
walfmt::Status LoadCurl();

// The functions LoadCurl loaded: only after it succeeded.
const CurlApi& Curl();

}  // namespace walcut::repo
