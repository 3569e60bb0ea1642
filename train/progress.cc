#include "train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace tandem::train {

namespace {

// "mm:ss", or "h:mm:ss" from an hour; "--:--" when unknown.
std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
                   : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

}  // namespace

Progress::Progress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(STDOUT_FILENO)) {}

void Progress::say(const std::string& line) const {
  if (!enabled_) return;
  if (tty_) std::fputs("\r\033[K", stdout);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

void Progress::step(int64_t step, int64_t total_steps, double epoch, double loss, double learning_rate,
                    double samples_per_second, double seconds_left) const {
  if (!enabled_) return;
  const std::string line = fmt::format("step {:>6}/{}  epoch {:.2f}  loss {:.4f}  lr {:.3g}  {:.0f} samples/s  ETA {}",
                                       step, total_steps, epoch, loss, learning_rate, samples_per_second,
                                       format_duration(seconds_left));
  if (!tty_) {
    say(line);
    return;
  }
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * static_cast<double>(step) / static_cast<double>(total_steps));
  std::printf("\r\033[K[%s%s] %s", std::string(static_cast<size_t>(filled), '#').c_str(),
              std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), line.c_str());
  std::fflush(stdout);
}

}  // namespace tandem::train
