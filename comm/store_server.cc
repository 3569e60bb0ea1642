#include "comm/store_server.h"

#include <atomic>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it

#include <boost/asio.hpp>
#include <list>
#include <map>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/parse_number.h"

namespace tandem::comm {

namespace asio = boost::asio;
using asio::ip::tcp;
using wire::Op;
using wire::Status;

namespace {
constexpr int64_t kMaxWaitMs = 24LL * 3600 * 1000;

// Constant-time comparison, so the token cannot be guessed byte by byte from timing.
bool same_token(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}
}  // namespace

class Session;

struct Parked {
  std::shared_ptr<Session> session;
  std::vector<std::string> keys;
  bool is_get = false;
  std::unique_ptr<asio::steady_timer> timer;
};

struct StoreServer::Impl {
  // Declared first so it outlives the io_context: sessions destroyed during
  // the io_context's shutdown still decrement it.
  std::atomic<int> connections{0};
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Options options;
  std::map<std::string, std::string> data;
  std::list<Parked> parked;
  std::thread thread;

  void accept();
  void on_change();
  void answer(std::list<Parked>::iterator it, bool timed_out);
  bool all_present(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (!data.count(k)) return false;
    return true;
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, StoreServer::Impl& server) : socket_(std::move(socket)), server_(server) {
    server_.connections.fetch_add(1);
    authenticated_ = server_.options.token.empty();
  }
  ~Session() { server_.connections.fetch_sub(1); }

  void read_header() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_), [self](boost::system::error_code ec, size_t) {
      if (ec) return self->close();
      uint32_t n = wire::decode_length(self->header_);
      if (n == 0 || n > self->server_.options.max_message_bytes) return self->close();
      self->body_.resize(n);
      self->read_body();
    });
  }

  void reply(const wire::Writer& w) {
    out_ = w.frame();
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_), [self](boost::system::error_code ec, size_t) {
      if (ec || self->closing_) return self->close();
      self->read_header();
    });
  }

  // Answers, then closes (a refused token, a request the server cannot serve).
  void reply_and_close(const wire::Writer& w) {
    closing_ = true;
    reply(w);
  }

  void close() {
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  void read_body() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(body_), [self](boost::system::error_code ec, size_t) {
      if (ec) return self->close();
      try {
        self->handle();
      } catch (const std::exception&) {
        self->close();  // malformed: drop this client, keep serving the others
      }
    });
  }

  void handle();

  tcp::socket socket_;
  StoreServer::Impl& server_;
  unsigned char header_[4] = {};
  std::string body_;
  std::string out_;
  bool authenticated_ = false;
  bool closing_ = false;
};

