// How busy the machine was while a bench ran: two shares of all CPU time between two readings
// of /proc (Linux), each negative when /proc cannot be read.
//   steal:  the time the hypervisor gave to other guests ("steal", /proc/stat): on a shared
//           virtual machine a busy spell shows up here;
//   others: the time the other processes of this machine ran (busy time of /proc/stat less this
//           process's utime + stime, /proc/self/stat; both in clock ticks).
// The timings of a spell where either is large mean little.
#pragma once

namespace saobp {

struct CpuTimes {
  double steal = 0, total = 0, busy = 0, self = 0;  // clock ticks since boot
  bool ok = false, self_ok = false;                 // /proc/stat, /proc/self/stat read
};
CpuTimes read_cpu_times();
// The share of CPU time between readings a and b that was stolen, or -1 when unknown.
double steal_fraction(const CpuTimes& a, const CpuTimes& b);
// The share of CPU time between readings a and b that other processes used, or -1 when unknown.
double others_fraction(const CpuTimes& a, const CpuTimes& b);

// The most resident memory this process has held so far (getrusage's ru_maxrss), in bytes; -1
// when it cannot be read.
double peak_rss_bytes();

}  // namespace saobp
