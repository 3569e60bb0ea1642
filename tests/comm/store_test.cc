// The rendezvous store: its operations, waits that time out naming the keys,
// tokens, and a server that survives garbage.
#include <gtest/gtest.h>

#include <thread>

#include "comm/socket.h"
#include "comm/store.h"
#include "comm/store_server.h"
#include "core/check.h"

namespace tandem::comm {
namespace {

using namespace std::chrono_literals;

StoreOptions quick(std::string token = "") {
  StoreOptions o;
  o.timeout = 2000ms;
  o.token = std::move(token);
  return o;
}

TEST(Store, SetThenGetReturnsTheValue) {
  StoreServer server({});
  Store store("127.0.0.1", server.port(), quick());
  store.set("k", std::string("v\0w", 3));
  EXPECT_EQ(store.get("k"), std::string("v\0w", 3));
}

TEST(Store, AddCountsFromZeroAndIsSharedBetweenClients) {
  StoreServer server({});
  Store a("127.0.0.1", server.port(), quick()), b("127.0.0.1", server.port(), quick());
  EXPECT_EQ(a.add("n", 2), 2);
  EXPECT_EQ(b.add("n", 5), 7);
  EXPECT_EQ(a.get("n"), "7");
}

TEST(Store, AddOnANonIntegerIsAnErrorNamingTheKey) {
  StoreServer server({});
  Store store("127.0.0.1", server.port(), quick());
  store.set("name", "alice");
  try {
    store.add("name", 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("name"), std::string::npos) << e.what();
  }
}

TEST(Store, CompareSetSwapsOnlyOnAMatch) {
  StoreServer server({});
  Store store("127.0.0.1", server.port(), quick());
  EXPECT_EQ(store.compare_set("k", "", "first"), "first");  // missing key matches ""
  EXPECT_EQ(store.compare_set("k", "", "second"), "first");
  EXPECT_EQ(store.compare_set("k", "first", "third"), "third");
}

TEST(Store, DeleteAndCheck) {
  StoreServer server({});
  Store store("127.0.0.1", server.port(), quick());
  store.set("a", "1");
  EXPECT_TRUE(store.check({"a"}));
  EXPECT_FALSE(store.check({"a", "b"}));
  EXPECT_TRUE(store.remove("a"));
  EXPECT_FALSE(store.remove("a"));
  EXPECT_FALSE(store.check({"a"}));
}

TEST(Store, GetWaitsForAKeySetLater) {
  StoreServer server({});
  Store reader("127.0.0.1", server.port(), quick()), writer("127.0.0.1", server.port(), quick());
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    writer.set("late", "here");
  });
  EXPECT_EQ(reader.get("late", 5000ms), "here");
  late.join();
}

TEST(Store, GetTimesOutNamingTheKey) {
  StoreServer server({});
  Store store("127.0.0.1", server.port(), quick());
  try {
    store.get("never", 100ms);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'never' was not set within 100 ms"), std::string::npos) << e.what();
  }
}

TEST(Store, WaitReportsExactlyTheMissingKeys) {
  StoreServer server({});
  Store store("127.0.0.1", server.port(), quick());
  store.set("rank/0", "x");
  store.set("rank/2", "x");
  EXPECT_EQ(store.wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 100ms),
            (std::vector<std::string>{"rank/1", "rank/3"}));
  store.set("rank/1", "x");
  store.set("rank/3", "x");
  EXPECT_TRUE(store.wait({"rank/0", "rank/1", "rank/2", "rank/3"}, 100ms).empty());
}

TEST(Store, ConnectingToNoServerFailsAfterTheTimeout) {
  int port;
  {
    StoreServer server({});
    port = server.port();
  }
  StoreOptions o;
  o.timeout = 200ms;
  EXPECT_THROW(Store("127.0.0.1", port, o), Error);
}

TEST(Store, ServerBindsToLoopbackByDefault) {
  StoreServer server({});
  EXPECT_EQ(server.host(), "127.0.0.1");
}

