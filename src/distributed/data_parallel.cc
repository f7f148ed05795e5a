// DataParallel: gradient buckets pushed as asynchronous all-reduces, the
// broadcast of parameters, metric reduction and the consistency check (see
// frugal/dist.h). Communicator factory.
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/device.h"
#include "frugal/base.h"
#include "frugal/dist.h"
#include "frugal/executor.h"

namespace frugal {
namespace {

// The trace rows of the exchanges (DataParallel::SetTrace), apart from the
// engine's threads (numbered from 1).
constexpr int kAllReduceRow = 1000, kBroadcastRow = 1001;

// The completion of an exchange that began at `begin` (trace's clock):
// records it, then calls done.
std::function<void(std::exception_ptr)> Traced(TraceWriter* trace, int row, const std::string& what, int64_t bytes,
                                               std::function<void(std::exception_ptr)> done) {
  if (!trace) return done;
  return [trace, row, what, bytes, begin = trace->NowMicros(), done = std::move(done)](std::exception_ptr e) {
    TraceEvent ev;
    ev.name = what;
    ev.category = "communication";
    ev.tid = row;
    ev.begin_us = begin;
    ev.end_us = trace->NowMicros();
    ev.Arg("bytes", bytes);
    trace->Add(std::move(ev));
    done(e);
  };
}

}  // namespace

#ifdef FRUGAL_HAVE_MPI
std::unique_ptr<Communicator> MakeMpiCommunicator(const CommunicatorOptions& opts);
bool MpiBuilt() { return true; }
#else
bool MpiBuilt() { return false; }
#endif

std::unique_ptr<Communicator> MakeCommunicator(const std::string& name, const CommunicatorOptions& opts) {
  FRUGAL_REQUIRE(name == "mpi", "--dist ", name, ": unknown; the only one is mpi");
#ifdef FRUGAL_HAVE_MPI
  return MakeMpiCommunicator(opts);
#else
  throw Error(
      "--dist mpi: this frugal was built without MPI support (install Debian's libopenmpi-dev and openmpi-bin, or "
      "run `make deps`, then reconfigure with -DFRUGAL_MPI=AUTO or ON)");
#endif
}

void Communicator::AllReduceAverageOnStream(const std::vector<std::pair<float*, int64_t>>&, cuda::Context*) {
  throw Error("this communicator does not take GPU buffers (use NCCL: frugal built with CUDA and NCCL)");
}

void Communicator::BroadcastAsync(uint64_t, float*, int64_t, int, const char* what,
                                  std::function<void(std::exception_ptr)>) {
  throw Error(Fmt(what, ": this communicator has no asynchronous broadcast of host buffers"));
}

std::vector<std::vector<Slice>> SliceAcrossRanks(const std::vector<int64_t>& sizes, int ranks) {
  CHECK_GE(ranks, 1);
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  const int64_t chunk = std::max<int64_t>(1, (total + ranks - 1) / ranks);
  std::vector<std::vector<Slice>> out(sizes.size());
  int64_t at = 0;  // where the tensor starts in the whole
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int64_t b = 0; b < sizes[i];) {
      const int owner = static_cast<int>((at + b) / chunk);
      const int64_t end = std::min(sizes[i], (owner + 1) * chunk - at);
      out[i].push_back({owner, b, end - b});
      b = end;
    }
    at += sizes[i];
  }
  return out;
}

// ------------------------------------------------------------------ metrics

bool MetricValues::Has(const std::string& name) const {
  for (const auto& [n, v] : values)
    if (n == name) return true;
  return false;
}

double MetricValues::Get(const std::string& name) const {
  for (const auto& [n, v] : values)
    if (n == name) return v;
  throw Error(Fmt("no metric ", name));
}

std::string MetricValues::ToString(const std::string& prefix) const {
  std::string s;
  char buf[64];
  for (const auto& [name, v] : values) {
    std::snprintf(buf, sizeof(buf), "%.6f", v);
    s += (s.empty() ? "" : " ") + prefix + name + "=" + buf;
  }
  return s;
}

uint64_t Checksum(const std::map<std::string, Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (const auto& [name, t] : tensors) {
    mix(name.data(), name.size());
    mix(t.f(), t.size() * sizeof(float));
  }
  return h;
}

// ------------------------------------------------------------------ DataParallel

