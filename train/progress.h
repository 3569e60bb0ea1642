// What a training job prints on rank 0's console: whole lines (say) and the
// per-logging-step progress line, drawn as a bar that rewrites itself on a
// terminal and as plain lines when the output is a file or a pipe. Other
// ranks and quiet jobs print nothing.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::train {

class Progress {
 public:
  // `enabled`: this rank prints (rank 0, not quiet); whether stdout is a terminal is found out here.
  explicit Progress(bool enabled);

  // One line of its own (clears a bar drawn before it).
  void say(const std::string& line) const;
  // A logging step's line, with the bar and the time left on a terminal.
  void step(int64_t step, int64_t total_steps, double epoch, double loss, double learning_rate,
            double samples_per_second, double seconds_left) const;

 private:
  bool enabled_;
  bool tty_;
};

}  // namespace tandem::train
