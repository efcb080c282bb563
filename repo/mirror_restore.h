// The end of `restore --repo` from a private mirror of a repository (an S3
// download, s3_repository.cpp; a decrypted copy, crypt_dir.cpp): every file
// of the target's chain fetched (and checked) before anything is restored,
// then the directory restore run on the mirror. Internal to repo/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "repo/repository.h"
#include "repo/s3_store.h"
#include "walfmt/status.h"

namespace walcut::repo {

// `s` is the command's session: Download(name) fetches an artifact into
// s->mirror->dir, s->failures holds the files that failed their check,
// Rename maps a status's mirror paths to the repository's.

// Every artifact of `chain` fetched whole into the mirror, then the first
// file of them that failed its check (as an error), else Ok.
template <class Session>
walfmt::Status FetchChain(Session& s, const std::vector<const Artifact*>& chain) {
  std::vector<std::string> names;
  for (const auto* c : chain) {
    names.push_back(c->name);
    if (walfmt::Status st = s.Download(c->name); !st.ok()) return st;
  }
  return s.failures.FirstOf(names);
}

// A synthetic full of cut `k` the repository may serve (create --full
// --cut K): the chain of every whole artifact of cut k, fetched.
template <class Session>
walfmt::Status FetchServingChains(Session& s, const RepoListing& l, uint64_t k) {
  for (const auto& a : l.artifacts) {
    if (!a.status.ok() || a.m.cut != k) continue;
    auto chain = ChainOf(l, a.name);
    if (!chain.ok()) continue;
    if (walfmt::Status st = FetchChain(s, *chain); !st.ok()) return st;
  }
  return walfmt::Status::Ok();
}

template <class Session>
walfmt::Result<RepoRestoreResult> RestoreThroughMirror(Session& s, const RepoListing& l,
                                                       const RepoRestoreRequest& req) {
  auto target = SelectTarget(l, req);
  if (!target.ok()) return s.Rename(target.status());
  if (!req.dry_run) {  // every file of the chain fetched and checked before anything is restored
    auto chain = ChainOf(l, (*target)->name);
    if (!chain.ok()) return s.Rename(chain.status());
    if (walfmt::Status st = FetchChain(s, *chain); !st.ok()) return s.Rename(st);
  }
  RepoRestoreRequest local = req;
  local.repo = s.mirror->dir;
  local.name = (*target)->name;
  local.cut.reset();
  local.latest = false;
  local.before.reset();
  auto r = RestoreFromRepository(local);
  if (!r.ok()) return s.Rename(r.status());
  if (!req.dry_run) {
    if (walfmt::Status st = FixRestoredRepositoryDir(req.out, s.mirror->dir, req.repo); !st.ok()) return st;
  }
  return r;
}

}  // namespace walcut::repo
