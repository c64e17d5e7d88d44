// A program for the heap census tests (tests/clr/test_census.py): a static field holds
// 24 MiB of byte arrays at the end; other modes keep bytes on a stack, call GC.Collect
// itself, end through Environment.Exit, die of an unhandled exception, or sleep until
// killed.
using System;
using System.Collections.Generic;

namespace Census.Core
{
    public static class Holder
    {
        public static List<byte[]> Kept;
        [ThreadStatic] public static long[] PerThread;
    }

    public class Node
    {
        public Node Next;
        public byte[] Payload;
    }

    public static class Program
    {
        static List<byte[]> Fill(int mib)
        {
            var list = new List<byte[]>();
            for (int i = 0; i < mib * 4; i++) list.Add(new byte[256 * 1024]);
            return list;
        }

        static int OnStack(int mib)
        {
            var local = Fill(mib);
            GC.Collect();
            Environment.Exit(local.Count > 0 ? 0 : 1);
            return local.Count;
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "static";
            Holder.Kept = Fill(24);
            Holder.PerThread = new long[100000];
            var garbage = new List<Node>();
            for (int i = 0; i < 1000; i++) garbage.Add(new Node { Payload = new byte[10] });
            garbage = null;
            if (mode == "collect") {
                GC.Collect();
                GC.Collect(2, GCCollectionMode.Forced, true);
            }
            if (mode == "exit") {
                Console.WriteLine("leaving through Environment.Exit");
                Environment.Exit(3);
            }
            if (mode == "sleep") {
                Console.WriteLine("sleeping");
                System.Threading.Thread.Sleep(600000);
            }
            if (mode == "crash") throw new InvalidOperationException("census crash");
            if (mode == "stack") {
                Holder.Kept = null;
                return OnStack(40);
            }
            Console.WriteLine("kept " + Holder.Kept.Count);
            return 0;
        }
    }
}
