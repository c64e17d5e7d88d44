// The memory-mode test program: methods whose allocated bytes the program counts itself.
//   ratio N      Big allocates 3 bytes for every byte Small allocates, interleaved, N rounds
//   threads N    the same on two threads (Worker.Big on one, Worker.Small on the other)
//   hold N       keep 64 x 1 MiB alive in Work.Holding while N rounds of Big and Small run
//   loop N       print "ready", then Big and Small in turn for N seconds (attach tests)
//   exit N       allocate, then Environment.Exit(N)
//   oom          allocate, then an array larger than the runtime allows (OutOfMemoryException)
// Deterministic lines go to stdout; the program's own byte counts to stderr as
// "counts big=B small=S total=T cpu_ms=C" (GC.GetAllocatedBytesForCurrentThread,
// GC.GetTotalAllocatedBytes, the process's CPU time so far).
using System;
using System.Collections.Generic;
using System.Threading;

namespace AllocTest
{
    public static class Work
    {
        public static object Keep;

        public static long Big(int rounds)
        {
            long before = GC.GetAllocatedBytesForCurrentThread();
            for (int i = 0; i < rounds; i++)
            {
                Keep = new byte[3000];
                Keep = new string('b', 1500);
            }
            return GC.GetAllocatedBytesForCurrentThread() - before;
        }

        public static long Holding(int rounds)
        {
            var held = new List<byte[]>();
            for (int i = 0; i < 64; i++)
                held.Add(new byte[1 << 20]);
            long churned = Big(rounds) + Small(rounds);
            GC.KeepAlive(held);
            return churned;
        }

        public static long Small(int rounds)
        {
            long before = GC.GetAllocatedBytesForCurrentThread();
            for (int i = 0; i < rounds; i++)
            {
                Keep = new byte[1000];
                Keep = new string('s', 500);
            }
            return GC.GetAllocatedBytesForCurrentThread() - before;
        }
    }

    public static class Program
    {
        // mono's reference assemblies (what mcs compiles against) lack it; CoreCLR has it
        static long Total()
        {
            var m = typeof(GC).GetMethod("GetTotalAllocatedBytes", new[] { typeof(bool) });
            return m == null ? -1 : (long)m.Invoke(null, new object[] { false });
        }

        static void Report(long big, long small)
        {
            Console.Error.WriteLine("counts big=" + big + " small=" + small + " total=" + Total()
                + " cpu_ms=" + (long)System.Diagnostics.Process.GetCurrentProcess().TotalProcessorTime.TotalMilliseconds);
        }

        static void Ratio(int n)
        {
            long big = 0, small = 0;
            for (int r = 0; r < n; r++)
            {
                big += Work.Big(1000);
                small += Work.Small(1000);
            }
            Console.WriteLine("ratio done");
            Report(big, small);
        }

        static void Threads(int n)
        {
            long big = 0, small = 0;
            var a = new Thread(() => { for (int r = 0; r < n; r++) big += Work.Big(1000); });
            var b = new Thread(() => { for (int r = 0; r < n; r++) small += Work.Small(1000); });
            a.Name = "big-worker";
            b.Name = "small-worker";
            a.Start(); b.Start(); a.Join(); b.Join();
            Console.WriteLine("threads done");
            Report(big, small);
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "ratio";
            int n = args.Length > 1 ? int.Parse(args[1]) : 200;
            switch (mode)
            {
                case "ratio": Ratio(n); return 0;
                case "threads": Threads(n); return 0;
                case "hold":
                    Ratio(n);
                    Work.Holding(1000 * n);
                    Ratio(n);
                    return 0;
                case "loop":
                    Console.WriteLine("ready");
                    Console.Out.Flush();
                    var until = DateTime.UtcNow.AddSeconds(n);
                    while (DateTime.UtcNow < until) { Work.Big(100); Work.Small(100); }
                    return 0;
                case "exit":
                    Ratio(20);
                    Console.Out.Flush();
                    Environment.Exit(n);
                    return 1;
                case "oom":
                    Ratio(20);
                    Console.Out.Flush();
                    var huge = new List<byte[]>();
                    huge.Add(new byte[int.MaxValue]);
                    return 1;
                default:
                    Console.Error.WriteLine("unknown mode " + mode);
                    return 3;
            }
        }
    }
}
