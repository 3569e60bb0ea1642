#include "comm/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "comm/store_server.h"
#include "core/check.h"

extern char** environ;

namespace tandem::comm {

namespace {

std::atomic<int> g_stop_signal{0};

std::string random_token() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", rd());
  return out;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;  // read ends of captured output, -1 when inherited
  bool exited = false;
  RankExit result;
};

// Reads every child's pipes and emits whole lines, until told to stop and the pipes are drained.
class OutputPump {
 public:
  OutputPump(std::vector<Child>& children, const LaunchOptions& options) : options_(options) {
    for (auto& c : children) {
      if (c.out_fd >= 0) streams_.push_back({c.out_fd, c.rank, false, {}});
      if (c.err_fd >= 0) streams_.push_back({c.err_fd, c.rank, true, {}});
    }
    if (!streams_.empty()) thread_ = std::thread([this] { run(); });
  }
  ~OutputPump() { finish(); }
  void finish() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    for (auto& s : streams_)
      if (s.fd >= 0) ::close(s.fd);
    streams_.clear();
  }

 private:
  struct Stream {
    int fd;
    int rank;
    bool is_stderr;
    std::string pending;
  };

  void emit(Stream& s, const std::string& line) {
    if (options_.on_line) return options_.on_line(s.rank, s.is_stderr, line);
    std::string text = options_.prefix_output ? fmt::format("[rank {}] {}\n", s.rank, line) : line + "\n";
    std::lock_guard<std::mutex> lock(print_mutex_);
    std::FILE* f = s.is_stderr ? stderr : stdout;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fflush(f);
  }

  void run() {
    char buf[65536];
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<Stream*> owners;
      for (auto& s : streams_)
        if (s.fd >= 0) {
          fds.push_back({s.fd, POLLIN, 0});
          owners.push_back(&s);
        }
      if (fds.empty()) return;
      int rc = ::poll(fds.data(), fds.size(), 50);
      if (rc == 0 && stop_.load()) break;  // children are gone and nothing is left to read
      if (rc <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        Stream& s = *owners[i];
        ssize_t k = ::read(s.fd, buf, sizeof buf);
        if (k > 0) {
          s.pending.append(buf, static_cast<size_t>(k));
          size_t nl;
          while ((nl = s.pending.find('\n')) != std::string::npos) {
            emit(s, s.pending.substr(0, nl));
            s.pending.erase(0, nl + 1);
          }
        } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
          if (!s.pending.empty()) emit(s, s.pending);
          s.pending.clear();
          ::close(s.fd);
          s.fd = -1;
        }
      }
    }
    for (auto& s : streams_)
      if (!s.pending.empty()) emit(s, s.pending);
  }

  const LaunchOptions& options_;
  std::vector<Stream> streams_;
  std::atomic<bool> stop_{false};
  std::mutex print_mutex_;
  std::thread thread_;
};

std::string describe(const RankExit& e) {
  if (e.exit_code >= 0) return fmt::format("rank {} exited with code {}", e.rank, e.exit_code);
  return fmt::format("rank {} was killed by signal {} ({})", e.rank, -e.exit_code, ::strsignal(-e.exit_code));
}

void signal_all(std::vector<Child>& children, int sig) {
  for (auto& c : children)
    if (!c.exited) ::kill(-c.pid, sig);  // the child's whole process group
}

}  // namespace

void request_launch_stop(int signal_number) { g_stop_signal.store(signal_number); }

