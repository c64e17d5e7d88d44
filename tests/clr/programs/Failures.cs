// A C# program for profkit's reliability tests (issue 22): programs that catch many
// exceptions, die of an unhandled exception or a stack overflow, wait for Ctrl-C, or
// have names longer than the profiler's name buffers. Like Workload.cs it counts its own
// calls and prints the counts, the oracle the tests compare the profile with.
using System;
using System.Reflection;
using System.Reflection.Emit;
using System.Threading;

namespace ProfRel
{
    public static class Counters
    {
        public static int Catcher, Thrower, Cleanup, Leaf, Nested, Outer, Inner, Slow, Deep;

        public static string Text()
        {
            return "Catcher=" + Catcher + " Thrower=" + Thrower + " Cleanup=" + Cleanup +
                " Leaf=" + Leaf + " Nested=" + Nested + " Outer=" + Outer + " Inner=" + Inner +
                " Slow=" + Slow + " Deep=" + Deep;
        }
    }

    public static class Program
    {
        static int Leaf(int i)
        {
            Counters.Leaf++;
            return i * 2;
        }

        static void Cleanup()
        {
            Counters.Cleanup++;
        }

        static void Thrower(int depth)
        {
            Counters.Thrower++;
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

        // Catches in a frame of its own (not Main): the catching frame stays on the stack.
        static void Catcher(int i)
        {
            Counters.Catcher++;
            try
            {
                Thrower(2);
            }
            catch (InvalidOperationException)
            {
                Leaf(i);
            }
        }

        // An exception thrown and caught inside a finally that another exception unwinds.
        static void Nested(int depth)
        {
            Counters.Nested++;
            try
            {
                Thrower(depth);
            }
            finally
            {
                try
                {
                    Thrower(1);
                }
                catch (InvalidOperationException)
                {
                    Leaf(-1);
                }
            }
        }

        static void Outer()
        {
            Counters.Outer++;
            Inner();
        }

        static void Inner()
        {
            Counters.Inner++;
            Leaf(1);
            Console.WriteLine(Counters.Text());
            Console.Out.Flush();
            throw new InvalidOperationException("unhandled on purpose");
        }

        static int Deep(int n)
        {
            Counters.Deep++;
            return Deep(n + 1) + 1;
        }

        static void Slow()
        {
            Counters.Slow++;
            Thread.Sleep(20);
        }

        // A type of `type_len` characters with a method of `method_len` (ending in "é"),
        // called once; returns the full name as the runtime's metadata spells it.
        static string LongNames(int type_len, int method_len, int k)
        {
            AssemblyBuilder ab = AssemblyBuilder.DefineDynamicAssembly(
                new AssemblyName("LongNames" + k), AssemblyBuilderAccess.Run);
            ModuleBuilder mb = ab.DefineDynamicModule("LongNames" + k);
            TypeBuilder tb = mb.DefineType("ProfRel.Long." + new string('T', type_len),
                TypeAttributes.Public | TypeAttributes.Abstract | TypeAttributes.Sealed);
            string method = new string('M', method_len - 1) + "\u00e9";
            MethodBuilder m = tb.DefineMethod(method, MethodAttributes.Public | MethodAttributes.Static,
                typeof(int), new Type[] { typeof(int) });
            ILGenerator il = m.GetILGenerator();
            il.Emit(OpCodes.Ldarg_0);
            il.Emit(OpCodes.Ldc_I4_1);
            il.Emit(OpCodes.Add);
            il.Emit(OpCodes.Ret);
            Type t = tb.CreateType();
            t.GetMethod(method).Invoke(null, new object[] { 1 });
            return t.FullName + "." + method;
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "catch";
            int n = args.Length > 1 ? int.Parse(args[1]) : 0;
            switch (mode)
            {
                case "catch":
                    for (int i = 0; i < n; i++)
                        Catcher(i);
                    for (int i = 0; i < n; i++)
                    {
                        try
                        {
                            Thrower(1);
                        }
                        catch (InvalidOperationException)
                        {
                            Leaf(i);
                        }
                    }
                    break;
                case "nested":
                    for (int i = 0; i < n; i++)
                    {
                        try
                        {
                            Nested(2);
                        }
                        catch (InvalidOperationException)
                        {
                        }
                    }
                    break;
                case "unhandled":
                    Outer();
                    break;
                case "overflow": // on the main thread (8 MB: ~170,000 frames deep)
                    Leaf(1);
                    Console.WriteLine(Counters.Text());
                    Console.Out.Flush();
                    Deep(0);
                    break;
                case "overflow-thread": // on a thread with a 256 KB stack: a few thousand
                    Leaf(1);
                    Console.WriteLine(Counters.Text());
                    Console.Out.Flush();
                    Thread t = new Thread(() => Deep(0), 256 * 1024);
                    t.Start();
                    t.Join();
                    break;
                case "sleep":
                    Leaf(1);
                    Console.WriteLine("sleeping");
                    Console.Out.Flush();
                    for (int i = 0; i < n; i++)
                        Slow();
                    break;
                case "quiet":
                    // never touches the console before the signal (so System.Native never
                    // installs its handler: the runtime's own one only); says it runs
                    // through a file instead
                    Leaf(1);
                    System.IO.File.WriteAllText(args[2], "sleeping");
                    for (int i = 0; i < n; i++)
                        Slow();
                    break;
                case "names":
                    // C# identifiers stop at 512 characters (mcs): longer names are emitted.
                    Console.WriteLine("Name=" + LongNames(600, 600, 1));
                    Console.WriteLine("Name=" + LongNames(300, 5000, 2));
                    return 0;
            }
            Console.WriteLine(Counters.Text());
            return 0;
        }
    }
}
