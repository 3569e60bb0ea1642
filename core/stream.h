// CUDA streams and events as small value types, usable from CPU-only builds.
//
// A Stream is a shared handle: copies refer to the same cudaStream_t, which is
// destroyed with the last copy (the legacy default stream is never destroyed).
// An Event is owned (move-only). Each thread has a current stream per device;
// CUDA ops launch on it, and StreamGuard switches it for a scope, which is how
// DDP runs all-reduces on a comm stream while compute stays on its own.
//
// In a build without CUDA, or on a machine without a GPU, cuda::available() is
// false and creating a stream or event throws Error.
#pragma once

#include <memory>
#include <string>

namespace tandem::cuda {

bool built_with_cuda();
// 0 when not built with CUDA, or when the machine has no NVIDIA driver or no
// device. Any other start-up failure (a driver older than the runtime, a busy
// or broken device) throws Error naming it and both CUDA versions.
int device_count();
bool available();  // device_count() > 0
// The device's UUID as hex ("GPU-" + 32 digits, as nvidia-smi -L prints it): the
// same physical GPU under every CUDA_VISIBLE_DEVICES numbering.
std::string device_uuid(int index);
// One line for people: "NVIDIA H200, 140.4 GiB, compute capability 9.0, 132 multiprocessors, 60 MiB L2".
std::string device_description(int index);
// "driver 13.0, runtime 13.0": CUDA's versions ("driver none" where no NVIDIA driver is loaded).
std::string cuda_versions();
// Makes `index` this thread's device (and remembers that this thread chose one).
void set_device(int index);
int current_device();
// The device this thread chose through set_device or a DeviceGuard; -1 when
// it never chose one (CUDA then acts on device 0 once it is first used).
int chosen_device();
void device_synchronize();

// device_count()'s reading of a failed cudaGetDeviceCount: "" when it means
// "no GPU here", else the message to throw. Versions as CUDA encodes them
// (13000 = 13.0; 0 = no driver).
std::string device_start_error(int error, const char* error_name, const char* error_text, int driver_version,
                               int runtime_version);

class Stream {
 public:
  Stream() = default;  // the legacy default stream of device 0
  static Stream create(int device, bool high_priority = false);
  static Stream default_stream(int device);

  void* handle() const { return handle_; }  // a cudaStream_t
  int device() const { return device_; }
  void synchronize() const;
  bool query() const;  // true when all work queued so far is done
  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_ == o.device_; }

 private:
  std::shared_ptr<void> owner_;
  void* handle_ = nullptr;
  int device_ = 0;
};

class Event {
 public:
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void block(const Stream& stream) const;  // the stream waits (on the device) for this event
  void synchronize() const;                // the host waits
  bool query() const;
  float elapsed_ms(const Event& end) const;  // both recorded with timing enabled
  void* handle() const { return handle_; }

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

Stream current_stream(int device);
void set_current_stream(const Stream& stream);

// Makes `device` current for the lifetime of the guard. It restores the
// previous device only where this thread had chosen one: restoring "device 0"
// on a thread that never chose a device (a comm thread, a watchdog) would
// create a CUDA context on GPU 0 in every rank, hundreds of MiB each; such a
// thread keeps the guard's device instead.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;  // chosen_device() before the guard
  int device_;
};

// Makes `stream` current on its device for the lifetime of the guard.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

}  // namespace tandem::cuda