LaunchResult launch(const LaunchOptions& o) {
  TANDEM_CHECK(o.nproc_per_node >= 1, "--nproc-per-node must be at least 1 (got {})", o.nproc_per_node);
  TANDEM_CHECK(o.nnodes >= 1, "--nnodes must be at least 1 (got {})", o.nnodes);
  TANDEM_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, "--node-rank {} is outside [0, {})", o.node_rank,
               o.nnodes);
  TANDEM_CHECK(!o.command.empty(), "launch: no command to run (put it after --)");
  TANDEM_CHECK(o.master_port >= 0 && o.master_port <= 65535, "--master-port {} is out of range", o.master_port);
  TANDEM_CHECK(o.master_port != 0 || (o.nnodes == 1 && o.host_store),
               "--master-port is required with several nodes (every node must agree on it)");
  // No reset of g_stop_signal here: a stop asked for while this job is being
  // set up (SIGTERM, Ctrl-C) must stop it, not be forgotten.

  // The job's store, hosted here on node 0.
  std::map<std::string, std::string> job_env = o.env;
  std::unique_ptr<StoreServer> store;
  int port = o.master_port;
  if (o.host_store) {
    std::string token;
    if (const char* t = std::getenv("TANDEM_STORE_TOKEN")) token = t;
    if (job_env.count("TANDEM_STORE_TOKEN")) token = job_env["TANDEM_STORE_TOKEN"];
    if (token.empty() && o.nnodes == 1) token = random_token();
    if (o.node_rank == 0) {
      StoreServer::Options so;
      so.host = o.master_addr;
      so.port = o.master_port;
      so.token = token;
      store = std::make_unique<StoreServer>(so);
      port = store->port();
    }
    if (!token.empty() && !job_env.count("TANDEM_STORE_TOKEN")) job_env["TANDEM_STORE_TOKEN"] = token;
    if (!job_env.count("TANDEM_STORE_HOSTED")) job_env["TANDEM_STORE_HOSTED"] = "1";
  }

  const int world = o.nnodes * o.nproc_per_node;
  const bool capture = o.prefix_output || static_cast<bool>(o.on_line);
  std::vector<Child> children(static_cast<size_t>(o.nproc_per_node));
  const pid_t launcher_pid = ::getpid();

  for (int local = 0; local < o.nproc_per_node; ++local) {
    // Asked to stop while ranks are still being started (forking 1024 of
    // them takes seconds): start no more; the loop below stops those running.
    if (g_stop_signal.load() != 0) {
      children.resize(static_cast<size_t>(local));
      break;
    }
    Child& c = children[static_cast<size_t>(local)];
    c.rank = o.node_rank * o.nproc_per_node + local;
    // Build everything before fork: the child may only make async-signal-safe calls.
    std::map<std::string, std::string> vars;
    for (char** e = environ; *e; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq) vars[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
    }
    vars["RANK"] = std::to_string(c.rank);
    vars["LOCAL_RANK"] = std::to_string(local);
    vars["WORLD_SIZE"] = std::to_string(world);
    vars["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
    vars["GROUP_RANK"] = std::to_string(o.node_rank);
    vars["MASTER_ADDR"] = o.master_addr;
    vars["MASTER_PORT"] = std::to_string(port);
    vars["TANDEM_LAUNCH"] = "1";
    for (const auto& [k, v] : job_env) vars[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = o.command;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string exec_error = fmt::format("tandem launch: cannot run '{}' for rank {}: ", o.command[0], c.rank);

    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if (capture) {
      TANDEM_CHECK(::pipe2(out_pipe, O_CLOEXEC) == 0 && ::pipe2(err_pipe, O_CLOEXEC) == 0, "pipe: {}",
                   std::strerror(errno));
    }
    pid_t pid = ::fork();
    TANDEM_CHECK(pid >= 0, "fork: {}", std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher_pid) ::_exit(125);
      if (capture) {
        ::dup2(out_pipe[1], STDOUT_FILENO);
        ::dup2(err_pipe[1], STDERR_FILENO);
      }
      ::execvpe(argv[0], argv.data(), envp.data());
      int err = errno;
      ssize_t ignored = ::write(STDERR_FILENO, exec_error.data(), exec_error.size());
      const char* why = ::strerror(err);
      ignored = ::write(STDERR_FILENO, why, std::strlen(why));
      ignored = ::write(STDERR_FILENO, "\n", 1);
      (void)ignored;
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent, so kill(-pid) works at once
    c.pid = pid;
    if (capture) {
      ::close(out_pipe[1]);
      ::close(err_pipe[1]);
      c.out_fd = out_pipe[0];
      c.err_fd = err_pipe[0];
    }
  }

  OutputPump pump(children, o);
  LaunchResult result;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point kill_at{};
  bool stopping = false;
  int alive = static_cast<int>(children.size());
  if (children.empty()) {
    const int sig = g_stop_signal.exchange(0);
    result.exit_code = 128 + sig;
    result.message = fmt::format("interrupted by signal {} before any rank started", sig);
  }
  auto stop_all = [&] {
    if (stopping) return;
    stopping = true;
    signal_all(children, SIGTERM);
    kill_at = std::chrono::steady_clock::now() + o.grace;
  };

  while (alive > 0) {
    for (auto& c : children) {
      if (c.exited) continue;
      int status = 0;
      pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r != c.pid) continue;
      c.exited = true;
      --alive;
      c.result.rank = c.rank;
      c.result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      c.result.stopped_by_launcher = stopping;
      if (c.result.exit_code != 0 && !stopping && result.failed_rank < 0) {
        result.failed_rank = c.rank;
        result.exit_code = c.result.exit_code > 0 ? c.result.exit_code : 128 - c.result.exit_code;
        result.message = describe(c.result);
        if (o.stop_on_failure) {
          result.message += "; stopping the other ranks";
          stop_all();
        }
      }
    }
    if (alive == 0) break;
    auto now = std::chrono::steady_clock::now();
    if (o.timeout.count() > 0 && !stopping && now - start > o.timeout) {
      result.exit_code = 124;
      result.message = fmt::format("the job did not finish within {} ms; stopping every rank", o.timeout.count());
      stop_all();
    }
    if (int sig = g_stop_signal.exchange(0); sig != 0 && !stopping) {
      result.exit_code = 128 + sig;
      result.message = fmt::format("interrupted by signal {}; stopping every rank", sig);
      stop_all();
    }
    if (stopping && now > kill_at) {
      signal_all(children, SIGKILL);
      kill_at = now + std::chrono::hours(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pump.finish();
  for (auto& c : children) result.ranks.push_back(c.result);
  return result;
}

}  // namespace tandem::comm
