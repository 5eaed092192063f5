// Planted bug: waits for a flag nobody ever sets (a deadlock from the host's point of view).
// As a safety net for the test machine it gives up after `seconds` of %globaltimer, so the
// GPU is free again soon after the test has seen the timeout.
extern "C" __global__ void spin_on_flag(volatile int* flag, int seconds)
{
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*flag == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > 1000000000ull * (unsigned long long)seconds) break;
  }
}