void Session::handle() {
  wire::Reader r(body_);
  auto op = static_cast<Op>(r.u8());
  auto& data = server_.data;
  wire::Writer w;
  if (op == Op::Auth) {
    std::string token = r.bytes();
    TANDEM_CHECK(r.done(), "trailing bytes");
    if (server_.options.token.empty() || same_token(token, server_.options.token)) {
      authenticated_ = true;
      return reply(w.u8(static_cast<uint8_t>(Status::Ok)));
    }
    return reply_and_close(w.u8(static_cast<uint8_t>(Status::Unauthorized)));
  }
  if (!authenticated_) return reply_and_close(w.u8(static_cast<uint8_t>(Status::Unauthorized)));

  switch (op) {
    case Op::Set: {
      std::string key = r.bytes(), value = r.bytes();
      TANDEM_CHECK(r.done(), "trailing bytes");
      data[key] = std::move(value);
      reply(w.u8(static_cast<uint8_t>(Status::Ok)));
      server_.on_change();
      return;
    }
    case Op::Get:
    case Op::Wait: {
      std::vector<std::string> keys;
      if (op == Op::Get) {
        keys.push_back(r.bytes());
      } else {
        int64_t n = r.i64();
        TANDEM_CHECK(n >= 0 && n <= 1 << 20, "bad key count");
        for (int64_t i = 0; i < n; ++i) keys.push_back(r.bytes());
      }
      int64_t timeout_ms = std::clamp<int64_t>(r.i64(), 0, kMaxWaitMs);
      TANDEM_CHECK(r.done(), "trailing bytes");
      auto it = server_.parked.insert(server_.parked.end(), Parked{shared_from_this(), std::move(keys), op == Op::Get,
                                                                   nullptr});
      if (server_.all_present(it->keys)) return server_.answer(it, false);
      it->timer = std::make_unique<asio::steady_timer>(server_.io, std::chrono::milliseconds(timeout_ms));
      StoreServer::Impl* srv = &server_;
      Parked* p = &*it;
      it->timer->async_wait([srv, p](boost::system::error_code ec) {
        if (ec) return;  // cancelled: answered already
        for (auto i = srv->parked.begin(); i != srv->parked.end(); ++i)
          if (&*i == p) return srv->answer(i, true);
      });
      return;
    }
    case Op::Add: {
      std::string key = r.bytes();
      int64_t delta = r.i64();
      TANDEM_CHECK(r.done(), "trailing bytes");
      int64_t v = 0;
      auto found = data.find(key);
      if (found != data.end()) {
        const std::optional<int64_t> stored = parse_int64(found->second);
        if (!stored)
          return reply(w.u8(static_cast<uint8_t>(Status::BadRequest)).bytes("value of '" + key + "' is not an integer"));
        v = *stored;
      }
      v += delta;
      data[key] = std::to_string(v);
      reply(w.u8(static_cast<uint8_t>(Status::Ok)).i64(v));
      server_.on_change();
      return;
    }
    case Op::CompareSet: {
      std::string key = r.bytes(), expected = r.bytes(), desired = r.bytes();
      TANDEM_CHECK(r.done(), "trailing bytes");
      auto found = data.find(key);
      bool swap = found == data.end() ? expected.empty() : found->second == expected;
      if (swap) data[key] = desired;
      reply(w.u8(static_cast<uint8_t>(Status::Ok)).bytes(data.count(key) ? data[key] : std::string()));
      if (swap) server_.on_change();
      return;
    }
    case Op::Check: {
      int64_t n = r.i64();
      TANDEM_CHECK(n >= 0 && n <= 1 << 20, "bad key count");
      bool all = true;
      for (int64_t i = 0; i < n; ++i) all = data.count(r.bytes()) > 0 && all;
      TANDEM_CHECK(r.done(), "trailing bytes");
      return reply(w.u8(static_cast<uint8_t>(Status::Ok)).i64(all ? 1 : 0));
    }
    case Op::Delete: {
      std::string key = r.bytes();
      TANDEM_CHECK(r.done(), "trailing bytes");
      return reply(w.u8(static_cast<uint8_t>(Status::Ok)).i64(data.erase(key) ? 1 : 0));
    }
    default:
      TANDEM_FAIL("unknown store op {}", static_cast<int>(op));
  }
}

void StoreServer::Impl::accept() {
  acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), *this)->read_header();
    }
    accept();
  });
}

void StoreServer::Impl::on_change() {
  for (auto it = parked.begin(); it != parked.end();) {
    auto next = std::next(it);
    if (all_present(it->keys)) answer(it, false);
    it = next;
  }
}

void StoreServer::Impl::answer(std::list<Parked>::iterator it, bool timed_out) {
  wire::Writer w;
  if (!timed_out) {
    w.u8(static_cast<uint8_t>(Status::Ok));
    if (it->is_get) w.bytes(data[it->keys[0]]);
  } else {
    w.u8(static_cast<uint8_t>(Status::Timeout));
    std::vector<std::string> missing;
    for (const auto& k : it->keys)
      if (!data.count(k)) missing.push_back(k);
    w.i64(static_cast<int64_t>(missing.size()));
    for (const auto& k : missing) w.bytes(k);
  }
  if (it->timer) it->timer->cancel();
  std::shared_ptr<Session> session = std::move(it->session);
  parked.erase(it);
  session->reply(w);
}

StoreServer::StoreServer(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  TANDEM_CHECK(impl_->options.port >= 0 && impl_->options.port <= 65535, "store port {} is out of range",
               impl_->options.port);
  try {
    tcp::resolver resolver(impl_->io);
    auto results = resolver.resolve(impl_->options.host, std::to_string(impl_->options.port),
                                    tcp::resolver::numeric_service | tcp::resolver::passive);
    tcp::endpoint endpoint = *results.begin();
    impl_->acceptor.open(endpoint.protocol());
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl_->acceptor.bind(endpoint);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    TANDEM_FAIL("store server cannot listen on {}:{}: {}", impl_->options.host, impl_->options.port,
                e.code().message());
  }
  impl_->options.port = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

StoreServer::~StoreServer() {
  impl_->io.stop();
  impl_->thread.join();
  impl_->parked.clear();
}

int StoreServer::port() const { return impl_->options.port; }
const std::string& StoreServer::host() const { return impl_->options.host; }
int StoreServer::open_connections() const { return impl_->connections.load(); }

bool StoreServer::wait_until_idle(std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (impl_->connections.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace tandem::comm
