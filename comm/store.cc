#include "comm/store.h"

#include "comm/store_server.h"
#include "comm/store_wire.h"
#include "core/check.h"

namespace tandem::comm {

using wire::Op;
using wire::Status;

namespace {
// How long past a server-side wait the client allows for the answer to arrive.
constexpr std::chrono::milliseconds kReplySlack{5000};
}  // namespace

Store::Store(const std::string& host, int port, StoreOptions options)
    : options_(std::move(options)), address_(join_host_port(host, port)) {
  socket_ = Socket::connect(host, port, deadline_after(options_.timeout), "the store");
  if (!options_.token.empty()) {
    std::string reply = request(wire::Writer().u8(static_cast<uint8_t>(Op::Auth)).bytes(options_.token).frame(),
                                std::chrono::milliseconds(0));
    (void)reply;
  }
}

Store::~Store() {
  socket_.close();
  // Other ranks may still be finishing their last requests: let them, briefly.
  if (hosted_) hosted_->wait_until_idle(std::chrono::seconds(10));
}

std::shared_ptr<Store> Store::host(const std::string& host, int port, StoreOptions options) {
  StoreServer::Options so;
  so.host = host;
  so.port = port;
  so.token = options.token;
  auto server = std::make_shared<StoreServer>(so);
  auto client = std::make_shared<Store>(host == "0.0.0.0" ? "127.0.0.1" : host, server->port(), options);
  client->hosted_ = std::move(server);
  return client;
}

std::string Store::request(const std::string& frame, std::chrono::milliseconds server_wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(socket_.valid(), "the connection to the store at {} was closed by an earlier error", address_);
  auto deadline = deadline_after(options_.timeout + server_wait + kReplySlack);
  std::string peer = "the store at " + address_;
  try {
    socket_.send_all(frame.data(), frame.size(), deadline, peer);
    unsigned char header[4];
    socket_.recv_all(header, 4, deadline, peer);
    uint32_t n = wire::decode_length(header);
    TANDEM_CHECK(n >= 1 && n <= wire::kMaxFrameBytes, "{} sent a malformed reply", peer);
    std::string payload(n, '\0');
    socket_.recv_all(payload.data(), n, deadline, peer);
    auto status = static_cast<Status>(static_cast<unsigned char>(payload[0]));
    if (status == Status::Unauthorized) {
      socket_.close();
      TANDEM_FAIL("{} rejected this client: wrong or missing token (set TANDEM_STORE_TOKEN to the job's token)", peer);
    }
    return payload;
  } catch (...) {
    socket_.close();  // the stream is out of step now; never reuse it
    throw;
  }
}

void Store::set(const std::string& key, const std::string& value) {
  request(wire::Writer().u8(static_cast<uint8_t>(Op::Set)).bytes(key).bytes(value).frame(), {});
}

std::string Store::get(const std::string& key) { return get(key, options_.timeout); }

std::string Store::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::string reply =
      request(wire::Writer().u8(static_cast<uint8_t>(Op::Get)).bytes(key).i64(timeout.count()).frame(), timeout);
  wire::Reader r(reply);
  auto status = static_cast<Status>(r.u8());
  TANDEM_CHECK(status == Status::Ok, "store key '{}' was not set within {} ms", key, timeout.count());
  return r.bytes();
}

int64_t Store::add(const std::string& key, int64_t delta) {
  std::string reply = request(wire::Writer().u8(static_cast<uint8_t>(Op::Add)).bytes(key).i64(delta).frame(), {});
  wire::Reader r(reply);
  auto status = static_cast<Status>(r.u8());
  TANDEM_CHECK(status == Status::Ok, "store add on '{}': {}", key, r.bytes());
  return r.i64();
}

std::string Store::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  std::string reply = request(
      wire::Writer().u8(static_cast<uint8_t>(Op::CompareSet)).bytes(key).bytes(expected).bytes(desired).frame(), {});
  wire::Reader r(reply);
  r.u8();
  return r.bytes();
}

std::vector<std::string> Store::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Op::Wait)).i64(static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) w.bytes(k);
  std::string reply = request(w.i64(timeout.count()).frame(), timeout);
  wire::Reader r(reply);
  std::vector<std::string> missing;
  if (static_cast<Status>(r.u8()) == Status::Timeout) {
    int64_t n = r.i64();
    for (int64_t i = 0; i < n; ++i) missing.push_back(r.bytes());
  }
  return missing;
}

bool Store::check(const std::vector<std::string>& keys) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(Op::Check)).i64(static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) w.bytes(k);
  std::string reply = request(w.frame(), {});
  wire::Reader r(reply);
  r.u8();
  return r.i64() != 0;
}

bool Store::remove(const std::string& key) {
  std::string reply = request(wire::Writer().u8(static_cast<uint8_t>(Op::Delete)).bytes(key).frame(), {});
  wire::Reader r(reply);
  r.u8();
  return r.i64() != 0;
}

}  // namespace tandem::comm