DataParallel::DataParallel(const DistOptions& opts, const Executor& train, const std::map<std::string, Tensor>& grads,
                           const std::map<std::string, Var>& grad_vars, const std::map<std::string, Tensor>& sums)
    : comm_(opts.comm), check_every_(opts.check_every) {
  CHECK(comm_);
  if (!grads.empty()) device_ = grads.begin()->second.device();
  FRUGAL_REQUIRE(device_.type == DeviceType::kCPU || comm_->device_buffers(), "data-parallel training on ",
                 device_.ToString(), " needs a communicator of GPU buffers (NCCL), not this one");
  FRUGAL_REQUIRE(opts.bucket_bytes > 0, "--dist-bucket must be positive, got ", opts.bucket_bytes);
  // Position in the schedule of the last op writing each variable.
  std::map<Var, size_t> last_write;
  const auto& schedule = train.schedule();
  for (size_t i = 0; i < schedule.size(); ++i)
    for (Var v : schedule[i].writes) last_write[v] = i;
  std::vector<std::pair<size_t, std::string>> order;
  for (const auto& [name, g] : grads) {
    auto it = last_write.find(grad_vars.at(name));
    order.emplace_back(it == last_write.end() ? schedule.size() : it->second, name);
  }
  std::sort(order.begin(), order.end());
  int64_t bytes = opts.bucket_bytes;
  for (const auto& [pos, name] : order) {
    const Tensor& g = grads.at(name);
    // A gradient of a bucket's size or more is a bucket of its own, reduced
    // in place: the host buffers, copies of the gradients, then hold the
    // small ones only (a GPT's were as large as all its gradients).
    const bool alone = g.bytes() >= opts.bucket_bytes;
    if (alone || bytes >= opts.bucket_bytes) {
      buckets_.push_back(std::make_unique<Bucket>());
      bytes = 0;
    }
    Bucket* b = buckets_.back().get();
    b->names.push_back(name);
    b->grads.push_back(g);
    if (!sums.empty()) b->sums.push_back(sums.at(name));
    b->vars.push_back(grad_vars.at(name));
    bytes = alone ? opts.bucket_bytes : bytes + g.bytes();
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket* b = buckets_[k].get();
    int64_t n = 0;
    for (const Tensor& g : b->grads) n += g.size();
    if (device_.type == DeviceType::kCPU && b->grads.size() > 1) b->buf.resize(n);
    b->what = Fmt("allreduce(bucket ", k, ": ", b->names.front(), b->names.size() > 1 ? ", ..." : "", ")");
  }
}

DataParallel::~DataParallel() {
  if (order_engine_) order_engine_->DeleteVar(order_var_);
}

std::string DataParallel::Describe() const {
  std::string s = Fmt("data-parallel: rank ", rank(), " of ", size(), ", ", buckets_.size(), " gradient buckets (");
  for (size_t k = 0; k < buckets_.size(); ++k) {
    int64_t bytes = 0;
    for (const Tensor& g : buckets_[k]->grads) bytes += g.bytes();
    s += Fmt(k ? ", " : "", HumanBytes(bytes));
  }
  s += ")";
  if (check_every_ > 0) s += Fmt(", parameter checksums compared every ", check_every_, " updates");
  return s;
}

void DataParallel::PushAllReduceOnGpu(Engine* engine, bool of_sums) {
  if (!order_engine_) {
    order_engine_ = engine;
    order_var_ = engine->NewVar();
  }
  Communicator* comm = comm_;
  const int dev = device_.id;
  for (auto& bucket : buckets_) {
    Bucket* b = bucket.get();
    PushOptions o;
    o.name = b->what.c_str();
    o.device = device_;
    o.priority = 1 << 20;  // start the exchange as soon as the gradients are in
    std::vector<Var> writes = b->vars;
    writes.push_back(order_var_);
    engine->PushAsync(
        [b, comm, dev, of_sums](Done done) {
          backend::LaunchAsync(
              dev,
              [b, comm, of_sums](cuda::Context* cuda) {
                std::vector<std::pair<float*, int64_t>> bufs;
                for (const Tensor& g : of_sums ? b->sums : b->grads) bufs.emplace_back(g.f(), g.size());
                comm->AllReduceAverageOnStream(bufs, cuda);
              },
              std::move(done));
        },
        {}, writes, o);
  }
}

void DataParallel::PushAllReduce(Engine* engine, bool of_sums) {
  CHECK(!of_sums || buckets_.empty() || !buckets_[0]->sums.empty()) << "no gradient sums were given";
  if (comm_->device_buffers()) return PushAllReduceOnGpu(engine, of_sums);
  const float scale = 1.f / static_cast<float>(size());
  Communicator* comm = comm_;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket* b = buckets_[k].get();
    const uint64_t seq = comm->Reserve();
    const bool last = !of_sums && k + 1 == buckets_.size();
    PushOptions o;
    o.name = b->what.c_str();
    o.priority = 1 << 20;  // start the exchange as soon as the gradients are in
    engine->PushAsync(
        [b, seq, last, scale, comm, of_sums, trace = trace_](Done done) {
          std::vector<Tensor>& ts = of_sums ? b->sums : b->grads;
          // One gradient: in place; several: side by side in the buffer.
          float* data = b->buf.empty() ? ts[0].f() : b->buf.data();
          int64_t n = 0;
          for (const Tensor& g : ts) {
            if (!b->buf.empty()) std::copy(g.f(), g.f() + g.size(), data + n);
            n += g.size();
          }
          done = Traced(trace, kAllReduceRow, b->what, n * static_cast<int64_t>(sizeof(float)), std::move(done));
          comm->AllReduceSumAsync(seq, data, n, b->what.c_str(), last, [&ts, data, scale, done](std::exception_ptr e) {
            if (!e) {
              const float* src = data;
              for (Tensor& g : ts) {
                float* out = g.f();
                for (int64_t i = 0; i < g.size(); ++i) out[i] = src[i] * scale;
                src += g.size();
              }
            }
            done(e);
          });
        },
        {}, b->vars, o);
  }
}

