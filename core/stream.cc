#include "core/stream.h"

#include <array>
#include <utility>

#include "core/check.h"

#if TANDEM_WITH_CUDA
#include "core/cuda_check.h"
#endif

namespace tandem::cuda {

namespace {
constexpr int kMaxDevices = 64;
// Current stream per device and thread; a null handle means the legacy default stream.
thread_local std::array<Stream, kMaxDevices> tls_current{};
thread_local int tls_chosen_device = -1;  // see chosen_device()

void check_device_index(int device) {
  TANDEM_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index {} out of range", device);
}

std::string cuda_version_text(int v) { return v == 0 ? "none" : fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }
}  // namespace

std::string device_start_error(int error, const char* error_name, const char* error_text, int driver_version,
                               int runtime_version) {
  // "No GPU here" means CPU only: no device (cudaErrorNoDevice = 100), or no
  // NVIDIA driver at all (cudaErrorInsufficientDriver = 35 with no driver
  // version: a CI machine with the toolkit installed). Anything else is an
  // error: reading it as "no GPU" would silently skip every GPU test.
  constexpr int kInsufficientDriver = 35, kNoDevice = 100;
  if (error == kNoDevice || (error == kInsufficientDriver && driver_version == 0)) return "";
  return fmt::format("CUDA cannot start: {} ({}); the driver supports CUDA {}, this build's runtime is CUDA {}{}",
                     error_name, error_text, cuda_version_text(driver_version), cuda_version_text(runtime_version),
                     error == kInsufficientDriver ? " (update the driver, or build with an older CUDA toolkit)" : "");
}

bool built_with_cuda() {
#if TANDEM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

#if TANDEM_WITH_CUDA

static_assert(cudaErrorInsufficientDriver == 35 && cudaErrorNoDevice == 100, "device_start_error's error codes");

int device_count() {
  static const int count = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess) return n;
    (void)cudaGetLastError();
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);  // 0 when no driver is loaded at all
    (void)cudaRuntimeGetVersion(&runtime);
    const std::string error = device_start_error(e, cudaGetErrorName(e), cudaGetErrorString(e), driver, runtime);
    TANDEM_CHECK(error.empty(), "{}", error);
    return 0;
  }();
  return count;
}

void set_device(int index) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  tls_chosen_device = index;
}

DeviceGuard::DeviceGuard(int device) : previous_(tls_chosen_device), device_(device) {
  if (previous_ != device) TANDEM_CUDA_CHECK(cudaSetDevice(device));
  tls_chosen_device = device;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  tls_chosen_device = previous_;
}

std::string device_uuid(int index) {
  cudaDeviceProp prop{};
  TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  std::string hex = "GPU-";
  for (int i = 0; i < 16; ++i) {
    hex += fmt::format("{:02x}", static_cast<unsigned char>(prop.uuid.bytes[i]));
    if (i == 3 || i == 5 || i == 7 || i == 9) hex += '-';
  }
  return hex;
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return fmt::format("{}, {:.1f} GiB, compute capability {}.{}, {} multiprocessors, {} MiB L2", prop.name,
                     static_cast<double>(prop.totalGlobalMem) / (1ull << 30), prop.major, prop.minor,
                     prop.multiProcessorCount, prop.l2CacheSize >> 20);
}

std::string cuda_versions() {
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  const auto version = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  return fmt::format("driver {}, runtime {}", driver == 0 ? "none" : version(driver), version(runtime));
}

int current_device() {
  int d = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void device_synchronize() { TANDEM_CUDA_CHECK(cudaDeviceSynchronize()); }

Stream Stream::create(int device, bool high_priority) {
  check_device_index(device);
  TANDEM_CHECK(device < device_count(), "cannot create a stream on cuda:{}: {} CUDA device(s) present",
               device, device_count());
  cudaStream_t s = nullptr;
  {
    DeviceGuard guard(device);
    int least = 0, greatest = 0;
    TANDEM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    TANDEM_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, high_priority ? greatest : least));
  }
  Stream out;
  out.owner_ = std::shared_ptr<void>(s, [](void* p) { cudaStreamDestroy(static_cast<cudaStream_t>(p)); });
  out.handle_ = s;
  out.device_ = device;
  return out;
}

Stream Stream::default_stream(int device) {
  check_device_index(device);
  Stream out;
  out.device_ = device;
  return out;
}

void Stream::synchronize() const { TANDEM_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_))); }

bool Stream::query() const {
  cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (e == cudaErrorNotReady) return false;
  TANDEM_CUDA_CHECK(e);
  return true;
}

Event::Event(bool enable_timing) {
  TANDEM_CHECK(available(), "cannot create a CUDA event: no CUDA device is present");
  device_ = current_device();
  cudaEvent_t e = nullptr;
  TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
  handle_ = e;
}

Event::~Event() {
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

Event::Event(Event&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)), device_(o.device_) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = std::exchange(o.handle_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  TANDEM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream.handle())));
}

void Event::block(const Stream& stream) const {
  TANDEM_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle()), static_cast<cudaEvent_t>(handle_), 0));
}

void Event::synchronize() const { TANDEM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_))); }

bool Event::query() const {
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (e == cudaErrorNotReady) return false;
  TANDEM_CUDA_CHECK(e);
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  float ms = 0;
  TANDEM_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(end.handle_)));
  return ms;
}

#else  // !TANDEM_WITH_CUDA

namespace {
[[noreturn]] void no_cuda(const char* what) {
  TANDEM_FAIL("{}: Tandem was built without CUDA (configure with -DTANDEM_CUDA=ON)", what);
}
}  // namespace

int device_count() { return 0; }
void set_device(int) { no_cuda("set_device"); }
DeviceGuard::DeviceGuard(int device) : previous_(-1), device_(device) { no_cuda("DeviceGuard"); }
DeviceGuard::~DeviceGuard() = default;
std::string device_uuid(int) { no_cuda("device_uuid"); }
std::string device_description(int) { no_cuda("device_description"); }
std::string cuda_versions() { no_cuda("cuda_versions"); }
int current_device() { no_cuda("current_device"); }
void device_synchronize() { no_cuda("device_synchronize"); }
Stream Stream::create(int, bool) { no_cuda("Stream::create"); }
Stream Stream::default_stream(int device) {
  check_device_index(device);
  Stream out;
  out.device_ = device;
  return out;
}
void Stream::synchronize() const { no_cuda("Stream::synchronize"); }
bool Stream::query() const { no_cuda("Stream::query"); }
Event::Event(bool) { no_cuda("Event"); }
Event::~Event() = default;
Event::Event(Event&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)), device_(o.device_) {}
Event& Event::operator=(Event&& o) noexcept {
  handle_ = std::exchange(o.handle_, nullptr);
  device_ = o.device_;
  return *this;
}
void Event::record(const Stream&) { no_cuda("Event::record"); }
void Event::block(const Stream&) const { no_cuda("Event::block"); }
void Event::synchronize() const { no_cuda("Event::synchronize"); }
bool Event::query() const { no_cuda("Event::query"); }
float Event::elapsed_ms(const Event&) const { no_cuda("Event::elapsed_ms"); }

#endif

bool available() { return device_count() > 0; }

int chosen_device() { return tls_chosen_device; }

Stream current_stream(int device) {
  check_device_index(device);
  const Stream& s = tls_current[device];
  return s.handle() ? s : Stream::default_stream(device);
}

void set_current_stream(const Stream& stream) {
  check_device_index(stream.device());
  tls_current[stream.device()] = stream;
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { set_current_stream(previous_); }

}  // namespace tandem::cuda
