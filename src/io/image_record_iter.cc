// ImageRecordIter: batches of augmented images from a RecordIO file, decoded
// on a pool of worker threads, `prefetch` batches ahead. See frugal/io.h.
//
// Each batch owns a slot (a data and a label buffer). Next() schedules the
// batches up to `prefetch` ahead of the one it returns, one task per row;
// workers decode rows into the slot in any order, and the last row done
// wakes Next(). A row's content depends only on (seed, epoch, record number),
// so neither the thread count nor scheduling changes a batch.
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "frugal/io.h"
#include "frugal/recordio.h"
#include "io/imgcodecs.h"
#include "io/order.h"

namespace frugal {

struct ImageRecordIter::Impl {
  struct Slot {
    int64_t batch = -1;
    std::vector<float> data, label;
    int64_t pending = 0;  // rows not yet done
    std::string error;    // the first error of a row, if any
  };
  struct Task {
    Slot* slot;
    int64_t row, sample, epoch;  // sample: the record number, an index into offsets
  };

  ImageRecordIterOptions o;
  std::unique_ptr<RecordReader> reader;
  std::vector<int64_t> offsets;  // every record, in file order (a part reads its rows of each batch)
  int64_t sample_size = 0, label_size = 0;
  int64_t epoch = 0, position = 0, scheduled = 0;  // scheduled: batches handed to workers
  std::vector<int64_t> order;

  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::deque<Task> queue;
  bool stop = false;
  std::vector<Slot> slots;
  std::vector<std::thread> workers;

  void Work();
  void Run(const Task& t);
  void Schedule(int64_t batch);
  void Drain();
  int64_t Batches() const {
    return io::PartBatchCount(static_cast<int64_t>(offsets.size()), o.batch_size, o.shard.num_parts);
  }
  int64_t First(int64_t batch) const {
    return io::PartFirst(batch, o.batch_size, o.shard.part_index, o.shard.num_parts);
  }
};

// Decodes one row into its slot; errors are kept for Next() to throw.
void ImageRecordIter::Impl::Run(const Task& t) {
  const int64_t record = t.sample;
  const int64_t offset = offsets[t.sample];
  const std::string where = Fmt(o.path, ": record ", record, " (byte offset ", offset, ")");
  std::string error;
  try {
    ImageRecord r = UnpackImageRecord(reader->ReadAt(offset), where);
    FRUGAL_REQUIRE(static_cast<int64_t>(r.labels.size()) >= o.label_width, where, ": the record has ", r.labels.size(),
                   " labels but label_width is ", o.label_width,
                   " (make the .rec from a list with that many label columns, or lower label_width)");
    float* label = t.slot->label.data() + t.row * label_size;
    for (int64_t i = 0; i < label_size; ++i) label[i] = r.labels[i];
    DecodeAugmentImage(r.image, o.data_shape, o.aug, o.seed, t.epoch, record, where,
                       t.slot->data.data() + t.row * sample_size);
  } catch (const std::exception& e) { error = e.what(); }
  std::lock_guard<std::mutex> lock(mu);
  if (!error.empty() && t.slot->error.empty()) t.slot->error = error;
  if (--t.slot->pending == 0) done_cv.notify_all();
}

void ImageRecordIter::Impl::Work() {
  for (;;) {
    Task t;
    {
      std::unique_lock<std::mutex> lock(mu);
      work_cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (stop) return;
      t = queue.front();
      queue.pop_front();
    }
    Run(t);
  }
}

void ImageRecordIter::Impl::Schedule(int64_t batch) {
  Slot& slot = slots[batch % slots.size()];
  const int64_t n = static_cast<int64_t>(offsets.size());
  std::lock_guard<std::mutex> lock(mu);
  slot.batch = batch;
  slot.pending = o.batch_size;
  slot.error.clear();
  // Rows past the end wrap to the start of this epoch's order.
  for (int64_t r = 0; r < o.batch_size; ++r) queue.push_back({&slot, r, order[(First(batch) + r) % n], epoch});
  work_cv.notify_all();
}

// Cancels queued rows and waits for the running ones: afterwards no worker
// touches a slot.
void ImageRecordIter::Impl::Drain() {
  std::unique_lock<std::mutex> lock(mu);
  for (const Task& t : queue) --t.slot->pending;
  queue.clear();
  done_cv.wait(lock, [&] {
    for (const Slot& s : slots)
      if (s.pending != 0) return false;
    return true;
  });
}

ImageRecordIter::ImageRecordIter(const ImageRecordIterOptions& opts) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = opts;
  const std::string& p = opts.path;
  const Shape& s = opts.data_shape;
  FRUGAL_REQUIRE(s.known() && s.ndim() == 3 && (s[0] == 1 || s[0] == 3) && s[1] >= 1 && s[2] >= 1, p,
                 ": image data shape must be (c,h,w) with c 1 (grey) or 3 (RGB), not ", s,
                 " (set data.sample_shape, e.g. [3, 224, 224])");
  FRUGAL_REQUIRE(opts.batch_size >= 1, p, ": batch_size is ", opts.batch_size, " but must be >= 1");
  FRUGAL_REQUIRE(opts.threads >= 1 && opts.threads <= 256, p, ": threads is ", opts.threads, " but must be 1 to 256");
  FRUGAL_REQUIRE(opts.prefetch >= 0 && opts.prefetch <= 64, p, ": prefetch is ", opts.prefetch, " but must be 0 to 64");
  FRUGAL_REQUIRE(opts.label_width >= 1, p, ": label_width is ", opts.label_width, " but must be >= 1");
  const Augment& a = opts.aug;
  FRUGAL_REQUIRE(a.resize >= 0 && a.pad >= 0, p, ": augment resize ", a.resize, " and pad ", a.pad, " must be >= 0");
  FRUGAL_REQUIRE(
      0 < a.min_area && a.min_area <= a.max_area && a.max_area <= 1 && 0 < a.min_ratio && a.min_ratio <= a.max_ratio, p,
      ": augment areas [", a.min_area, ", ", a.max_area, "] and ratios [", a.min_ratio, ", ", a.max_ratio,
      "] must satisfy 0 < min_area <= max_area <= 1 and 0 < min_ratio <= max_ratio");
  CheckNormalisation(a, s[0], p);
  FRUGAL_REQUIRE(std::isfinite(a.scale) && a.scale != 0, p, ": recordio.scale ", a.scale,
                 " must be a number other than 0 (pixel * scale; 1/255 by default)");
  io::CheckShard(opts.shard, p);
  imgcodecs::Load();
  m.reader = std::make_unique<RecordReader>(p);
  m.offsets = RecordOffsets(*m.reader, opts.index_path);
  FRUGAL_REQUIRE(!m.offsets.empty(), p, ": the RecordIO file holds no records (make it with `frugal im2rec`)");
  m.sample_size = s.Size();
  m.label_size = opts.label_width;
  m.slots.resize(opts.prefetch + 1);
  for (Impl::Slot& slot : m.slots) {
    slot.data.resize(opts.batch_size * m.sample_size);
    slot.label.resize(opts.batch_size * m.label_size);
  }
  for (int i = 0; i < opts.threads; ++i) m.workers.emplace_back([&m] { m.Work(); });
  Reset(0);
}

