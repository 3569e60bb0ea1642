// Elapsed time as a double in a named unit, and back. Every timer in Tandem
// measures on a std::chrono clock (normally steady_clock) and reports
// fractional milliseconds or seconds; these helpers are the one spelling of
// that conversion, so a call site says its unit in the function's name:
//   milliseconds_between(a, b)   (b - a) in ms, negative when b is earlier
//   seconds_since(t0)            now - t0 in s, on t0's own clock
//   milliseconds_as_duration(x)  x ms as a steady_clock duration (rounded toward zero)
#pragma once

#include <chrono>
#include <ratio>

namespace tandem {

namespace elapsed_detail {
template <class Period, class Rep, class P>
double count(std::chrono::duration<Rep, P> d) {
  return std::chrono::duration<double, Period>(d).count();
}
}  // namespace elapsed_detail

template <class Clock, class Duration>
double seconds_between(std::chrono::time_point<Clock, Duration> a, std::chrono::time_point<Clock, Duration> b) {
  return elapsed_detail::count<std::ratio<1>>(b - a);
}

template <class Clock, class Duration>
double milliseconds_between(std::chrono::time_point<Clock, Duration> a, std::chrono::time_point<Clock, Duration> b) {
  return elapsed_detail::count<std::milli>(b - a);
}

template <class Clock, class Duration>
double microseconds_between(std::chrono::time_point<Clock, Duration> a, std::chrono::time_point<Clock, Duration> b) {
  return elapsed_detail::count<std::micro>(b - a);
}

template <class Clock, class Duration>
double nanoseconds_between(std::chrono::time_point<Clock, Duration> a, std::chrono::time_point<Clock, Duration> b) {
  return elapsed_detail::count<std::nano>(b - a);
}

template <class Clock, class Duration>
double seconds_since(std::chrono::time_point<Clock, Duration> t0) {
  return elapsed_detail::count<std::ratio<1>>(Clock::now() - t0);
}

template <class Clock, class Duration>
double milliseconds_since(std::chrono::time_point<Clock, Duration> t0) {
  return elapsed_detail::count<std::milli>(Clock::now() - t0);
}

template <class Clock, class Duration>
double nanoseconds_since(std::chrono::time_point<Clock, Duration> t0) {
  return elapsed_detail::count<std::nano>(Clock::now() - t0);
}

inline std::chrono::steady_clock::duration seconds_as_duration(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

inline std::chrono::steady_clock::duration milliseconds_as_duration(double ms) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace tandem
