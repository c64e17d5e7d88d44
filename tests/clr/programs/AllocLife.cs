// Memory mode's test program (tests/clr/test_alloc.py): allocations whose bytes and lives
// are known by construction.
//   ratio N     Work.Three allocates 3 bytes for each of Work.One's, N rounds
//   threads N   the same, Three on one thread and One on another
//   types N     Work.Wides allocates 3 bytes for each of Work.Narrows's, of two classes of
//               their own (Wide: 10 longs, Narrow: 2; 96 and 32 bytes on 64-bit), N x 1000 each
//   same N      Work.ThreeSame allocates 3 byte[1000] for each of Work.One's (one type, one size)
//   hold        64 x 1 MiB alive at once in Work.Hold, then dropped, then churn
//   compact     Work.Keep keeps 4000 x 4 KB (between as much garbage) in a static list;
//               a compacting GC (large objects too) moves them; churn; GC.Collect()
//   exit N      Work.Keep, then Environment.Exit(N)
//   crash       Work.Keep, then an unhandled exception
//   oom         Work.Keep, then an array larger than the runtime allows
// The methods are kept out of line: the JIT inlines a loop this small into its caller, and
// a stack snapshot (as any stack of JIT'd code) then shows the caller.
using System;
using System.Collections.Generic;
using System.Runtime;
using System.Runtime.CompilerServices;
using System.Threading;

namespace AllocLife
{
    public static class Kept
    {
        public static List<byte[]> Items = new List<byte[]>();
    }

    public sealed class Wide { public long A, B, C, D, E, F, G, H, I, J; }
    public sealed class Narrow { public long A, B; }

    public static class Work
    {
        public static object Sink;

        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static void Three(int n) { for (int i = 0; i < n; i++) Sink = new byte[3000]; }
        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static void One(int n) { for (int i = 0; i < n; i++) Sink = new byte[1000]; }
        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static void ThreeSame(int n) { for (int i = 0; i < 3 * n; i++) Sink = new byte[1000]; }
        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static void Wides(int n) { for (int i = 0; i < n; i++) Sink = new Wide(); }
        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static void Narrows(int n) { for (int i = 0; i < n; i++) Sink = new Narrow(); }
        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static void Churn(int n) { for (int i = 0; i < n; i++) Sink = new byte[500]; }

        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static void Keep(int n)
        {
            for (int i = 0; i < n; i++)
            {
                Kept.Items.Add(new byte[4000]);
                Sink = new byte[4000];
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)] // a stack snapshot sees no inlined frame
        public static int Hold()
        {
            var held = new List<byte[]>();
            for (int i = 0; i < 64; i++) held.Add(new byte[1 << 20]);
            GC.Collect();
            return held.Count;
        }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "ratio";
            int n = args.Length > 1 ? int.Parse(args[1]) : 20;
            switch (mode)
            {
                case "ratio":
                    for (int r = 0; r < n; r++) { Work.Three(1000); Work.One(1000); }
                    Console.WriteLine("ratio done");
                    return 0;
                case "types":
                    for (int r = 0; r < n; r++) { Work.Wides(1000); Work.Narrows(1000); }
                    Console.WriteLine("types done");
                    return 0;
                case "same":
                    for (int r = 0; r < n; r++) { Work.ThreeSame(1000); Work.One(1000); }
                    Console.WriteLine("same done");
                    return 0;
                case "threads":
                    var a = new Thread(() => { for (int r = 0; r < n; r++) Work.Three(1000); });
                    var b = new Thread(() => { for (int r = 0; r < n; r++) Work.One(1000); });
                    a.Start(); b.Start(); a.Join(); b.Join();
                    Console.WriteLine("threads done");
                    return 0;
                case "hold":
                    Console.WriteLine("held " + Work.Hold());
                    Work.Churn(100000);
                    return 0;
                case "compact":
                    Work.Keep(4000);
                    GCSettings.LargeObjectHeapCompactionMode = GCLargeObjectHeapCompactionMode.CompactOnce;
                    GC.Collect(2, GCCollectionMode.Forced, true, true);
                    Work.Churn(100000);
                    GC.Collect();
                    Console.WriteLine("kept " + Kept.Items.Count);
                    return 0;
                case "exit":
                    Work.Keep(1000);
                    Console.WriteLine("exiting");
                    Console.Out.Flush();
                    Environment.Exit(n);
                    return 1;
                case "crash":
                    Work.Keep(1000);
                    Console.WriteLine("crashing");
                    Console.Out.Flush();
                    throw new InvalidOperationException("boom");
                case "oom":
                    Work.Keep(1000);
                    Console.WriteLine("asking too much");
                    Console.Out.Flush();
                    Kept.Items.Add(new byte[int.MaxValue]);
                    return 1;
                default:
                    Console.Error.WriteLine("unknown mode " + mode);
                    return 3;
            }
        }
    }
}