ImageRecordIter::~ImageRecordIter() {
  Impl& m = *impl_;
  m.Drain();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stop = true;
  }
  m.work_cv.notify_all();
  for (std::thread& t : m.workers) t.join();
}

void ImageRecordIter::Reset(int64_t epoch) {
  Impl& m = *impl_;
  FRUGAL_REQUIRE(epoch >= 0, m.o.path, ": epoch is ", epoch, " but must be >= 0");
  m.Drain();
  m.epoch = epoch;
  m.position = 0;
  m.scheduled = 0;
  m.order = io::EpochOrder(static_cast<int64_t>(m.offsets.size()), m.o.shuffle, m.o.seed, epoch);
}

bool ImageRecordIter::Next(float* data, float* label, int64_t* num_valid) {
  Impl& m = *impl_;
  const int64_t batches = m.Batches();
  if (m.position >= batches) return false;
  FRUGAL_REQUIRE(data != nullptr && label != nullptr, m.o.path, ": Next needs data and label buffers");
  // Keep `prefetch` batches in flight beyond this one.
  while (m.scheduled < std::min(batches, m.position + m.o.prefetch + 1)) m.Schedule(m.scheduled++);
  Impl::Slot& slot = m.slots[m.position % m.slots.size()];
  std::string error;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.done_cv.wait(lock, [&] { return slot.pending == 0; });
    error.swap(slot.error);
  }
  ++m.position;
  if (!error.empty()) throw Error(error);
  std::copy(slot.data.begin(), slot.data.end(), data);
  std::copy(slot.label.begin(), slot.label.end(), label);
  const int64_t n = static_cast<int64_t>(m.offsets.size());
  if (num_valid != nullptr) *num_valid = io::ValidRows(n, m.First(m.position - 1), m.o.batch_size);
  return true;
}

int64_t ImageRecordIter::batch_size() const { return impl_->o.batch_size; }
Shape ImageRecordIter::sample_shape() const { return impl_->o.data_shape; }
Shape ImageRecordIter::label_shape() const {
  return impl_->o.label_width == 1 ? Shape(std::vector<int64_t>{}) : Shape{impl_->o.label_width};
}
int64_t ImageRecordIter::num_samples() const { return static_cast<int64_t>(impl_->offsets.size()); }
int64_t ImageRecordIter::batches_per_epoch() const { return impl_->Batches(); }

std::string ImageRecordIter::Describe() const {
  const Impl& m = *impl_;
  const Augment& a = m.o.aug;
  std::string aug;
  if (a.resize > 0) aug += Fmt(" resize ", a.resize);
  if (a.rand_resized_crop)
    aug +=
        Fmt(" rand_resized_crop area [", a.min_area, ",", a.max_area, "] ratio [", a.min_ratio, ",", a.max_ratio, "]");
  if (!a.rand_resized_crop && a.pad > 0) aug += Fmt(" pad ", a.pad);
  if (!a.rand_resized_crop) aug += a.rand_crop ? " rand_crop" : " centre_crop";
  if (a.mirror) aug += " mirror";
  return Fmt(m.o.path, ": ", m.offsets.size(), " images decoded to ", m.o.data_shape, " on ", m.o.threads,
             " threads, batch ", m.o.batch_size, m.o.shuffle ? ", shuffled" : "",
             io::DescribePart(m.o.shard, m.o.batch_size), ", augment:", aug);
}

}  // namespace frugal
