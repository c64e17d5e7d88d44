// A C# program for profkit's .NET sampling tests (EventPipe through the diagnostics port).
// Compiled at test time with mono's mcs; run on CoreCLR. Modes:
//   spin SECONDS          a hot method (Hot.Spin) on the main thread, "ready" once running
//   phases MS             three phases (Alpha, Beta, Gamma) of about MS ms each, each timed by
//                         the program's own Stopwatch and printed as "phase NAME MS"
//   threads N SECONDS     N threads each spinning in Hot.Worker, the main thread waiting
//   block SECONDS         the main thread asleep in Hot.Nap (a thread in external code)
//   phases-wait MS        "ready", then waits for a line on stdin before the phases (attach)
//   work N                a fixed amount of work (N rounds of Work.Round: calls and arithmetic),
//                         then "work MS" (wall) and "cpu MS" (the process's own CPU time)
// Each named method is kept out of line (NoInlining) so samples can name it.
// Every mode prints "ready" when its work has started and "done" at its end.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;

namespace SampleTest
{
    public static class Hot
    {
        public static volatile int Sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Spin(double seconds)
        {
            var clock = Stopwatch.StartNew();
            double acc = 0;
            while (clock.Elapsed.TotalSeconds < seconds)
            {
                for (int i = 1; i < 20000; i++) acc += Math.Sqrt(i) / i;
            }
            return acc;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Worker(object arg)
        {
            Sink += (int)Spin((double)arg);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Nap(int ms)
        {
            Thread.Sleep(ms);
        }
    }

    public static class Phases
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        static double Burn(double seconds)
        {
            return Hot.Spin(seconds);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Alpha(double s) { return Burn(s); }
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Beta(double s) { return Burn(s) + Burn(s / 2); }
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Gamma(double s) { return Burn(s / 2); }

        public static void Run(int ms)
        {
            double s = ms / 1000.0;
            var clock = new Stopwatch();
            clock.Restart(); Alpha(s); Report("Alpha", clock);
            clock.Restart(); Beta(s); Report("Beta", clock);
            clock.Restart(); Gamma(s); Report("Gamma", clock);
        }

        static void Report(string name, Stopwatch clock)
        {
            Console.WriteLine("phase " + name + " " + clock.Elapsed.TotalMilliseconds.ToString("F1"));
        }
    }

    public static class Work
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Fib(int n) { return n < 2 ? n : Fib(n - 1) + Fib(n - 2); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Round()
        {
            double acc = Fib(20);
            for (int i = 1; i < 200000; i++) acc += Math.Sqrt(i) / i;
            return acc;
        }

        public static void Run(int rounds)
        {
            var clock = Stopwatch.StartNew();
            double acc = 0;
            for (int i = 0; i < rounds; i++) acc += Round();
            Hot.Sink += (int)acc;
            Console.WriteLine("work " + clock.Elapsed.TotalMilliseconds.ToString("F1"));
            var cpu = Process.GetCurrentProcess().TotalProcessorTime.TotalMilliseconds;
            Console.WriteLine("cpu " + cpu.ToString("F1"));
        }
    }

    public static class Program
    {
        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "spin";
            double arg = args.Length > 1 ? double.Parse(args[1], System.Globalization.CultureInfo.InvariantCulture) : 5;
            if (mode == "spin")
            {
                Console.WriteLine("ready"); Console.Out.Flush();
                Hot.Spin(arg);
            }
            else if (mode == "phases-wait")
            {
                Console.WriteLine("ready"); Console.Out.Flush();
                Console.In.ReadLine();
                Phases.Run((int)arg);
            }
            else if (mode == "work")
            {
                Console.WriteLine("ready"); Console.Out.Flush();
                Work.Run((int)arg);
            }
            else if (mode == "phases")
            {
                Console.WriteLine("ready"); Console.Out.Flush();
                Phases.Run((int)arg);
            }
            else if (mode == "threads")
            {
                int n = (int)arg;
                double seconds = args.Length > 2 ? double.Parse(args[2], System.Globalization.CultureInfo.InvariantCulture) : 5;
                var threads = new Thread[n];
                for (int i = 0; i < n; i++)
                {
                    threads[i] = new Thread(Hot.Worker);
                    threads[i].Name = "worker-" + i;
                    threads[i].Start(seconds);
                }
                Console.WriteLine("ready"); Console.Out.Flush();
                foreach (var t in threads) t.Join();
            }
            else if (mode == "block")
            {
                Console.WriteLine("ready"); Console.Out.Flush();
                Hot.Nap((int)(arg * 1000));
            }
            else
            {
                Console.Error.WriteLine("unknown mode " + mode);
                return 3;
            }
            Console.WriteLine("done");
            return 0;
        }
    }
}
