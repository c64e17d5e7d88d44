// The call-dense program bench/clr_bench.py profiles: recursion and small methods.
// argv: N (Fib's argument; Fib(N) makes Fib(N+1)*2-1 calls) and M (small-method loops).
using System;

namespace Bench
{
    public static class Program
    {
        static int Fib(int n)
        {
            return n < 2 ? n : Fib(n - 1) + Fib(n - 2);
        }

        static int Add(int a, int b)
        {
            return a + b;
        }

        static int Twice(int a)
        {
            return Add(a, a);
        }

        public static int Main(string[] args)
        {
            int n = int.Parse(args[0]);
            int m = int.Parse(args[1]);
            long sum = Fib(n);
            for (int i = 0; i < m; i++)
                sum += Twice(i);
            Console.WriteLine(sum);
            return 0;
        }
    }
}
