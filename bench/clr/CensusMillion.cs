// bench/clr_census_bench.py: a heap of about a million objects held by a static field
// to the end; the program times its own full blocking GC of that heap (the peer the
// census's forced GC and walk are compared with).
using System;
using System.Collections.Generic;
using System.Diagnostics;

namespace Bench.Census
{
    public class Item
    {
        public Item Next;
        public string Name;
        public int[] Values;
    }

    public static class Program
    {
        public static List<Item> Kept;

        public static int Main(string[] args)
        {
            int n = args.Length > 0 ? int.Parse(args[0]) : 333333;
            Kept = new List<Item>(n);
            Item previous = null;
            for (int i = 0; i < n; i++) {
                var item = new Item { Next = previous, Name = "item" + i, Values = new int[4] };
                Kept.Add(item);
                previous = item;
            }
            var watch = Stopwatch.StartNew();
            GC.Collect(2, GCCollectionMode.Forced, true);
            watch.Stop();
            Console.WriteLine("own_gc_ms " + watch.Elapsed.TotalMilliseconds.ToString("F1"));
            return 0;
        }
    }
}
