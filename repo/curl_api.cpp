#include "repo/curl_api.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

#include <fmt/format.h>

namespace walcut::repo {
namespace {

CurlApi g_api{};

// dlerror()'s text, or a fallback: it is null when nothing failed.
std::string LastDlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

}  // namespace

walfmt::Status LoadCurlFrom(const std::string& soname, CurlApi& out) {
  // Kept loaded until the process ends: handles and callbacks may outlive
  // any one client.
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return walfmt::Status::Internal(
        fmt::format("S3 needs libcurl ({}), which cannot be loaded: {}", soname, LastDlError()));
  }
  walfmt::Status missing = walfmt::Status::Ok();
  auto get = [&](auto& fn, const char* name) {
    void* p = dlsym(lib, name);
    if (p == nullptr && missing.ok()) {
      missing = walfmt::Status::Internal(fmt::format("S3 needs libcurl: {} has no {}", soname, name));
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  CurlApi api{};
  get(api.global_init, "curl_global_init");
  get(api.easy_init, "curl_easy_init");
  get(api.easy_setopt, "curl_easy_setopt");
  get(api.easy_perform, "curl_easy_perform");
  get(api.easy_getinfo, "curl_easy_getinfo");
  get(api.easy_reset, "curl_easy_reset");
  get(api.easy_cleanup, "curl_easy_cleanup");
  get(api.easy_strerror, "curl_easy_strerror");
  get(api.slist_append, "curl_slist_append");
  get(api.slist_free_all, "curl_slist_free_all");
  if (!missing.ok()) return missing;
  if (const CURLcode init = api.global_init(CURL_GLOBAL_DEFAULT); init != CURLE_OK) {
    return walfmt::Status::Internal(fmt::format("curl_global_init failed: {}", api.easy_strerror(init)));
  }
  out = api;
  return walfmt::Status::Ok();
}

walfmt::Status LoadCurl() {
  static std::once_flag once;
  static walfmt::Status status = walfmt::Status::Ok();
  std::call_once(once, [] { status = LoadCurlFrom(kLibcurlSoname, g_api); });
  return status;
}

const CurlApi& Curl() { return g_api; }

}  // namespace walcut::repo