void DataParallel::SetTrace(TraceWriter* trace) {
  trace_ = trace;
  if (!trace) return;
  trace->SetThreadName(kAllReduceRow, "all-reduces");
  trace->SetThreadName(kBroadcastRow, "broadcasts");
}

void DataParallel::PushGather(Engine* engine, const std::vector<SlicedTensor>& tensors) {
  CHECK(!comm_->device_buffers()) << "host buffers only (Train refuses --shard optimizer on GPUs)";
  Communicator* comm = comm_;
  for (const SlicedTensor& st : tensors) {
    for (const Slice& sl : st.slices) {
      const uint64_t seq = comm->Reserve();
      float* data = st.t.f() + sl.begin;
      PushOptions o;
      o.name = "broadcast(parameter slice)";
      o.priority = 1 << 20;  // the next forward waits for it
      engine->PushAsync(
          [comm, seq, data, sl, trace = trace_](Done done) {
            comm->BroadcastAsync(seq, data, sl.size, sl.owner, "broadcast(parameter slice)",
                                 Traced(trace, kBroadcastRow, Fmt("broadcast(slice of rank ", sl.owner, ")"),
                                        sl.size * static_cast<int64_t>(sizeof(float)), std::move(done)));
          },
          {}, {st.var}, o);
    }
  }
}

void DataParallel::GatherToRoot(const std::vector<Slice>& slices, const Tensor& own, const Tensor& whole) {
  CHECK_EQ(whole.defined(), rank() == 0);
  std::vector<float> scratch;
  for (const Slice& sl : slices) {
    float* at = nullptr;
    if (sl.owner == rank()) {
      CHECK_EQ(own.size(), sl.size);
      at = own.f();
    } else if (rank() == 0) {
      at = whole.f() + sl.begin;
    } else {
      scratch.resize(sl.size);
      at = scratch.data();
    }
    if (sl.owner != 0) comm_->Broadcast(at, sl.size, sl.owner, "broadcast(optimizer state slice)");
    if (rank() == 0 && sl.owner == 0) std::copy(at, at + sl.size, whole.f() + sl.begin);
  }
}

void DataParallel::Broadcast(std::map<std::string, Tensor>* tensors, const char* what) {
  for (auto& [name, t] : *tensors) comm_->Broadcast(t.f(), t.size(), 0, what);
}

void DataParallel::AverageAcrossRanks(const std::map<std::string, Tensor>& tensors) {
  for (const auto& [name, t] : tensors) {
    Tensor host = t.OnHost();
    std::vector<double> v(host.f(), host.f() + host.size());
    comm_->AllReduceSum(v.data(), static_cast<int64_t>(v.size()), "allreduce(aux state)");
    for (int64_t i = 0; i < host.size(); ++i) host.f()[i] = static_cast<float>(v[i] / size());
    if (t.on_gpu()) Tensor(t).CopyFrom(host);
  }
}

int64_t DataParallel::Min(int64_t v) {
  comm_->AllReduceMin(&v, 1, "allreduce(min)");
  return v;
}

int64_t DataParallel::Sum(int64_t v) {
  double d = static_cast<double>(v);
  comm_->AllReduceSum(&d, 1, "allreduce(sum)");
  return static_cast<int64_t>(std::llround(d));
}

// Means weighted by rows; perplexity (the exp of a mean) through its log.
MetricValues DataParallel::Reduce(const MetricValues& local) {
  std::vector<double> sums{static_cast<double>(local.count)};
  for (const auto& [name, v] : local.values)
    sums.push_back((name == "perplexity" ? std::log(std::max(v, 1e-300)) : v) * local.count);
  comm_->AllReduceSum(sums.data(), static_cast<int64_t>(sums.size()), "allreduce(metrics)");
  MetricValues global;
  global.count = static_cast<int64_t>(std::llround(sums[0]));
  for (size_t i = 0; i < local.values.size(); ++i) {
    const std::string& name = local.values[i].first;
    double v = global.count > 0 ? sums[i + 1] / sums[0] : 0;
    global.values.emplace_back(name, name == "perplexity" && global.count > 0 ? std::exp(v) : v);
  }
  return global;
}

void DataParallel::CheckConsistency(const std::map<std::string, Tensor>& params, int64_t update) {
  std::vector<uint64_t> sums = comm_->AllGather(Checksum(params), "allgather(parameter checksums)");
  std::string differ;
  for (int r = 1; r < size(); ++r)
    if (sums[r] != sums[0]) differ += Fmt(differ.empty() ? "rank " : ", rank ", r, Fmt(" (checksum ", sums[r], ")"));
  FRUGAL_REQUIRE(differ.empty(), "--dist-check-every: after update ", update, " the parameters of ", differ,
                 " differ from rank 0's (checksum ", sums[0], "); the ranks have diverged");
}

}  // namespace frugal
