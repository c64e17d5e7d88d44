// A CoreLib-heavy program for profkit's ReadyToRun end-to-end test: Main calls only the
// helpers below (never inlined), and each helper spends its time in framework code that
// ships precompiled (ReadyToRun) in System.Private.CoreLib and friends.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Text;

public static class R2RWork
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long SortNumbers(int seed)
    {
        var rng = new Random(seed);
        var data = new int[20000];
        for (int i = 0; i < data.Length; i++) data[i] = rng.Next();
        Array.Sort(data);
        var list = new List<string>(2000);
        for (int i = 0; i < 2000; i++) list.Add(data[i].ToString(CultureInfo.InvariantCulture));
        list.Sort(StringComparer.Ordinal);
        return data[0] + list.Count;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long BuildText(int seed)
    {
        var sb = new StringBuilder();
        for (int i = 0; i < 3000; i++)
        {
            sb.Append(i.ToString("X8", CultureInfo.InvariantCulture));
            sb.Append(' ');
            sb.Append((seed + i * 0.5).ToString("R", CultureInfo.InvariantCulture));
        }
        string text = sb.ToString();
        return text.Split(' ').Length + text.ToUpperInvariant().IndexOf("FF", StringComparison.Ordinal);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long CountWords(int seed)
    {
        var counts = new Dictionary<string, int>();
        for (int i = 0; i < 20000; i++)
        {
            string key = "w" + ((i * 7919 + seed) % 997).ToString(CultureInfo.InvariantCulture);
            counts.TryGetValue(key, out int n);
            counts[key] = n + 1;
        }
        return counts.Values.Where(v => v > 10).Sum();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long ParseNumbers(int seed)
    {
        long total = 0;
        for (int i = 0; i < 20000; i++)
        {
            string s = (seed * 31 + i).ToString(CultureInfo.InvariantCulture) + ".25";
            total += (long)double.Parse(s, CultureInfo.InvariantCulture);
            total += DateTime.Parse("2024-01-0" + (1 + i % 9) + "T10:00:00", CultureInfo.InvariantCulture).Day;
        }
        return total;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double Seconds(string[] args)
    {
        return args.Length > 0 ? double.Parse(args[0], CultureInfo.InvariantCulture) : 2.0;
    }

    // The run lasts a given amount of CPU time (so a loaded machine still yields the
    // same number of perf samples), and at most a minute of wall time.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static bool KeepGoing(TimeSpan cpu, DateTime until)
    {
        return System.Diagnostics.Process.GetCurrentProcess().TotalProcessorTime < cpu
               && DateTime.UtcNow < until;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static DateTime Deadline(double seconds)
    {
        return DateTime.UtcNow.AddSeconds(seconds);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Report(int rounds, long sum)
    {
        Console.WriteLine("pid=" + System.Diagnostics.Process.GetCurrentProcess().Id
                          + " rounds=" + rounds + " sum=" + sum);
    }

    // Main calls nothing but the helpers above (none inlined): the end-to-end test checks
    // that every managed frame perf saw directly under Main is one of them.
    public static int Main(string[] args)
    {
        TimeSpan cpu = TimeSpan.FromSeconds(Seconds(args));
        DateTime until = Deadline(60);
        long sum = 0;
        int round = 0;
        while (KeepGoing(cpu, until))
        {
            sum += SortNumbers(round);
            sum += BuildText(round);
            sum += CountWords(round);
            sum += ParseNumbers(round);
            round++;
        }
        Report(round, sum);
        return 0;
    }
}
