// Restoring from checkpoints (resume, --weights) and the checkpoint manager.
#include <fcntl.h>
#include <glog/logging.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "frugal/checkpoint.h"

namespace fs = std::filesystem;

namespace frugal {
namespace {

std::string Join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Iteration number of "ckpt-<digits>.frugal", or -1.
int64_t IterationOf(const std::string& file) {
  const std::string pre = "ckpt-", post = ".frugal";
  if (file.size() <= pre.size() + post.size() || file.compare(0, pre.size(), pre) != 0 ||
      file.compare(file.size() - post.size(), post.size(), post) != 0)
    return -1;
  std::string digits = file.substr(pre.size(), file.size() - pre.size() - post.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

// The temporary files of checkpoint writes ("." + name + ".tmp-<pid>")
// whose process is gone: a write killed mid-way leaves one behind.
void RemoveStaleTemporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t tag = name.rfind(".tmp-");
    if (name.empty() || name[0] != '.' || tag == std::string::npos || IterationOf(name.substr(1, tag - 1)) < 0)
      continue;
    const std::string digits = name.substr(tag + 5);
    if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    if (fs::remove(e.path(), rm)) LOG(INFO) << "removed " << e.path().string() << ", left by a write killed mid-way";
  }
}

// Complete checkpoints in dir, oldest first.
std::vector<std::string> CheckpointsIn(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    int64_t it = IterationOf(e.path().filename().string());
    if (it >= 0 && e.is_regular_file()) found.emplace_back(it, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

}  // namespace

std::string ResolveCheckpoint(const std::string& file_or_dir) {
  std::error_code ec;
  if (!fs::is_directory(file_or_dir, ec)) return file_or_dir;
  const std::vector<std::string> all = CheckpointsIn(file_or_dir);
  FRUGAL_REQUIRE(!all.empty(), file_or_dir,
                 ": no checkpoint in this directory (frugal train --checkpoint-dir writes ckpt-<iteration>.frugal "
                 "files; give one of them or the folder holding them)");
  return all.back();
}

void RestoreTensors(const std::map<std::string, Tensor>& src, const std::map<std::string, Tensor>& dst,
                    const std::string& what, const std::string& path) {
  std::vector<std::string> missing, unexpected, wrong;
  for (const auto& [name, t] : dst) {
    auto it = src.find(name);
    if (it == src.end())
      missing.push_back(name);
    else if (it->second.shape() != t.shape())
      wrong.push_back(Fmt(name, ": file ", it->second.shape(), ", model ", t.shape()));
  }
  for (const auto& kv : src)
    if (!dst.count(kv.first)) unexpected.push_back(kv.first);
  // The count of each kind and its first name: a net of another depth
  // differs in hundreds of names, and the first says enough.
  std::string parts;
  auto part = [&](const std::vector<std::string>& v, const char* label) {
    if (v.empty()) return;
    parts += Fmt(parts.empty() ? "" : ", ", v.size(), " ", label, v.size() > 1 ? " (the first: " : " (", v[0], ")");
  };
  part(missing, "missing");
  part(unexpected, "not in the model");
  part(wrong, "of another shape");
  FRUGAL_REQUIRE(parts.empty(), "checkpoint ", path, ": its ", what, " do not match the model's: ", parts,
                 " (was it written for another config or optimizer?)");
  for (const auto& [name, t] : dst) {
    Tensor view = t;
    view.CopyFrom(src.at(name));
  }
}

std::string WeightsReport::ToString(const std::string& path) const {
  auto part = [](const char* label, const std::vector<std::string>& v) {
    return Fmt(", ", v.size(), " ", label, v.empty() ? "" : " (" + Join(v) + ")");
  };
  return Fmt("weights ", path, ": ", matched.size(), " matched", part("missing", missing),
             part("wrong shape", wrong_shape), part("unused", unused));
}

WeightsReport LoadWeights(const std::string& path, const std::map<std::string, Tensor>& model) {
  CheckpointState s = LoadCheckpoint(path);
  std::map<std::string, Tensor> file = s.params;
  file.insert(s.aux.begin(), s.aux.end());
  WeightsReport r;
  for (const auto& [name, t] : model) {
    auto it = file.find(name);
    if (it == file.end()) {
      r.missing.push_back(name);
    } else if (it->second.shape() != t.shape()) {
      r.wrong_shape.push_back(Fmt(name, ": file ", it->second.shape(), ", model ", t.shape()));
    } else {
      Tensor view = t;
      view.CopyFrom(it->second);
      r.matched.push_back(name);
    }
  }
  for (const auto& kv : file)
    if (!model.count(kv.first)) r.unused.push_back(kv.first);
  return r;
}

CheckpointManager::CheckpointManager(const std::string& dir, int64_t interval, int keep)
    : dir_(dir), interval_(interval), keep_(keep) {
  FRUGAL_REQUIRE(interval >= 0 && keep >= 0, "checkpoints in ", dir, ": interval (", interval, ") and keep (", keep,
                 ") must not be negative");
  std::error_code ec;
  fs::create_directories(dir, ec);
  FRUGAL_REQUIRE(!ec && fs::is_directory(dir), "cannot create the checkpoint directory ", dir, ": ", ec.message());
  // Found now, not after an epoch of training: a folder frugal cannot write.
  const std::string probe = dir + "/.frugal-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FRUGAL_REQUIRE(fd >= 0, "cannot write checkpoints into ", dir, ": ", std::strerror(errno),
                 " (give a --checkpoint-dir frugal can write)");
  ::close(fd);
  fs::remove(probe, ec);
  const std::string lock = dir + "/.lock";
  lock_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  FRUGAL_REQUIRE(lock_ >= 0, "cannot lock the checkpoint directory ", dir, ": ", std::strerror(errno));
  if (::flock(lock_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(lock_, pid, sizeof pid - 1, 0);
    ::close(lock_);
    throw Error(Fmt("checkpoint directory ", dir, " is in use by another run (pid ",
                    n > 0 ? std::string(pid, static_cast<size_t>(n)) : std::string("unknown"),
                    "): two runs would replace each other's checkpoints. Give another --checkpoint-dir, or wait ",
                    "for that run to end"));
  }
  const std::string me = std::to_string(::getpid());
  FRUGAL_REQUIRE(
      ::ftruncate(lock_, 0) == 0 && ::pwrite(lock_, me.data(), me.size(), 0) == static_cast<ssize_t>(me.size()),
      "cannot lock the checkpoint directory ", dir, ": ", std::strerror(errno));
  RemoveStaleTemporaries(dir);
}

CheckpointManager::~CheckpointManager() { ::close(lock_); }  // the lock goes with it

bool CheckpointManager::Due(int64_t iteration, bool epoch_end) const {
  return interval_ > 0 ? iteration > 0 && iteration % interval_ == 0 : epoch_end;
}

std::string CheckpointManager::PathFor(int64_t iteration) const {
  char name[40];
  std::snprintf(name, sizeof(name), "ckpt-%010lld.frugal", static_cast<long long>(iteration));
  return dir_ + "/" + name;
}

std::string CheckpointManager::Save(const CheckpointState& s, const CheckpointFault& fault) {
  const std::string path = PathFor(s.iteration);
  SaveCheckpoint(path, s, fault);
  std::vector<std::string> all = List();
  for (size_t i = 0; keep_ > 0 && i + keep_ < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i], ec);  // a failed removal only costs disk space; the next save retries
  }
  return path;
}

std::vector<std::string> CheckpointManager::List() const { return CheckpointsIn(dir_); }

std::string CheckpointManager::Latest() const {
  std::vector<std::string> all = List();
  return all.empty() ? "" : all.back();
}

}  // namespace frugal
