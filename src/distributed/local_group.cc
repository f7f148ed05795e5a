// The local group (frugal/dist.h): the ranks of a data-parallel run as
// threads of one process, for `frugal train --gpus 0,1,...`, where it does
// the host collectives under NCCL. A collective is an exchange: every rank
// puts a pointer to its buffer into the slot of that collective and waits
// for the others; then each computes its result from all the buffers, in
// rank order, into a scratch copy; once all have read, each writes its own
// buffer. No rank writes a buffer another may still read, and every rank
// gets the same bits.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "frugal/base.h"
#include "frugal/dist.h"

namespace frugal {
namespace {

// What the threads share.
class Group {
 public:
  explicit Group(int n) : n_(n) {}
  int size() const { return n_; }

  // The collective `key` (the same on every rank): mine is this rank's
  // buffer; compute(all buffers in rank order) runs on every rank and must
  // only read them; then write() runs once every rank has computed.
  void Exchange(std::pair<int, uint64_t> key, int rank, void* mine,
                const std::function<void(const std::vector<void*>&)>& compute, const std::function<void()>& write) {
    std::unique_lock<std::mutex> lock(mu_);
    Slot& slot = slots_[key];
    if (slot.ptrs.empty()) slot.ptrs.assign(n_, nullptr);
    slot.ptrs[rank] = mine;
    ++slot.arrived;
    cv_.notify_all();
    cv_.wait(lock, [&] { return slot.arrived == n_; });
    const std::vector<void*> ptrs = slot.ptrs;
    lock.unlock();
    compute(ptrs);
    lock.lock();
    ++slot.computed;
    cv_.notify_all();
    cv_.wait(lock, [&] { return slot.computed == n_; });
    if (++slot.left == n_) slots_.erase(key);
    lock.unlock();
    write();
  }

 private:
  struct Slot {
    std::vector<void*> ptrs;
    int arrived = 0, computed = 0, left = 0;
  };
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, uint64_t>, Slot> slots_;
};

constexpr int kAsync = 0, kBlocking = 1;

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~LocalCommunicator() override { Stop(); }

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  uint64_t Reserve() override { return next_reserved_++; }

  void AllReduceSumAsync(uint64_t seq, float* data, int64_t n, const char* what, bool,
                         std::function<void(std::exception_ptr)> done) override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_[seq] = [this, seq, data, n, done] {
      Sum({kAsync, seq}, data, n);
      ++reduces_;
      reduce_bytes_ += n * static_cast<int64_t>(sizeof(float));
      done(nullptr);
    };
    cv_.notify_all();
  }

  void BroadcastAsync(uint64_t seq, float* data, int64_t n, int root, const char*,
                      std::function<void(std::exception_ptr)> done) override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_[seq] = [this, seq, data, n, root, done] {
      Copy({kAsync, seq}, data, n, root);
      done(nullptr);
    };
    cv_.notify_all();
  }

  void Broadcast(float* data, int64_t n, int root, const char*) override {
    Copy({kBlocking, blocking_++}, data, n, root);
  }

  void AllReduceSum(double* data, int64_t n, const char*) override { Sum({kBlocking, blocking_++}, data, n); }

  void AllReduceMin(int64_t* data, int64_t n, const char*) override {
    std::vector<int64_t> got(n);
    group_->Exchange(
        {kBlocking, blocking_++}, rank_, data,
        [&](const std::vector<void*>& all) {
          for (int64_t i = 0; i < n; ++i) {
            got[i] = static_cast<const int64_t*>(all[0])[i];
            for (void* p : all) got[i] = std::min(got[i], static_cast<const int64_t*>(p)[i]);
          }
        },
        [&] { std::copy(got.begin(), got.end(), data); });
  }

  std::vector<uint64_t> AllGather(uint64_t value, const char*) override {
    std::vector<uint64_t> got;
    group_->Exchange(
        {kBlocking, blocking_++}, rank_, &value,
        [&](const std::vector<void*>& all) {
          for (void* p : all) got.push_back(*static_cast<const uint64_t*>(p));
        },
        [] {});
    return got;
  }

  // The threads of this process are the job: print and end it.
  [[noreturn]] void Abort(const std::string& message) override {
    std::fprintf(stderr, "frugal: error: rank %d: %s\n", rank_, message.c_str());
    std::fflush(stderr);
    _exit(3);
  }

  void Finish() override { Stop(); }

  std::string Stats() const override {
    return Fmt("dist: ", reduces_.load(), " gradient all-reduces of ", HumanBytes(reduce_bytes_.load()),
               " between the threads of this process");
  }

 private:
  template <typename T>
  void Sum(std::pair<int, uint64_t> key, T* data, int64_t n) {
    std::vector<T> got(n);
    group_->Exchange(
        key, rank_, data,
        [&](const std::vector<void*>& all) {
          for (int64_t i = 0; i < n; ++i) {
            T s = 0;
            for (void* p : all) s += static_cast<const T*>(p)[i];
            got[i] = s;
          }
        },
        [&] { std::copy(got.begin(), got.end(), data); });
  }

  void Copy(std::pair<int, uint64_t> key, float* data, int64_t n, int root) {
    std::vector<float> got;
    group_->Exchange(
        key, rank_, data,
        [&](const std::vector<void*>& all) {
          const float* src = static_cast<const float*>(all[root]);
          got.assign(src, src + n);
        },
        [&] { std::copy(got.begin(), got.end(), data); });
  }

  // Runs the asynchronous collectives in sequence order, as every rank does.
  void Loop() {
    uint64_t next = 0;
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || queue_.count(next); });
        if (stop_) return;
        op = std::move(queue_[next]);
        queue_.erase(next++);
      }
      op();
    }
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::shared_ptr<Group> group_;
  const int rank_;
  uint64_t next_reserved_ = 0;  // trainer thread
  uint64_t blocking_ = 0;       // trainer thread
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::function<void()>> queue_;
  bool stop_ = false;
  std::atomic<int64_t> reduces_{0}, reduce_bytes_{0};
  std::thread thread_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> MakeLocalGroup(int n) {
  FRUGAL_REQUIRE(n >= 1, "a local group needs at least one rank, got ", n);
  auto group = std::make_shared<Group>(n);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(std::make_unique<LocalCommunicator>(group, r));
  return comms;
}

}  // namespace frugal
