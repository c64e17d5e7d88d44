// A program for `profkit heap run --at` (tests/clr/test_census_at.py): a static field holds
// 24 MiB of byte arrays until the census's forced GC has happened (the program sees it as
// GC.CollectionCount(2) rising once it is older than the time asked for), then another
// holds 32 MiB of long arrays until the end. Arguments: the seconds asked for (the test's
// --at), and "early" to end at once, before that time, or "crash" to die of an unhandled
// exception after the census.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.Threading;

namespace CensusAt.Core
{
    public static class Phase
    {
        public static List<byte[]> First;
        public static List<long[]> Second;
    }

    public static class Program
    {
        static readonly DateTime Started = Process.GetCurrentProcess().StartTime;

        static double Age() { return (DateTime.Now - Started).TotalSeconds; }

        public static int Main(string[] args)
        {
            double at = double.Parse(args[0], CultureInfo.InvariantCulture);
            Phase.First = new List<byte[]>();
            for (int i = 0; i < 96; i++) Phase.First.Add(new byte[256 * 1024]);
            if (args.Length > 1 && args[1] == "early") {
                Console.WriteLine("early " + Phase.First.Count);
                return 0;
            }
            if (Age() >= at) {
                Console.WriteLine("late"); // the machine was too slow: no test of the moment
                return 0;
            }
            int before = GC.CollectionCount(2);
            while (true) {
                int count = GC.CollectionCount(2); // taken while younger than `at`: before the census
                if (Age() >= at) break;
                before = count;
                Thread.Sleep(20);
            }
            var waited = Stopwatch.StartNew();
            while (GC.CollectionCount(2) == before && waited.Elapsed.TotalSeconds < 300) Thread.Sleep(20);
            Phase.First = null;
            Phase.Second = new List<long[]>();
            for (int i = 0; i < 4; i++) Phase.Second.Add(new long[1024 * 1024]);
            Console.WriteLine("second " + Phase.Second.Count);
            if (args.Length > 1 && args[1] == "crash") throw new InvalidOperationException("census-at crash");
            return 0;
        }
    }
}
