// A C# program for profkit's CLR tests: each mode exercises one thing the profiler must
// get right, and the program counts its own calls (the independent oracle the tests
// compare the profile with). Compiled at test time with mono's mcs; run on CoreCLR.
using System;
using System.Reflection;
using System.Reflection.Emit;
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

        // mcs never emits the IL "tail." prefix, so the tail calls are emitted at run time:
        // Down(n) = n == 0 ? 7 : tail. Other(n - 1); Other(n) = tail. Down(n). Down(n) thus
        // makes n + 1 calls of Down and n of Other, each replacing its caller's frame.
        static int EmittedTailCalls(int n)
        {
            AssemblyBuilder ab = AssemblyBuilder.DefineDynamicAssembly(
                new AssemblyName("ProfTestEmitted"), AssemblyBuilderAccess.Run);
            ModuleBuilder mb = ab.DefineDynamicModule("ProfTestEmitted");
            TypeBuilder tb = mb.DefineType("ProfTest.Emitted", TypeAttributes.Public | TypeAttributes.Class);
            MethodAttributes attrs = MethodAttributes.Public | MethodAttributes.Static;
            MethodBuilder down = tb.DefineMethod("Down", attrs, typeof(int), new Type[] { typeof(int) });
            MethodBuilder other = tb.DefineMethod("Other", attrs, typeof(int), new Type[] { typeof(int) });
            ILGenerator il = down.GetILGenerator();
            Label more = il.DefineLabel();
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Brtrue_S, more);
            il.Emit(OpCodes.Ldc_I4_7);
            il.Emit(OpCodes.Ret);
            il.MarkLabel(more);
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Ldc_I4_1);
            il.Emit(OpCodes.Sub);
            il.Emit(OpCodes.Tailcall);
            il.Emit(OpCodes.Call, other);
            il.Emit(OpCodes.Ret);
            ILGenerator il2 = other.GetILGenerator();
            il2.Emit(OpCodes.Ldarg_0);
            il2.Emit(OpCodes.Tailcall);
            il2.Emit(OpCodes.Call, down);
            il2.Emit(OpCodes.Ret);
            Type t = tb.CreateType();
            Func<int, int> f = (Func<int, int>)Delegate.CreateDelegate(typeof(Func<int, int>), t.GetMethod("Down"));
            return f(n);
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
                case "tailemit":
                    Console.WriteLine("Emitted=" + EmittedTailCalls(n));
                    break;
                case "slow":
                    for (int i = 0; i < 3; i++)
                        Slow();
                    for (int i = 0; i < 5; i++)
                        Fast();
                    break;
                case "sleep":
                    Console.WriteLine("sleeping");
                    Console.Out.Flush();
                    for (int i = 0; i < n; i++)
                        Slow();
                    break;
                case "gc":
                    for (int i = 0; i < 1000; i++)
                        Leaf(new byte[1024].Length);
                    GC.Collect();
                    break;
                case "echo":
                    Console.Out.Write(Console.In.ReadToEnd());
                    return 0;
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
