// Restoring from checkpoints (resume, --weights) and the checkpoint manager.
#include <algorithm>
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

}  // namespace

void RestoreTensors(const std::map<std::string, Tensor>& src, const std::map<std::string, Tensor>& dst,
                    const std::string& what, const std::string& path) {
  std::vector<std::string> missing, unexpected, wrong;
  for (const auto& [name, t] : dst) {
    auto it = src.find(name);
    if (it == src.end()) missing.push_back(name);
    else if (it->second.shape() != t.shape())
      wrong.push_back(Fmt(name, " (file ", it->second.shape(), ", model ", t.shape(), ")"));
  }
  for (const auto& kv : src)
    if (!dst.count(kv.first)) unexpected.push_back(kv.first);
  FRUGAL_REQUIRE(missing.empty() && unexpected.empty() && wrong.empty(), "checkpoint ", path, ": its ", what,
                 " do not match the model's", missing.empty() ? "" : "; missing: ", Join(missing),
                 unexpected.empty() ? "" : "; not in the model: ", Join(unexpected),
                 wrong.empty() ? "" : "; wrong shape: ", Join(wrong),
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
}

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

std::vector<std::string> CheckpointManager::List() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    int64_t it = IterationOf(e.path().filename().string());
    if (it >= 0 && e.is_regular_file()) found.emplace_back(it, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

std::string CheckpointManager::Latest() const {
  std::vector<std::string> all = List();
  return all.empty() ? "" : all.back();
}

}  // namespace frugal