TEST(StoreAuth, TheRightTokenIsAccepted) {
  StoreServer::Options so;
  so.token = "s3cret";
  StoreServer server(so);
  Store store("127.0.0.1", server.port(), quick("s3cret"));
  store.set("k", "v");
  EXPECT_EQ(store.get("k"), "v");
}

TEST(StoreAuth, AWrongTokenIsRejectedWithAClearError) {
  StoreServer::Options so;
  so.token = "s3cret";
  StoreServer server(so);
  try {
    Store store("127.0.0.1", server.port(), quick("guess"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token"), std::string::npos) << e.what();
  }
}

TEST(StoreAuth, AClientWithoutATokenCannotReadOrWrite) {
  StoreServer::Options so;
  so.token = "s3cret";
  StoreServer server(so);
  Store good("127.0.0.1", server.port(), quick("s3cret"));
  good.set("k", "v");
  Store anonymous("127.0.0.1", server.port(), quick());
  EXPECT_THROW(anonymous.get("k", 100ms), Error);
  EXPECT_THROW(anonymous.set("k", "overwritten"), Error);  // its connection was closed
  EXPECT_EQ(good.get("k"), "v");
}

// Sends raw bytes and reports whether the server closed the connection.
bool server_closes_after(int port, const std::string& bytes) {
  auto deadline = deadline_after(2000ms);
  Socket s = Socket::connect("127.0.0.1", port, deadline, "the store");
  s.send_all(bytes.data(), bytes.size(), deadline, "the store");
  char c;
  try {
    s.recv_all(&c, 1, deadline, "the store");
  } catch (const Error& e) {
    return std::string(e.what()).find("closed") != std::string::npos;
  }
  return false;
}

TEST(StoreRobustness, GarbageClosesThatConnectionAndTheServerKeepsServing) {
  StoreServer server({});
  Store client("127.0.0.1", server.port(), quick());
  client.set("k", "v");
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>((i * 7919 + 13) & 0xff));
  // A plausible small length, then nonsense.
  garbage[0] = 16, garbage[1] = garbage[2] = garbage[3] = 0;
  EXPECT_TRUE(server_closes_after(server.port(), garbage));
  EXPECT_EQ(client.get("k"), "v");
}

TEST(StoreRobustness, AnOversizedLengthIsRefusedBeforeAllocating) {
  StoreServer server({});
  EXPECT_TRUE(server_closes_after(server.port(), std::string("\xff\xff\xff\xff", 4)));
  Store client("127.0.0.1", server.port(), quick());
  client.set("still", "alive");
  EXPECT_EQ(client.get("still"), "alive");
}

TEST(StoreRobustness, AFieldLongerThanItsMessageIsRejected) {
  StoreServer server({});
  // Frame of 6 bytes: op Set, then a key length of 1000 with one byte of key.
  std::string msg("\x06\x00\x00\x00\x02\xe8\x03\x00\x00k", 10);
  EXPECT_TRUE(server_closes_after(server.port(), msg));
  Store client("127.0.0.1", server.port(), quick());
  EXPECT_EQ(client.add("n", 1), 1);
}

TEST(StoreRobustness, AnUnknownOpIsRejected) {
  StoreServer server({});
  EXPECT_TRUE(server_closes_after(server.port(), std::string("\x01\x00\x00\x00\x63", 5)));
}

TEST(StoreRobustness, AClientVanishingWhileParkedDoesNotDisturbOthers) {
  StoreServer server({});
  {
    auto deadline = deadline_after(2000ms);
    Socket s = Socket::connect("127.0.0.1", server.port(), deadline, "the store");
    // Get "x" with a 200 ms timeout, then hang up without reading the answer.
    std::string msg("\x0e\x00\x00\x00\x03\x01\x00\x00\x00x\xc8\x00\x00\x00\x00\x00\x00\x00", 18);
    s.send_all(msg.data(), msg.size(), deadline, "the store");
  }
  std::this_thread::sleep_for(300ms);
  Store client("127.0.0.1", server.port(), quick());
  client.set("x", "1");
  EXPECT_EQ(client.get("x"), "1");
}

}  // namespace
}  // namespace tandem::comm
