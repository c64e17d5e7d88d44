// A C# program for profkit's CLR tests: each mode exercises one thing the profiler must
// get right, and the program counts its own calls (the independent oracle the tests
// compare the profile with). Compiled at test time with mono's mcs; run on CoreCLR.
using System;
using System.Threading;

namespace ProfTest
{
    public static class Counters
    {
        public static int Fib, Leaf, Thrower, Cleanup, Inner, Generic, Convert, Worker, Tail, Slow, Fast;

        public static string Text()
        {
            return "Fib=" + Fib + " Leaf=" + Leaf + " Thrower=" + Thrower + " Cleanup=" + Cleanup
                + " Inner=" + Inner + " Generic=" + Generic + " Convert=" + Convert
                + " Worker=" + Worker + " Tail=" + Tail + " Slow=" + Slow + " Fast=" + Fast;
        }
    }

    public class Outer
    {
        public class Inner
        {
            public int Work(int x)
            {
                Interlocked.Increment(ref Counters.Inner);
                return x + 1;
            }
        }
    }

    public class Box<T>
    {
        private readonly T value;

        public Box(T v) { value = v; }

        public T Get()
        {
            Interlocked.Increment(ref Counters.Generic);
            return value;
        }

        public static string Convert<U>(T v, U u)
        {
            Interlocked.Increment(ref Counters.Convert);
            return v.ToString() + u.ToString();
        }
    }

    public static class Program
    {
        static int Fib(int n)
        {
            Interlocked.Increment(ref Counters.Fib);
            return n < 2 ? n : Fib(n - 1) + Fib(n - 2);
        }

        static int Leaf(int i)
        {
            Interlocked.Increment(ref Counters.Leaf);
            return i * 2;
        }

        static void Thrower(int depth)
        {
            Interlocked.Increment(ref Counters.Thrower);
            if (depth == 0)
                throw new InvalidOperationException("boom");
            try
            {
                Thrower(depth - 1);
            }
            finally
            {
                Cleanup();
            }
        }

        static void Cleanup()
        {
            Interlocked.Increment(ref Counters.Cleanup);
        }

        static long TailSum(long n, long acc)
        {
            Interlocked.Increment(ref Counters.Tail);
            if (n == 0)
                return acc;
            return TailSum(n - 1, acc + n);
        }

        static void Worker()
        {
            int sum = 0;
            for (int i = 0; i < 100; i++)
                sum += Leaf(i);
            Interlocked.Increment(ref Counters.Worker);
        }

        static void Slow()
        {
            Interlocked.Increment(ref Counters.Slow);
            Thread.Sleep(30);
            Fast();
        }

        static void Fast()
        {
            Interlocked.Increment(ref Counters.Fast);
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "calls";
            int n = args.Length > 1 ? int.Parse(args[1]) : 0;
            switch (mode)
            {
                case "calls":
                    Fib(15);
                    for (int i = 0; i < 1000; i++)
                        Leaf(i);
                    Outer.Inner inner = new Outer.Inner();
                    for (int i = 0; i < 10; i++)
                        inner.Work(i);
                    Box<int> a = new Box<int>(1);
                    Box<string> b = new Box<string>("x");
                    for (int i = 0; i < 5; i++)
                        a.Get();
                    for (int i = 0; i < 3; i++)
                        b.Get();
                    Box<int>.Convert<string>(1, "y");
                    Box<int>.Convert<string>(2, "z");
                    break;
                case "exceptions":
                    for (int i = 0; i < 5; i++)
                    {
                        try
                        {
                            Thrower(3);
                        }
                        catch (InvalidOperationException)
                        {
                            Leaf(i);
                        }
                    }
                    break;
                case "threads":
                    Thread[] threads = new Thread[4];
                    for (int i = 0; i < threads.Length; i++)
                    {
                        threads[i] = new Thread(Worker);
                        threads[i].Name = "worker-" + i;
                        threads[i].Start();
                    }
                    foreach (Thread t in threads)
                        t.Join();
                    break;
                case "tail":
                    TailSum(1000, 0);
                    break;
                case "slow":
                    for (int i = 0; i < 3; i++)
                        Slow();
                    for (int i = 0; i < 5; i++)
                        Fast();
                    break;
                case "bench":
                    Console.WriteLine(Fib(n));
                    return 0;
                case "exit":
                    Leaf(1);
                    Console.WriteLine(Counters.Text());
                    return n;
                case "throw":
                    Leaf(1);
                    Thrower(2);
                    break;
            }
            Console.WriteLine(Counters.Text());
            return 0;
        }
    }
}
