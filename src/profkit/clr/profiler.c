/* libprofkit_clr: profkit's CoreCLR profiler (a plain shared library the runtime loads
 * through CORECLR_ENABLE_PROFILING / CORECLR_PROFILER / CORECLR_PROFILER_PATH).
 *
 * What it does, and why it is shaped this way (docs/clr.md has the user's view):
 *
 * - Enter/Leave/Tailcall hooks: by default the fast ones (SetEnterLeaveFunctionHooks3),
 *   which JIT'd code calls directly, through assembly stubs that save every volatile
 *   register; or the article's WithInfo ones (the runtime's own stubs save the registers,
 *   so those are plain C). A FunctionIDMapper2 decides once per function whether it is
 *   hooked (namespace prefix filter) and hands the runtime a small method index as the
 *   client id: a declined function costs nothing.
 * - The hot path only appends a 16-byte event (time, method, kind|depth) to a bounded
 *   per-thread ring (single producer: the thread; single consumer: the writer thread).
 *   It never locks, never allocates (the ring is mapped once, on a thread's first hooked
 *   call), never blocks: a full ring drops the event and counts it.
 * - The writer thread drains the rings every millisecond and does everything slow:
 *   per-thread shadow stacks and call trees, base time without orphan lines, the
 *   article's Enter/Leave lines to a stream and/or profkit monitor UDP datagrams.
 *   Each event carries the producer's depth, so after a loss the shadow stack is
 *   re-synchronised instead of silently mis-attributing every later call.
 * - Everything else (exceptions, threads, loads, GC, JIT and ReadyToRun code) is rare
 *   and recorded under a mutex. At the end the writer writes one text file
 *   (PROFKIT_CLR_OUTPUT) that profkit turns into its saved profile format and perf map.
 *
 * Failure policy: a bad setting or a sink that cannot be opened is reported as one line
 * on stderr and Initialize fails, so the runtime runs the program unprofiled.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "clr_abi.h"

#define EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__)
#define HAVE_FAST_HOOKS 1 /* the assembly stubs below */
#else
#define HAVE_FAST_HOOKS 0
#endif

/* ---- GUIDs (corprof.idl, cor.h, and profkit's own CLSID) ------------------------------ */
static const GUID CLSID_PROFKIT = {0x819e7006, 0x936b, 0x5188, {0x81, 0xa7, 0xef, 0x70, 0x2a, 0xfa, 0xf9, 0xc2}};
static const GUID IID_IUnknown = {0x00000000, 0x0000, 0x0000, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}};
static const GUID IID_IClassFactory = {0x00000001, 0x0000, 0x0000, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}};
static const GUID IID_IMetaDataImport = {0x7dac8207, 0xd3ae, 0x4c75, {0x9b, 0x67, 0x92, 0x80, 0x1a, 0x49, 0x7d, 0x44}};
static const GUID IID_CALLBACKS[] = {
    {0x176FBED1, 0xA55C, 0x4796, {0x98, 0xCA, 0xA9, 0xDA, 0x0E, 0xF8, 0x83, 0xE7}}, /* 1 */
    {0x8A8CC829, 0xCCF2, 0x49fe, {0xBB, 0xAE, 0x0F, 0x02, 0x22, 0x28, 0x07, 0x1A}}, /* 2 */
    {0x4FD2ED52, 0x7731, 0x4b8d, {0x94, 0x69, 0x03, 0xD2, 0xCC, 0x30, 0x86, 0xC5}}, /* 3 */
    {0x7B63B2E3, 0x107D, 0x4d48, {0xB2, 0xF6, 0xF6, 0x1E, 0x22, 0x94, 0x70, 0xD2}}, /* 4 */
    {0x8DFBA405, 0x8C9F, 0x45F8, {0xBF, 0xFA, 0x83, 0xB1, 0x4C, 0xEF, 0x78, 0xB5}}, /* 5 */
    {0xFC13DF4B, 0x4448, 0x4F4F, {0x95, 0x0C, 0xBA, 0x8D, 0x19, 0xD0, 0x0C, 0x36}}, /* 6 */
    {0xF76A2DBA, 0x1D52, 0x4539, {0x86, 0x6C, 0x2A, 0xA5, 0x18, 0xF9, 0xEF, 0xC3}}, /* 7 */
    {0x5BED9B15, 0xC079, 0x4D47, {0xBF, 0xE2, 0x21, 0x5A, 0x14, 0x0C, 0x07, 0xE0}}, /* 8 */
    {0x27583EC3, 0xC8F5, 0x482F, {0x80, 0x52, 0x19, 0x4B, 0x8C, 0xE4, 0x70, 0x5A}}, /* 9 */
    {0xCEC5B60E, 0xC69C, 0x495F, {0x87, 0xF6, 0x84, 0xD2, 0x8E, 0xE1, 0x6F, 0xFB}}, /* 10 */
    {0x42350846, 0xAAED, 0x47F7, {0xB1, 0x28, 0xFD, 0x0C, 0x98, 0x88, 0x1C, 0xDE}}, /* 11 */
};
/* ICorProfilerInfo15 .. ICorProfilerInfo3, newest first: the first one the runtime gives
 * us is the version we hold (3 is the least we need: the mapper and the WithInfo hooks). */
static const struct {
    int version;
    GUID iid;
} IID_INFOS[] = {
    {15, {0xB446462D, 0xBD22, 0x41DD, {0x87, 0x2D, 0xDC, 0x71, 0x4C, 0x49, 0xEB, 0x56}}},
    {14, {0xF460E352, 0xD76D, 0x4FE9, {0x83, 0x5F, 0xF6, 0xAF, 0x9D, 0x6E, 0x86, 0x2D}}},
    {13, {0x6E6C7EE2, 0x0701, 0x4EC2, {0x9D, 0x29, 0x2E, 0x87, 0x33, 0xB6, 0x69, 0x34}}},
    {12, {0x27b24ccd, 0x1cb1, 0x47c5, {0x96, 0xee, 0x98, 0x19, 0x0d, 0xc3, 0x09, 0x59}}},
    {11, {0x06398876, 0x8987, 0x4154, {0xB6, 0x21, 0x40, 0xA0, 0x0D, 0x6E, 0x4D, 0x04}}},
    {10, {0x2F1B5152, 0xC869, 0x40C9, {0xAA, 0x5F, 0x3A, 0xBE, 0x02, 0x6B, 0xD7, 0x20}}},
    {9, {0x008170DB, 0xF8CC, 0x4796, {0x9A, 0x51, 0xDC, 0x8A, 0xA0, 0xB4, 0x70, 0x12}}},
    {8, {0xC5AC80A6, 0x782E, 0x4716, {0x80, 0x44, 0x39, 0x59, 0x8C, 0x60, 0xCF, 0xBF}}},
    {7, {0x9AEECC0D, 0x63E0, 0x4187, {0x8C, 0x00, 0xE3, 0x12, 0xF5, 0x03, 0xF6, 0x63}}},
    {6, {0xF30A070D, 0xBFFB, 0x46A7, {0xB1, 0xD8, 0x87, 0x81, 0xEF, 0x7B, 0x69, 0x8A}}},
    {5, {0x07602928, 0xCE38, 0x4B83, {0x81, 0xE7, 0x74, 0xAD, 0xAF, 0x78, 0x12, 0x14}}},
    {4, {0x0d8fdcaa, 0x6257, 0x47bf, {0xb1, 0xbf, 0x94, 0xda, 0xc8, 0x84, 0x66, 0xee}}},
    {3, {0xB555ED4F, 0x452A, 0x4E54, {0x8B, 0x39, 0xB5, 0x36, 0x0B, 0xAD, 0x32, 0xA0}}},
};

static int guid_eq(const GUID *a, const GUID *b) { return memcmp(a, b, sizeof(GUID)) == 0; }

/* ---- settings ------------------------------------------------------------------------ */
#define MAX_PREFIXES 32
#define EV_CALLS 1u
#define EV_EXCEPTIONS 2u
#define EV_THREADS 4u
#define EV_LOADS 8u
#define EV_GC 16u
#define EV_JIT 32u
#define EV_ARGS 64u
#define EV_DEFAULT (EV_CALLS | EV_EXCEPTIONS | EV_THREADS | EV_LOADS | EV_GC | EV_JIT)

static struct {
    char *prefixes[MAX_PREFIXES];
    size_t prefix_len[MAX_PREFIXES];
    int n_prefixes;
    uint64_t basetime_ns;
    int unit_ns;
    char *stream; /* "stderr" or a path, or NULL */
    char *output; /* the result file, or NULL */
    uint32_t events;
    uint32_t ring_events; /* per thread, a power of two */
    int fast_hooks;       /* SetEnterLeaveFunctionHooks3 with our stubs, not WithInfo */
    int timeline;         /* keep every shown call's start and end (PROFKIT_TIMELINE) */
} S;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof buf - 2) n = sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(2, buf, (size_t)n);
    (void)w;
}

/* The first of the variables that is set (PROFKIT_* first: they win over the article's). */
static const char *env2(const char *ours, const char *article, const char **which) {
    const char *v = getenv(ours);
    *which = ours;
    if (v == NULL && article != NULL) {
        v = getenv(article);
        *which = article;
    }
    return v;
}

/* "100us", "2ms", "0.5s", "250ns", or a bare number of microseconds (profkit's rule). */
static int parse_duration(const char *text, uint64_t *out) {
    while (*text == ' ') text++;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v >= 0) || v > 7 * 86400e9) return -1;
    while (*end == ' ') end++;
    double scale = 1e3;
    if (*end == 0) scale = 1e3;
    else if (!strncmp(end, "ns", 2)) scale = 1, end += 2;
    else if (!strncmp(end, "us", 2)) scale = 1e3, end += 2;
    else if (!strncmp(end, "\xc2\xb5s", 3)) scale = 1e3, end += 3;
    else if (!strncmp(end, "ms", 2)) scale = 1e6, end += 2;
    else if (*end == 's') scale = 1e9, end += 1;
    else return -1;
    while (*end == ' ') end++;
    if (*end) return -1;
    double ns = v * scale;
    if (ns > 7 * 86400e9) return -1;
    *out = (uint64_t)(ns + 0.5);
    return 0;
}

static int parse_prefixes(const char *text) {
    char *copy = strdup(text);
    if (!copy) return -1;
    char *save = NULL;
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        while (*p == ' ') p++;
        size_t n = strlen(p);
        while (n && p[n - 1] == ' ') p[--n] = 0;
        if (!n) continue;
        if (S.n_prefixes == MAX_PREFIXES) {
            free(copy);
            return -1;
        }
        S.prefixes[S.n_prefixes] = strdup(p);
        S.prefix_len[S.n_prefixes++] = n;
    }
    free(copy);
    return 0;
}

static int parse_events(const char *text, uint32_t *out) {
    uint32_t mask = 0;
    char *copy = strdup(text), *save = NULL;
    if (!copy) return -1;
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        while (*p == ' ') p++;
        size_t n = strlen(p);
        while (n && p[n - 1] == ' ') p[--n] = 0;
        if (!n) continue;
        if (!strcmp(p, "calls")) mask |= EV_CALLS;
        else if (!strcmp(p, "exceptions")) mask |= EV_EXCEPTIONS;
        else if (!strcmp(p, "threads")) mask |= EV_THREADS;
        else if (!strcmp(p, "loads")) mask |= EV_LOADS;
        else if (!strcmp(p, "gc")) mask |= EV_GC;
        else if (!strcmp(p, "jit")) mask |= EV_JIT;
        else if (!strcmp(p, "args")) mask |= EV_ARGS;
        else if (!strcmp(p, "all")) mask |= EV_DEFAULT;
        else {
            free(copy);
            return -1;
        }
    }
    free(copy);
    *out = mask;
    return 0;
}

static char *with_pid(const char *path) {
    /* "{pid}" -> this process id, as profkit's other writers do */
    const char *at = strstr(path, "{pid}");
    size_t n = strlen(path) + 32;
    char *out = malloc(n);
    if (!out) return NULL;
    if (!at) {
        snprintf(out, n, "%s", path);
    } else {
        snprintf(out, n, "%.*s%d%s", (int)(at - path), path, (int)getpid(), at + 5);
    }
    return out;
}

/* Reads every setting; one stderr line and -1 for the first bad one. */
static int read_settings(void) {
    const char *which, *v;
    memset(&S, 0, sizeof S);
    S.events = EV_DEFAULT;
    S.ring_events = 1u << 20;
    v = env2("PROFKIT_NAMESPACE_PREFIX", "NAMESPACE_PREFIX", &which);
    if (v && parse_prefixes(v) < 0) {
        say("profkit: clr: %s='%s': expected comma-separated namespace prefixes (at most %d); "
            "the program runs unprofiled", which, v, MAX_PREFIXES);
        return -1;
    }
    v = env2("PROFKIT_BASETIME", "PROFILE_BASETIME", &which);
    if (v && parse_duration(v, &S.basetime_ns) < 0) {
        say("profkit: clr: %s='%s': expected a duration like 100us, 2ms, 0.5s (a bare number is "
            "microseconds); the program runs unprofiled", which, v);
        return -1;
    }
    v = getenv("PROFKIT_UNIT");
    if (v && *v) {
        if (!strcmp(v, "ns")) S.unit_ns = 1;
        else if (strcmp(v, "us")) {
            say("profkit: clr: PROFKIT_UNIT='%s': expected us or ns; the program runs unprofiled", v);
            return -1;
        }
    }
    v = getenv("PROFKIT_CLR_EVENTS");
    if (v && *v && parse_events(v, &S.events) < 0) {
        say("profkit: clr: PROFKIT_CLR_EVENTS='%s': expected a comma-separated list of calls, "
            "exceptions, threads, loads, gc, jit, args, all; the program runs unprofiled", v);
        return -1;
    }
    v = getenv("PROFKIT_CLR_BUFFER");
    if (v && *v) {
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (*end || n < 1024 || n > (1ull << 26)) {
            say("profkit: clr: PROFKIT_CLR_BUFFER='%s': expected a number of events per thread "
                "from 1024 to 67108864; the program runs unprofiled", v);
            return -1;
        }
        uint32_t p = 1024;
        while (p < n) p <<= 1;
        S.ring_events = p;
    }
    S.fast_hooks = HAVE_FAST_HOOKS && !(S.events & EV_ARGS);
    v = getenv("PROFKIT_CLR_HOOKS");
    if (v && *v) {
        if (!strcmp(v, "info")) S.fast_hooks = 0;
        else if (strcmp(v, "fast") || !HAVE_FAST_HOOKS || (S.events & EV_ARGS)) {
            say("profkit: clr: PROFKIT_CLR_HOOKS='%s': expected fast (x86-64, not with args) or info; "
                "the program runs unprofiled", v);
            return -1;
        }
    }
    v = getenv("PROFKIT_TIMELINE");
    if (v) {
        if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
            S.timeline = 1;
        else if (*v && strcasecmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no") && strcasecmp(v, "off")) {
            say("profkit: clr: PROFKIT_TIMELINE='%s': expected 1 or 0 (true/false, yes/no, on/off); "
                "the program runs unprofiled", v);
            return -1;
        }
    }
    v = getenv("PROFKIT_STREAM");
    if (v && *v) S.stream = with_pid(v);
    v = getenv("PROFKIT_CLR_OUTPUT");
    if (v && *v) S.output = with_pid(v);
    return 0;
}

static int prefix_match(const char *name) {
    if (S.n_prefixes == 0) return 1;
    for (int i = 0; i < S.n_prefixes; i++) {
        size_t n = S.prefix_len[i];
        if (!strncmp(name, S.prefixes[i], n) && (name[n] == 0 || name[n] == '.' || name[n] == '+'))
            return 1;
    }
    return 0;
}

/* ---- time ----------------------------------------------------------------------------
 * The hot path reads the CPU's time-stamp counter (x86-64: rdtsc, invariant on any CPU
 * with constant_tsc/nonstop_tsc): clock_gettime costs 3-4x more in a VM (measured here:
 * 78 ns vs 21 ns), and a call takes two readings. The writer thread converts ticks to
 * nanoseconds with a rate calibrated against CLOCK_MONOTONIC at start-up and refined over
 * the run. Elsewhere CLOCK_MONOTONIC is used directly (rate 1). */
static uint64_t t0;      /* CLOCK_MONOTONIC ns at Initialize */
static uint64_t tick0;   /* ticks at Initialize */
static double g_ns_per_tick = 1.0;

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t ticks(void) { return __rdtsc(); }
#define TICKS_ARE_NS 0
#else
static inline uint64_t ticks(void) { return now_ns(); }
#define TICKS_ARE_NS 1
#endif

/* Rate over [start, now]; called at Initialize (after a short spin) and by the writer. */
static void calibrate(void) {
    if (TICKS_ARE_NS) return;
    uint64_t ns = now_ns() - t0, tk = ticks() - tick0;
    if (tk > 0 && ns >= 1000000) g_ns_per_tick = (double)ns / (double)tk;
}

/* ticks -> ns since Initialize */
static inline uint64_t tick_ns(uint64_t tk) {
    if (TICKS_ARE_NS) return tk - tick0;
    return tk > tick0 ? (uint64_t)((double)(tk - tick0) * g_ns_per_tick) : 0;
}

/* ---- runtime interfaces -------------------------------------------------------------- */
static void *g_info; /* ICorProfilerInfoN */
static int g_info_version;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* methods map, metadata, records */

typedef HRESULT (*fn_GetTokenAndMetaData)(void *, FunctionID, const GUID *, void **, mdToken *);
typedef HRESULT (*fn_GetMethodProps)(void *, mdToken, mdToken *, WCHAR *, ULONG, ULONG *, DWORD *,
                                     const uint8_t **, ULONG *, ULONG *, DWORD *);
typedef HRESULT (*fn_GetTypeDefProps)(void *, mdToken, WCHAR *, ULONG, ULONG *, DWORD *, mdToken *);
typedef HRESULT (*fn_GetNestedClassProps)(void *, mdToken, mdToken *);
typedef ULONG (*fn_Release)(void *);

/* UTF-16 -> UTF-8 (unpaired surrogates become U+FFFD); tabs and newlines become spaces,
 * so a name is always one field of one line in the result file. Returns bytes written. */
static size_t utf16_to_utf8(const WCHAR *in, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n && in[i]; i++) {
        uint32_t c = in[i];
        if (c >= 0xD800 && c < 0xDC00 && i + 1 < n && in[i + 1] >= 0xDC00 && in[i + 1] < 0xE000) {
            c = 0x10000 + ((c - 0xD800) << 10) + (in[i + 1] - 0xDC00);
            i++;
        } else if (c >= 0xD800 && c < 0xE000) {
            c = 0xFFFD;
        }
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
        char b[4];
        size_t k;
        if (c < 0x80) b[0] = (char)c, k = 1;
        else if (c < 0x800) b[0] = (char)(0xC0 | (c >> 6)), b[1] = (char)(0x80 | (c & 0x3F)), k = 2;
        else if (c < 0x10000)
            b[0] = (char)(0xE0 | (c >> 12)), b[1] = (char)(0x80 | ((c >> 6) & 0x3F)),
            b[2] = (char)(0x80 | (c & 0x3F)), k = 3;
        else
            b[0] = (char)(0xF0 | (c >> 18)), b[1] = (char)(0x80 | ((c >> 12) & 0x3F)),
            b[2] = (char)(0x80 | ((c >> 6) & 0x3F)), b[3] = (char)(0x80 | (c & 0x3F)), k = 4;
        if (o + k + 1 > cap) break;
        memcpy(out + o, b, k);
        o += k;
    }
    out[o] = 0;
    return o;
}

/* ECMA-335 compressed unsigned integer (II.23.2). */
static int sig_uint(const uint8_t *p, size_t n, uint32_t *out) {
    if (n < 1) return -1;
    if ((p[0] & 0x80) == 0) return *out = p[0], 1;
    if ((p[0] & 0xC0) == 0x80 && n >= 2) return *out = ((p[0] & 0x3Fu) << 8) | p[1], 2;
    if ((p[0] & 0xE0) == 0xC0 && n >= 4)
        return *out = ((p[0] & 0x1Fu) << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3], 4;
    return -1;
}

/* Name of a type: "Namespace.Outer+Inner`1" (metadata keeps the `N arity in the name). */
static size_t type_name(void *md, mdToken td, char *out, size_t cap) {
    mdToken chain[16];
    int depth = 0;
    chain[depth++] = td;
    while (depth < 16) {
        mdToken enclosing = 0;
        HRESULT hr = ((fn_GetNestedClassProps)SLOT(md, MD_GetNestedClassProps))(md, chain[depth - 1], &enclosing);
        if (hr != S_OK || enclosing == 0) break;
        chain[depth++] = enclosing;
    }
    size_t o = 0;
    out[0] = 0;
    for (int i = depth - 1; i >= 0; i--) {
        WCHAR w[512];
        ULONG len = 0;
        DWORD flags = 0;
        mdToken ext = 0;
        if (((fn_GetTypeDefProps)SLOT(md, MD_GetTypeDefProps))(md, chain[i], w, 512, &len, &flags, &ext) < 0)
            return o;
        if (i != depth - 1 && o + 2 < cap) out[o++] = '+';
        o += utf16_to_utf8(w, len, out + o, cap - o);
    }
    return o;
}

/* "Namespace.Type.Method" (generic methods: "Method``N"), from the function's metadata.
 * Safe in any callback: it only reads metadata. */
static int function_name(FunctionID fid, char *out, size_t cap) {
    void *md = NULL;
    mdToken tok = 0;
    HRESULT hr = ((fn_GetTokenAndMetaData)SLOT(g_info, PI_GetTokenAndMetaDataFromFunction))(
        g_info, fid, &IID_IMetaDataImport, &md, &tok);
    if (hr < 0 || md == NULL) {
        snprintf(out, cap, "(unknown function 0x%lx)", (unsigned long)fid);
        return -1;
    }
    WCHAR w[512];
    ULONG len = 0, sig_len = 0, rva = 0;
    DWORD attr = 0, impl = 0;
    mdToken td = 0;
    const uint8_t *sig = NULL;
    hr = ((fn_GetMethodProps)SLOT(md, MD_GetMethodProps))(md, tok, &td, w, 512, &len, &attr, &sig,
                                                          &sig_len, &rva, &impl);
    if (hr < 0) {
        ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
        snprintf(out, cap, "(unknown method 0x%x)", tok);
        return -1;
    }
    size_t o = type_name(md, td, out, cap);
    if (o + 2 < cap) out[o++] = '.';
    o += utf16_to_utf8(w, len, out + o, cap - o);
    uint32_t arity;
    if (sig && sig_len > 1 && (sig[0] & 0x10) && sig_uint(sig + 1, sig_len - 1, &arity) > 0)
        snprintf(out + o, cap - o, "``%u", arity);
    ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
    return 0;
}

/* ---- the method table: client id -> name (lock-free reads by the writer) ------------- */
#define CHUNK 4096
#define MAX_CHUNKS 4096 /* 16 M methods */
static _Atomic(char **) g_names[MAX_CHUNKS];
static uint32_t g_n_methods = 1; /* id 0: "(events lost)" */
/* FunctionID -> id (hooked) or UINT32_MAX (declined): open addressing, under g_lock */
static struct fent {
    FunctionID fid;
    uint32_t id;
} *g_fmap;
static size_t g_fmap_cap, g_fmap_n;

static const char *method_name(uint32_t id) {
    if (id == 0) return "(events lost)";
    char **chunk = atomic_load_explicit(&g_names[id / CHUNK], memory_order_acquire);
    return chunk ? chunk[id % CHUNK] : "(unknown)";
}

static struct fent *fmap_slot(FunctionID fid) {
    size_t mask = g_fmap_cap - 1, i = (fid >> 3) * 0x9E3779B97F4A7C15ull & mask;
    while (g_fmap[i].fid && g_fmap[i].fid != fid) i = (i + 1) & mask;
    return &g_fmap[i];
}

static int fmap_grow(void) {
    size_t cap = g_fmap_cap ? g_fmap_cap * 2 : 4096;
    struct fent *old = g_fmap;
    size_t old_cap = g_fmap_cap;
    g_fmap = calloc(cap, sizeof *g_fmap);
    if (!g_fmap) {
        g_fmap = old;
        return -1;
    }
    g_fmap_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].fid) *fmap_slot(old[i].fid) = old[i];
    free(old);
    return 0;
}

static uint32_t fmap_find(FunctionID fid, int *found) { /* caller holds g_lock */
    *found = 0;
    if (!g_fmap_cap) return UINT32_MAX;
    struct fent *e = fmap_slot(fid);
    *found = e->fid == fid;
    return *found ? e->id : UINT32_MAX;
}

/* Decide (once) whether fid is hooked; returns its client id, or UINT32_MAX if not.
 * The name is read from metadata *outside* g_lock: the runtime may hold its own locks
 * while calling us, and our lock must never be held across a call into the runtime. Two
 * threads deciding the same function at once both read its name; the first to insert wins. */
static uint32_t map_function(FunctionID fid) {
    int found;
    pthread_mutex_lock(&g_lock);
    uint32_t id = fmap_find(fid, &found);
    pthread_mutex_unlock(&g_lock);
    if (found) return id;
    char name[1024];
    function_name(fid, name, sizeof name);
    int wanted = (S.events & EV_CALLS) && prefix_match(name);
    char *copy = wanted ? strdup(name) : NULL;
    pthread_mutex_lock(&g_lock);
    id = fmap_find(fid, &found);
    if (found) {
        pthread_mutex_unlock(&g_lock);
        free(copy);
        return id;
    }
    if (copy && g_n_methods < CHUNK * MAX_CHUNKS) {
        char **chunk = atomic_load_explicit(&g_names[g_n_methods / CHUNK], memory_order_relaxed);
        if (!chunk) {
            chunk = calloc(CHUNK, sizeof(char *));
            if (chunk) atomic_store_explicit(&g_names[g_n_methods / CHUNK], chunk, memory_order_release);
        }
        if (chunk) {
            id = g_n_methods++;
            chunk[id % CHUNK] = copy;
            copy = NULL;
        }
    }
    free(copy);
    if ((g_fmap_n + 1) * 2 > g_fmap_cap && fmap_grow() < 0) {
        pthread_mutex_unlock(&g_lock); /* not remembered: decided again next time */
        return id;
    }
    struct fent *e = fmap_slot(fid);
    e->fid = fid;
    e->id = id;
    g_fmap_n++;
    pthread_mutex_unlock(&g_lock);
    return id;
}

static UINT_PTR mapper(FunctionID fid, void *client_data, BOOL *hook) {
    (void)client_data;
    uint32_t id = map_function(fid);
    *hook = id != UINT32_MAX;
    return *hook ? (UINT_PTR)id : fid; /* never 0 when hooked: ids start at 1 */
}

/* ---- per-thread event rings (the hot path) -------------------------------------------- */
enum { K_ENTER = 1, K_LEAVE = 2, K_TAIL = 3, K_UNWIND = 4 };
#define DEPTH_MASK 0x0FFFFFFFu

typedef struct {
    uint64_t t;
    uint32_t id;
    uint32_t kd; /* kind << 28 | depth */
} ev_t;

typedef struct {
    uint32_t id, node;
    uint64_t start;
} frame_t;

typedef struct {
    uint32_t parent, id;
    uint64_t calls, incl, min, max;
} node_t;

typedef struct thr {
    struct thr *next;
    ev_t *ring;
    size_t ring_bytes;
    uint32_t mask;
    _Atomic uint64_t head, tail, lost;
    _Atomic int dead;
    uint32_t tid;
    /* producer side (the thread itself) */
    uint32_t depth;
    uint32_t unwind[64]; /* client ids of frames being unwound (ExceptionUnwindFunction*) */
    uint32_t n_unwind;
    /* consumer side (the writer thread) */
    frame_t *stack;
    uint32_t n_stack, cap_stack, written;
    node_t *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *hash; /* (parent, id) -> node index + 1 */
    uint32_t hash_cap;
    uint64_t resyncs;
} thr_t;

static _Atomic(thr_t *) g_threads;
static _Atomic int g_active;
static pthread_key_t g_key;
static __thread thr_t *tls_thr __attribute__((tls_model("initial-exec")));

static void thread_gone(void *p) {
    thr_t *t = p;
    if (t) atomic_store_explicit(&t->dead, 1, memory_order_release);
    tls_thr = NULL;
}

/* A thread's first hooked call: map its ring (once) and publish it to the writer. */
static __attribute__((noinline)) thr_t *thread_new(void) {
    thr_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ring_bytes = (size_t)S.ring_events * sizeof(ev_t);
    t->ring = mmap(NULL, t->ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->ring == MAP_FAILED) {
        free(t);
        return NULL;
    }
    t->mask = S.ring_events - 1;
    t->tid = (uint32_t)syscall(SYS_gettid);
    t->written = 1;
    thr_t *head = atomic_load_explicit(&g_threads, memory_order_relaxed);
    do t->next = head;
    while (!atomic_compare_exchange_weak_explicit(&g_threads, &head, t, memory_order_release, memory_order_relaxed));
    tls_thr = t;
    pthread_setspecific(g_key, t);
    return t;
}

static inline void push_event(uint32_t id, uint32_t kind) {
    if (!atomic_load_explicit(&g_active, memory_order_relaxed)) return;
    thr_t *t = tls_thr;
    if (__builtin_expect(t == NULL, 0) && (t = thread_new()) == NULL) return;
    uint32_t depth;
    if (kind == K_ENTER) {
        depth = ++t->depth;
    } else {
        depth = t->depth;
        if (t->depth) t->depth--;
    }
    uint64_t h = atomic_load_explicit(&t->head, memory_order_relaxed);
    if (h - atomic_load_explicit(&t->tail, memory_order_acquire) > t->mask) {
        atomic_fetch_add_explicit(&t->lost, 1, memory_order_relaxed);
        return;
    }
    ev_t *e = &t->ring[h & t->mask];
    e->t = ticks();
    e->id = id;
    e->kd = kind << 28 | (depth & DEPTH_MASK);
    atomic_store_explicit(&t->head, h + 1, memory_order_release);
}

/* The WithInfo hooks: the runtime's own stub (ProfileEnterNaked) saved the registers and
 * calls these as ordinary C functions. */
static void hook_enter(UINT_PTR id, UINT_PTR elt) { (void)elt; push_event((uint32_t)id, K_ENTER); }
static void hook_leave(UINT_PTR id, UINT_PTR elt) { (void)elt; push_event((uint32_t)id, K_LEAVE); }
static void hook_tail(UINT_PTR id, UINT_PTR elt) { (void)elt; push_event((uint32_t)id, K_TAIL); }

/* The fast hooks (SetEnterLeaveFunctionHooks3, x86-64 Linux): JIT'd code calls them
 * directly, with every argument (Enter) or return (Leave) register live, so they are
 * assembly stubs that save all volatile registers (rax, rcx, rdx, rsi, rdi, r8-r11,
 * xmm0-15) around a call to C. The client id arrives in r14 for Enter and in rdi for
 * Leave and Tailcall (the JIT's REG_PROFILER_ENTER_ARG_0 / the leave helper's first
 * argument on the Unix AMD64 ABI). Upper halves of ymm registers are not preserved; the
 * runtime's own stubs do not preserve them either. */
__attribute__((used, visibility("hidden"))) void profkit_fast_event(UINT_PTR id, uint32_t kind) {
    push_event((uint32_t)id, kind);
}

#if defined(__x86_64__)
#define FAST_STUB(name, idreg, kind)                                                          \
    __asm__(".text\n"                                                                      \
            ".p2align 4\n"                                                                 \
            ".type " #name ",@function\n"                                                  \
            #name ":\n"                                                                    \
            ".cfi_startproc\n"                                                             \
            "push %rbp\n"                                                                  \
            ".cfi_def_cfa_offset 16\n"                                                     \
            ".cfi_offset %rbp, -16\n"                                                      \
            "mov %rsp, %rbp\n"                                                             \
            ".cfi_def_cfa_register %rbp\n"                                                 \
            "and $-16, %rsp\n" /* whatever the caller's alignment, the C call gets the ABI's */ \
            "sub $336, %rsp\n"                                                             \
            "mov %rax, 0(%rsp)\n mov %rcx, 8(%rsp)\n mov %rdx, 16(%rsp)\n"                  \
            "mov %rsi, 24(%rsp)\n mov %rdi, 32(%rsp)\n mov %r8, 40(%rsp)\n"                 \
            "mov %r9, 48(%rsp)\n mov %r10, 56(%rsp)\n mov %r11, 64(%rsp)\n"                 \
            "movdqu %xmm0, 80(%rsp)\n movdqu %xmm1, 96(%rsp)\n movdqu %xmm2, 112(%rsp)\n"   \
            "movdqu %xmm3, 128(%rsp)\n movdqu %xmm4, 144(%rsp)\n movdqu %xmm5, 160(%rsp)\n" \
            "movdqu %xmm6, 176(%rsp)\n movdqu %xmm7, 192(%rsp)\n movdqu %xmm8, 208(%rsp)\n" \
            "movdqu %xmm9, 224(%rsp)\n movdqu %xmm10, 240(%rsp)\n movdqu %xmm11, 256(%rsp)\n" \
            "movdqu %xmm12, 272(%rsp)\n movdqu %xmm13, 288(%rsp)\n movdqu %xmm14, 304(%rsp)\n" \
            "movdqu %xmm15, 320(%rsp)\n"                                                   \
            "mov " idreg ", %rdi\n"                                                        \
            "mov $" #kind ", %esi\n"                                                       \
            "call profkit_fast_event\n"                                                    \
            "mov 0(%rsp), %rax\n mov 8(%rsp), %rcx\n mov 16(%rsp), %rdx\n"                  \
            "mov 24(%rsp), %rsi\n mov 32(%rsp), %rdi\n mov 40(%rsp), %r8\n"                 \
            "mov 48(%rsp), %r9\n mov 56(%rsp), %r10\n mov 64(%rsp), %r11\n"                 \
            "movdqu 80(%rsp), %xmm0\n movdqu 96(%rsp), %xmm1\n movdqu 112(%rsp), %xmm2\n"   \
            "movdqu 128(%rsp), %xmm3\n movdqu 144(%rsp), %xmm4\n movdqu 160(%rsp), %xmm5\n" \
            "movdqu 176(%rsp), %xmm6\n movdqu 192(%rsp), %xmm7\n movdqu 208(%rsp), %xmm8\n" \
            "movdqu 224(%rsp), %xmm9\n movdqu 240(%rsp), %xmm10\n movdqu 256(%rsp), %xmm11\n" \
            "movdqu 272(%rsp), %xmm12\n movdqu 288(%rsp), %xmm13\n movdqu 304(%rsp), %xmm14\n" \
            "movdqu 320(%rsp), %xmm15\n"                                                   \
            "leave\n"                                                                      \
            ".cfi_def_cfa %rsp, 8\n"                                                       \
            "ret\n"                                                                        \
            ".cfi_endproc\n"                                                               \
            ".size " #name ", .-" #name "\n")
FAST_STUB(profkit_fast_enter, "%r14", 1);
FAST_STUB(profkit_fast_leave, "%rdi", 2);
FAST_STUB(profkit_fast_tail, "%rdi", 3);
void profkit_fast_enter(void);
void profkit_fast_leave(void);
void profkit_fast_tail(void);
#endif

/* ---- rare records: events, modules, code map ------------------------------------------ */
typedef struct {
    uint64_t t;
    uint32_t tid;
    const char *kind;
    char *text;
} rec_t;
#define MAX_RECORDS 200000
static rec_t *g_recs;
static size_t g_n_recs, g_cap_recs, g_recs_dropped;

typedef struct {
    ModuleID id;
    UINT_PTR base;
    DWORD flags;
    char *path;
} module_t;
static module_t *g_modules;
static size_t g_n_modules, g_cap_modules;

typedef struct {
    UINT_PTR start;
    size_t size;
    ModuleID module;
    char kind; /* 'j' JIT, 'r' ReadyToRun */
    char *name;
} code_t;
static code_t *g_code;
static size_t g_n_code, g_cap_code;
/* functions whose code was not yet available when we were told about it */
static struct {
    FunctionID fid;
    char kind;
} *g_pending;
static size_t g_n_pending, g_cap_pending;

typedef struct {
    ThreadID managed;
    uint32_t tid; /* 0 when named before it started: resolved at the end */
    char *name;
} tname_t;
static tname_t *g_tnames;
static size_t g_n_tnames, g_cap_tnames;
static ThreadID g_managed[4096];
static uint32_t g_managed_tid[4096];
static size_t g_n_managed;

static int grow(void **arr, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, c * size);
    if (!p) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

static uint32_t current_tid(void) { return (uint32_t)syscall(SYS_gettid); }

/* caller holds g_lock */
static void record_locked(uint32_t tid, const char *kind, const char *text) {
    if (g_n_recs >= MAX_RECORDS || grow((void **)&g_recs, &g_cap_recs, g_n_recs, sizeof *g_recs) < 0) {
        g_recs_dropped++;
        return;
    }
    rec_t *r = &g_recs[g_n_recs++];
    r->t = now_ns() - t0;
    r->tid = tid;
    r->kind = kind;
    r->text = strdup(text ? text : "");
}

static void record(const char *kind, const char *text) {
    uint32_t tid = current_tid();
    pthread_mutex_lock(&g_lock);
    record_locked(tid, kind, text);
    pthread_mutex_unlock(&g_lock);
}

typedef HRESULT (*fn_GetCodeInfo2)(void *, FunctionID, uint32_t, uint32_t *, CodeInfo *);
typedef HRESULT (*fn_GetFunctionInfo)(void *, FunctionID, ClassID *, ModuleID *, mdToken *);

/* Code-map entries for fid; -1 if its code is not available yet. */
static int add_code(FunctionID fid, char kind) {
    CodeInfo info[8];
    uint32_t n = 0;
    HRESULT hr = ((fn_GetCodeInfo2)SLOT(g_info, PI_GetCodeInfo2))(g_info, fid, 8, &n, info);
    if (hr < 0 || n == 0) return -1;
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken tok = 0;
    ((fn_GetFunctionInfo)SLOT(g_info, PI_GetFunctionInfo))(g_info, fid, &cls, &mod, &tok);
    char name[1024];
    function_name(fid, name, sizeof name);
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < n && i < 8; i++) {
        if (!info[i].size) continue;
        if (grow((void **)&g_code, &g_cap_code, g_n_code, sizeof *g_code) < 0) break;
        code_t *c = &g_code[g_n_code++];
        c->start = info[i].start;
        c->size = info[i].size;
        c->module = mod;
        c->kind = kind;
        c->name = strdup(name);
    }
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static void code_later(FunctionID fid, char kind) {
    pthread_mutex_lock(&g_lock);
    if (grow((void **)&g_pending, &g_cap_pending, g_n_pending, sizeof *g_pending) == 0) {
        g_pending[g_n_pending].fid = fid;
        g_pending[g_n_pending++].kind = kind;
    }
    pthread_mutex_unlock(&g_lock);
}

/* ---- the writer thread: shadow stacks, trees, lines, sinks ----------------------------- */
static pthread_t g_writer;
static _Atomic int g_stop;
static sem_t g_done;
static int g_writer_started;

/* line sinks */
static int g_stream_fd = -1;
static char *g_sbuf;
static size_t g_sbuf_n;
#define SBUF_CAP 65536
static int g_udp = -1;
static char g_sender[64];
static uint64_t g_udp_seq, g_udp_dropped, g_lines;
#define MAX_DATAGRAM 1400
#define MAX_HEADER 64
static char g_dgram[MAX_DATAGRAM];
static size_t g_dgram_n; /* body bytes */
static uint32_t g_dgram_lines;

static void stream_flush(void) {
    size_t off = 0;
    while (off < g_sbuf_n) {
        ssize_t w = write(g_stream_fd, g_sbuf + off, g_sbuf_n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break; /* a broken stream must not break the program */
        off += (size_t)w;
    }
    g_sbuf_n = 0;
}

/* Datagrams are sealed into a batch and handed to the kernel with one sendmmsg() per
 * batch (one system call per 32 datagrams instead of one each). A datagram's header is
 * written when it is sealed, numbered as if every earlier one is sent; when the kernel
 * takes only some (a full socket buffer), the rest are dropped, their lines added to
 * `dropped`, and their sequence numbers reused, so `seq` still counts datagrams the
 * kernel accepted and a gap at the monitor means loss on the way. */
#define BATCH 32
static char g_batch[BATCH][MAX_DATAGRAM + MAX_HEADER + 8];
static size_t g_batch_len[BATCH];
static uint32_t g_batch_lines[BATCH];
static unsigned g_n_batch;

static void udp_send_batch(void) {
    if (!g_n_batch) return;
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (unsigned i = 0; i < g_n_batch; i++) {
        iov[i].iov_base = g_batch[i];
        iov[i].iov_len = g_batch_len[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    unsigned sent = 0;
    while (sent < g_n_batch) {
        int k = sendmmsg(g_udp, msgs + sent, g_n_batch - sent, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        sent += (unsigned)k;
    }
    g_udp_seq += sent;
    for (unsigned i = sent; i < g_n_batch; i++) g_udp_dropped += g_batch_lines[i];
    g_n_batch = 0;
}

static void udp_seal(void) {
    if (g_dgram_lines == 0) return;
    char *pkt = g_batch[g_n_batch];
    int h = snprintf(pkt, MAX_HEADER + 1, "PK1 %s %llu %llu\n", g_sender,
                     (unsigned long long)(g_udp_seq + g_n_batch), (unsigned long long)g_udp_dropped);
    if (h < 0 || h > MAX_HEADER) h = 0;
    memcpy(pkt + h, g_dgram, g_dgram_n);
    g_batch_len[g_n_batch] = (size_t)h + g_dgram_n;
    g_batch_lines[g_n_batch] = g_dgram_lines;
    g_n_batch++;
    g_dgram_n = 0;
    g_dgram_lines = 0;
    if (g_n_batch == BATCH) udp_send_batch();
}

/* end of a writer pass: everything formatted so far goes out now */
static void udp_flush(void) {
    udp_seal();
    udp_send_batch();
}

static void udp_line(const char *line, size_t n) {
    const size_t budget = MAX_DATAGRAM - MAX_HEADER;
    char cut[MAX_DATAGRAM];
    if (n + 1 > budget) { /* one over-long line: cut to fit, on a UTF-8 boundary, with "…" */
        size_t k = budget - 4;
        while (k && (line[k] & 0xC0) == 0x80) k--;
        memcpy(cut, line, k);
        memcpy(cut + k, "\xe2\x80\xa6", 3);
        line = cut;
        n = k + 3;
    }
    if (g_dgram_lines && g_dgram_n + 1 + n > budget) udp_seal();
    if (g_dgram_lines) g_dgram[g_dgram_n++] = '\n';
    memcpy(g_dgram + g_dgram_n, line, n);
    g_dgram_n += n;
    g_dgram_lines++;
}

static void emit_line(const char *line, size_t n) {
    g_lines++;
    if (g_stream_fd >= 0) {
        if (g_sbuf_n + n + 1 > SBUF_CAP) stream_flush();
        if (n + 1 <= SBUF_CAP) {
            memcpy(g_sbuf + g_sbuf_n, line, n);
            g_sbuf_n += n;
            g_sbuf[g_sbuf_n++] = '\n';
        }
    }
    if (g_udp >= 0) udp_line(line, n);
}

static int g_lines_on;

/* Lines are formatted by hand (no printf: it costs more than the rest of a line's work)
 * into one buffer; the indentation is capped at MAX_INDENT characters (a depth of 4096),
 * so a runaway recursion cannot make one line megabytes long. */
#define MAX_INDENT 16384
#define NAME_CAP 1024
static char g_line[MAX_INDENT + NAME_CAP + 96];

static size_t put_u64(char *out, uint64_t v) {
    char tmp[24];
    size_t n = 0;
    do tmp[n++] = (char)('0' + v % 10), v /= 10;
    while (v);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

static size_t line_head(uint32_t depth_index, const char *kind, size_t kind_len, uint32_t id) {
    size_t indent = (size_t)(depth_index - 1) * 4;
    if (indent > MAX_INDENT) indent = MAX_INDENT;
    memset(g_line, ' ', indent);
    memcpy(g_line + indent, kind, kind_len);
    size_t o = indent + kind_len;
    const char *name = method_name(id);
    size_t n = strnlen(name, NAME_CAP);
    memcpy(g_line + o, name, n);
    return o + n;
}

static void line_open(uint32_t depth_index, uint32_t id) {
    emit_line(g_line, line_head(depth_index, "Enter: ", 7, id));
}

/* "Leave: NAME, Duration: 12.250 us" (or "12250 ns"): exact decimal from integer ns. */
static void line_close(uint32_t depth_index, uint32_t id, uint64_t dur) {
    size_t o = line_head(depth_index, "Leave: ", 7, id);
    memcpy(g_line + o, ", Duration: ", 12);
    o += 12;
    if (S.unit_ns) {
        o += put_u64(g_line + o, dur);
        memcpy(g_line + o, " ns", 3);
    } else {
        o += put_u64(g_line + o, dur / 1000);
        uint64_t frac = dur % 1000;
        g_line[o++] = '.';
        g_line[o++] = (char)('0' + frac / 100);
        g_line[o++] = (char)('0' + frac / 10 % 10);
        g_line[o++] = (char)('0' + frac % 10);
        memcpy(g_line + o, " us", 3);
    }
    emit_line(g_line, o + 3);
}

/* Base time without orphans (profkit.profilers.elt.lines): stack[1 .. written-1] have had
 * their Enter line written; the entries above are pending and always the top of the stack. */
static void lines_after_push(thr_t *t, uint64_t now) {
    if (!g_lines_on) return;
    uint32_t top = t->n_stack; /* entries 0..top-1, the new one at top-1 */
    if (S.basetime_ns == 0) {
        line_open(top - 1, t->stack[top - 1].id);
        t->written = top;
        return;
    }
    while (t->written < top && now - t->stack[t->written].start >= S.basetime_ns) {
        line_open(t->written, t->stack[t->written].id);
        t->written++;
    }
}

static void lines_after_pop(thr_t *t, uint32_t index, uint32_t id, uint64_t dur) {
    if (!g_lines_on) return;
    if (index >= t->written) {
        if (dur < S.basetime_ns) return; /* hidden; its Enter line was never written */
        for (uint32_t d = t->written; d < index; d++) line_open(d, t->stack[d].id);
        line_open(index, id);
    }
    line_close(index, id, dur);
    t->written = index;
}

static uint32_t hash_slot(thr_t *t, uint32_t parent, uint32_t id) {
    uint32_t mask = t->hash_cap - 1;
    uint32_t i = (uint32_t)(((uint64_t)parent * 0x9E3779B1u) ^ ((uint64_t)id * 0x85EBCA77u)) & mask;
    for (;;) {
        uint32_t v = t->hash[i];
        if (v == 0) return i;
        node_t *n = &t->nodes[v - 1];
        if (n->parent == parent && n->id == id) return i;
        i = (i + 1) & mask;
    }
}

static int tree_init(thr_t *t) {
    t->cap_nodes = 1024;
    t->nodes = calloc(t->cap_nodes, sizeof *t->nodes);
    t->hash_cap = 2048;
    t->hash = calloc(t->hash_cap, sizeof *t->hash);
    t->cap_stack = 256;
    t->stack = calloc(t->cap_stack, sizeof *t->stack);
    if (!t->nodes || !t->hash || !t->stack) return -1;
    t->n_nodes = 1; /* the root */
    t->nodes[0].parent = UINT32_MAX;
    t->n_stack = 1;
    t->written = 1;
    return 0;
}

static uint32_t tree_child(thr_t *t, uint32_t parent, uint32_t id) {
    if ((t->n_nodes + 1) * 2 > t->hash_cap) {
        uint32_t cap = t->hash_cap * 2;
        uint32_t *h = calloc(cap, sizeof *h);
        if (!h) return UINT32_MAX;
        free(t->hash);
        t->hash = h;
        t->hash_cap = cap;
        for (uint32_t n = 1; n < t->n_nodes; n++) t->hash[hash_slot(t, t->nodes[n].parent, t->nodes[n].id)] = n + 1;
    }
    uint32_t s = hash_slot(t, parent, id);
    if (t->hash[s]) return t->hash[s] - 1;
    if (t->n_nodes == t->cap_nodes) {
        node_t *p = realloc(t->nodes, (size_t)t->cap_nodes * 2 * sizeof *p);
        if (!p) return UINT32_MAX;
        t->nodes = p;
        t->cap_nodes *= 2;
    }
    uint32_t n = t->n_nodes++;
    memset(&t->nodes[n], 0, sizeof t->nodes[n]);
    t->nodes[n].parent = parent;
    t->nodes[n].id = id;
    t->hash[s] = n + 1;
    return n;
}

static int stack_push(thr_t *t, uint32_t id, uint64_t start) {
    if (t->n_stack == t->cap_stack) {
        frame_t *p = realloc(t->stack, (size_t)t->cap_stack * 2 * sizeof *p);
        if (!p) return -1;
        t->stack = p;
        t->cap_stack *= 2;
    }
    uint32_t node = tree_child(t, t->stack[t->n_stack - 1].node, id);
    if (node == UINT32_MAX) return -1;
    t->stack[t->n_stack].id = id;
    t->stack[t->n_stack].node = node;
    t->stack[t->n_stack].start = start;
    t->n_stack++;
    return 0;
}

/* The timeline (PROFKIT_TIMELINE): every shown call's start and end, as profkit run
 * --timeline keeps them, up to MAX_SPANS; later calls are counted, not kept. */
#define MAX_SPANS 1000000
typedef struct {
    uint32_t tid, method, depth;
    uint64_t start, end;
} span_t;
static span_t *g_spans;
static size_t g_n_spans, g_cap_spans;
static uint64_t g_spans_dropped;

static void add_span(uint32_t tid, uint32_t method, uint64_t start, uint64_t end, uint32_t depth) {
    if (g_n_spans >= MAX_SPANS || grow((void **)&g_spans, &g_cap_spans, g_n_spans, sizeof *g_spans) < 0) {
        g_spans_dropped++;
        return;
    }
    span_t *sp = &g_spans[g_n_spans++];
    sp->tid = tid, sp->method = method, sp->depth = depth, sp->start = start, sp->end = end;
}

/* drop the top frame without recording it (only after lost events) */
static void stack_discard(thr_t *t) {
    t->n_stack--;
    if (t->written > t->n_stack) t->written = t->n_stack;
    t->resyncs++;
}

static void consume(thr_t *t, const ev_t *e) {
    uint32_t kind = e->kd >> 28, depth = e->kd & DEPTH_MASK;
    uint64_t when = tick_ns(e->t);
    if (kind == K_ENTER) {
        while (t->n_stack > depth) stack_discard(t);
        while (t->n_stack < depth) /* its caller's Enter was lost: a placeholder frame */
            if (stack_push(t, 0, when) < 0) return;
        if (stack_push(t, e->id, when) < 0) return;
        lines_after_push(t, when);
        return;
    }
    while (t->n_stack > depth + 1) stack_discard(t);
    if (t->n_stack != depth + 1 || t->n_stack < 2) {
        t->resyncs++;
        return;
    }
    frame_t *f = &t->stack[t->n_stack - 1];
    if (f->id != e->id) {
        stack_discard(t);
        return;
    }
    uint64_t dur = when >= f->start ? when - f->start : 0;
    uint32_t index = t->n_stack - 1;
    t->n_stack--;
    if (dur >= S.basetime_ns) {
        if (S.timeline) add_span(t->tid, e->id, f->start, f->start + dur, index - 1);
        node_t *n = &t->nodes[f->node];
        if (n->calls == 0 || dur < n->min) n->min = dur;
        if (dur > n->max) n->max = dur;
        n->calls++;
        n->incl += dur;
    }
    lines_after_pop(t, index, e->id, dur);
}

/* Drain one ring; returns the number of events consumed. */
static size_t drain(thr_t *t) {
    if (!t->nodes && tree_init(t) < 0) return 0;
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
    size_t n = 0;
    uint64_t now = 0;
    for (; tail != head; tail++, n++) {
        consume(t, &t->ring[tail & t->mask]);
        if ((n & 4095) == 4095) atomic_store_explicit(&t->tail, tail + 1, memory_order_release);
    }
    atomic_store_explicit(&t->tail, tail, memory_order_release);
    /* base time: a pending call running for the base time already is certain to show */
    if (g_lines_on && S.basetime_ns && t->written < t->n_stack) {
        now = tick_ns(ticks());
        lines_after_push(t, now);
    }
    return n;
}

static void write_output(void);

static void *writer_main(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the program's, not ours */
    uint64_t last_calibration = now_ns();
    for (;;) {
        int stopping = atomic_load_explicit(&g_stop, memory_order_acquire);
        size_t n = 0;
        if (stopping) calibrate();
        if (now_ns() - last_calibration > 100000000ull) { /* refine the rate every 0.1 s */
            calibrate();
            last_calibration = now_ns();
        }
        for (thr_t *t = atomic_load_explicit(&g_threads, memory_order_acquire); t; t = t->next) {
            n += drain(t);
            if (atomic_load_explicit(&t->dead, memory_order_acquire) && t->ring &&
                atomic_load_explicit(&t->head, memory_order_acquire) == atomic_load_explicit(&t->tail, memory_order_relaxed)) {
                munmap(t->ring, t->ring_bytes); /* the thread is gone and drained */
                t->ring = NULL;
                t->mask = 0;
            }
        }
        if (g_stream_fd >= 0) stream_flush();
        if (g_udp >= 0) udp_flush();
        if (stopping) break;
        if (n == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    write_output();
    sem_post(&g_done);
    return NULL;
}

/* ---- the result file ------------------------------------------------------------------ */
/* caller holds g_lock */
static void resolve_thread_names(void) {
    for (size_t i = 0; i < g_n_tnames; i++)
        for (size_t j = 0; !g_tnames[i].tid && j < g_n_managed; j++)
            if (g_managed[j] == g_tnames[i].managed) g_tnames[i].tid = g_managed_tid[j];
}

static const char *thread_name(uint32_t tid) {
    for (size_t i = g_n_tnames; i-- > 0;)
        if (g_tnames[i].tid == tid) return g_tnames[i].name;
    return "";
}

static void write_output(void) {
    if (!S.output) return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", S.output, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        say("profkit: clr: cannot write %s: %s", S.output, strerror(errno));
        return;
    }
    pthread_mutex_lock(&g_lock);
    resolve_thread_names();
    uint64_t lost = 0, resyncs = 0;
    for (thr_t *t = atomic_load(&g_threads); t; t = t->next) {
        lost += atomic_load(&t->lost);
        resyncs += t->resyncs;
    }
    fprintf(f, "profkit-clr\t1\n");
    fprintf(f, "pid\t%d\n", (int)getpid());
    fprintf(f, "info\t%d\n", g_info_version);
    fprintf(f, "duration\t%llu\n", (unsigned long long)(now_ns() - t0));
    fprintf(f, "basetime\t%llu\n", (unsigned long long)S.basetime_ns);
    fprintf(f, "lost\t%llu\n", (unsigned long long)lost);
    fprintf(f, "resyncs\t%llu\n", (unsigned long long)resyncs);
    fprintf(f, "records_dropped\t%llu\n", (unsigned long long)g_recs_dropped);
    fprintf(f, "lines\t%llu\n", (unsigned long long)g_lines);
    fprintf(f, "udp\t%llu\t%llu\n", (unsigned long long)g_udp_seq, (unsigned long long)g_udp_dropped);
    fprintf(f, "spans_dropped\t%llu\n", (unsigned long long)g_spans_dropped);
    for (int i = 0; i < S.n_prefixes; i++) fprintf(f, "prefix\t%s\n", S.prefixes[i]);
    for (uint32_t id = 1; id < g_n_methods; id++) fprintf(f, "method\t%u\t%s\n", id, method_name(id));
    for (thr_t *t = atomic_load(&g_threads); t; t = t->next) {
        fprintf(f, "thread\t%u\t%s\n", t->tid, thread_name(t->tid));
        for (uint32_t n = 1; n < t->n_nodes; n++) {
            node_t *x = &t->nodes[n];
            fprintf(f, "node\t%u\t%u\t%u\t%u\t%llu\t%llu\t%llu\t%llu\n", t->tid, n, x->parent, x->id,
                    (unsigned long long)x->calls, (unsigned long long)x->incl,
                    (unsigned long long)x->min, (unsigned long long)x->max);
        }
    }
    for (size_t i = 0; i < g_n_tnames; i++) {
        if (!g_tnames[i].tid) continue;
        int seen = 0;
        for (thr_t *t = atomic_load(&g_threads); t; t = t->next) seen |= t->tid == g_tnames[i].tid;
        if (!seen) fprintf(f, "thread\t%u\t%s\n", g_tnames[i].tid, g_tnames[i].name);
    }
    for (size_t i = 0; i < g_n_modules; i++)
        fprintf(f, "module\t%lx\t%lx\t%u\t%s\n", (unsigned long)g_modules[i].id, (unsigned long)g_modules[i].base,
                g_modules[i].flags, g_modules[i].path ? g_modules[i].path : "");
    for (size_t i = 0; i < g_n_code; i++) {
        code_t *c = &g_code[i];
        fprintf(f, "code\t%lx\t%lx\t%s\t%lx\t%s\n", (unsigned long)c->start, (unsigned long)c->size,
                c->kind == 'r' ? "r2r" : "jit", (unsigned long)c->module, c->name ? c->name : "");
    }
    for (size_t i = 0; i < g_n_spans; i++)
        fprintf(f, "span\t%u\t%u\t%llu\t%llu\t%u\n", g_spans[i].tid, g_spans[i].method,
                (unsigned long long)g_spans[i].start, (unsigned long long)g_spans[i].end, g_spans[i].depth);
    for (size_t i = 0; i < g_n_recs; i++)
        fprintf(f, "event\t%llu\t%u\t%s\t%s\n", (unsigned long long)g_recs[i].t, g_recs[i].tid, g_recs[i].kind,
                g_recs[i].text ? g_recs[i].text : "");
    fprintf(f, "end\n");
    pthread_mutex_unlock(&g_lock);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, S.output) != 0) {
        say("profkit: clr: cannot write %s: %s", S.output, strerror(errno));
        unlink(tmp);
    }
}

/* ---- finishing: Shutdown, process exit, or abort() after an unhandled exception -------- */
static _Atomic int g_finished;

static void finish(int from_signal) {
    if (atomic_exchange(&g_finished, 1)) return;
    atomic_store(&g_active, 0);
    if (!g_writer_started) return;
    atomic_store_explicit(&g_stop, 1, memory_order_release);
    if (from_signal) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        while (sem_timedwait(&g_done, &ts) < 0 && errno == EINTR) {}
    } else {
        pthread_join(g_writer, NULL);
    }
}

static struct sigaction g_old_abrt;
static void on_abort(int sig) {
    finish(1);
    sigaction(SIGABRT, &g_old_abrt, NULL); /* then die exactly as before */
    raise(sig);
}

__attribute__((destructor)) static void at_unload(void) { finish(0); }

/* ---- callbacks ----------------------------------------------------------------------- */
typedef struct {
    void *const *vtbl;
} profiler_t;
static profiler_t g_profiler;

static HRESULT ok_stub(void) { return S_OK; } /* SysV: extra arguments are harmless */

static HRESULT cb_QueryInterface(void *self, const GUID *iid, void **out) {
    if (guid_eq(iid, &IID_IUnknown)) {
        *out = self;
        return S_OK;
    }
    for (size_t i = 0; i < sizeof IID_CALLBACKS / sizeof IID_CALLBACKS[0]; i++)
        if (guid_eq(iid, &IID_CALLBACKS[i])) {
            *out = self;
            return S_OK;
        }
    *out = NULL;
    return E_NOINTERFACE;
}
static ULONG cb_AddRef(void *self) { (void)self; return 1; }
static ULONG cb_Release(void *self) { (void)self; return 1; }

typedef HRESULT (*fn_QI)(void *, const GUID *, void **);
typedef HRESULT (*fn_SetEventMask)(void *, DWORD);
typedef HRESULT (*fn_SetEventMask2)(void *, DWORD, DWORD);
typedef HRESULT (*fn_SetMapper2)(void *, void *, void *);
typedef HRESULT (*fn_SetHooks3)(void *, void *, void *, void *);

static int open_sinks(void) {
    if (S.stream) {
        if (!strcmp(S.stream, "stderr")) {
            g_stream_fd = dup(2);
        } else {
            g_stream_fd = open(S.stream, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        }
        if (g_stream_fd < 0) {
            say("profkit: clr: PROFKIT_STREAM=%s: %s; the program runs unprofiled", S.stream, strerror(errno));
            return -1;
        }
        fcntl(g_stream_fd, F_SETFD, FD_CLOEXEC);
        g_sbuf = malloc(SBUF_CAP);
        if (!g_sbuf) return -1;
    }
    const char *udp = getenv("PROFKIT_UDP");
    if (udp && *udp) {
        char host[256];
        const char *colon = strrchr(udp, ':');
        if (!colon || colon == udp || (size_t)(colon - udp) >= sizeof host || !colon[1]) {
            say("profkit: clr: PROFKIT_UDP='%s': expected HOST:PORT, e.g. 127.0.0.1:2222; the program runs unprofiled", udp);
            return -1;
        }
        memcpy(host, udp, (size_t)(colon - udp));
        host[colon - udp] = 0;
        if (host[0] == '[' && host[strlen(host) - 1] == ']') {
            memmove(host, host + 1, strlen(host));
            host[strlen(host) - 1] = 0;
        }
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port <= 0 || port > 65535) {
            say("profkit: clr: PROFKIT_UDP='%s': expected HOST:PORT, e.g. 127.0.0.1:2222; the program runs unprofiled", udp);
            return -1;
        }
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_socktype = SOCK_DGRAM;
        int rc = getaddrinfo(host, colon + 1, &hints, &res);
        if (rc != 0 || !res) {
            say("profkit: clr: PROFKIT_UDP='%s': cannot resolve %s: %s; the program runs unprofiled", udp, host,
                gai_strerror(rc));
            return -1;
        }
        g_udp = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (g_udp < 0 || connect(g_udp, res->ai_addr, res->ai_addrlen) < 0) {
            say("profkit: clr: PROFKIT_UDP='%s': %s; the program runs unprofiled", udp, strerror(errno));
            freeaddrinfo(res);
            return -1;
        }
        freeaddrinfo(res);
        char hn[64] = "host";
        gethostname(hn, sizeof hn - 1);
        hn[sizeof hn - 1] = 0;
        char *dot = strchr(hn, '.');
        if (dot) *dot = 0;
        for (char *p = hn; *p; p++)
            if (*p == ' ' || *p == '/') *p = '_';
        snprintf(g_sender, 48, "%.32s/%d", hn[0] ? hn : "host", (int)getpid());
    }
    g_lines_on = g_stream_fd >= 0 || g_udp >= 0;
    return 0;
}

static HRESULT cb_Initialize(void *self, void *unk) {
    (void)self;
    t0 = now_ns();
    tick0 = ticks();
    if (read_settings() < 0) return E_FAIL;
    for (size_t i = 0; i < sizeof IID_INFOS / sizeof IID_INFOS[0]; i++) {
        void *p = NULL;
        if (((fn_QI)UNK_SLOT(unk, UNK_QueryInterface))(unk, &IID_INFOS[i].iid, &p) == S_OK && p) {
            g_info = p;
            g_info_version = IID_INFOS[i].version;
            break;
        }
    }
    if (!g_info) {
        say("profkit: clr: this runtime has no ICorProfilerInfo3; the program runs unprofiled");
        return E_FAIL;
    }
    if (open_sinks() < 0) return E_FAIL;
    DWORD mask = 0, high = 0;
    /* The WithInfo hooks need at least one of the *_INFO/ARGS/RETVAL flags; FRAME_INFO is
     * the cheapest (the runtime refuses the hooks with no such flag). */
    if (S.events & EV_CALLS)
        mask |= PRF_MONITOR_ENTERLEAVE | PRF_MONITOR_JIT_COMPILATION | (S.fast_hooks ? 0 : PRF_ENABLE_FRAME_INFO);
    if (S.events & EV_ARGS) mask |= PRF_ENABLE_FUNCTION_ARGS | PRF_ENABLE_FUNCTION_RETVAL | PRF_ENABLE_FRAME_INFO;
    if (S.events & EV_EXCEPTIONS) mask |= PRF_MONITOR_EXCEPTIONS;
    if (S.events & EV_THREADS) mask |= PRF_MONITOR_THREADS;
    if (S.events & EV_LOADS) mask |= PRF_MONITOR_MODULE_LOADS | PRF_MONITOR_ASSEMBLY_LOADS;
    if (S.events & EV_JIT) mask |= PRF_MONITOR_JIT_COMPILATION | PRF_MONITOR_CACHE_SEARCHES;
    if (S.events & EV_CALLS) mask |= PRF_MONITOR_EXCEPTIONS; /* unwinding pops shadow frames */
    HRESULT hr;
    if ((S.events & EV_GC) && g_info_version >= 5) {
        high |= PRF_HIGH_BASIC_GC;
        hr = ((fn_SetEventMask2)SLOT(g_info, PI_SetEventMask2))(g_info, mask, high);
        if (hr < 0) /* an older runtime without BASIC_GC: the full GC notifications */
            hr = ((fn_SetEventMask)SLOT(g_info, PI_SetEventMask))(g_info, mask | PRF_MONITOR_GC);
    } else {
        hr = ((fn_SetEventMask)SLOT(g_info, PI_SetEventMask))(g_info, mask | ((S.events & EV_GC) ? PRF_MONITOR_GC : 0));
    }
    if (hr < 0) {
        say("profkit: clr: SetEventMask failed (HRESULT 0x%08x); the program runs unprofiled", (unsigned)hr);
        return E_FAIL;
    }
    if (S.events & EV_CALLS) {
        hr = ((fn_SetMapper2)SLOT(g_info, PI_SetFunctionIDMapper2))(g_info, (void *)mapper, NULL);
#if HAVE_FAST_HOOKS
        if (hr >= 0 && S.fast_hooks)
            hr = ((fn_SetHooks3)SLOT(g_info, PI_SetEnterLeaveFunctionHooks3))(
                g_info, (void *)profkit_fast_enter, (void *)profkit_fast_leave, (void *)profkit_fast_tail);
        else
#endif
        if (hr >= 0)
            hr = ((fn_SetHooks3)SLOT(g_info, PI_SetEnterLeaveFunctionHooks3WithInfo))(
                g_info, (void *)hook_enter, (void *)hook_leave, (void *)hook_tail);
        if (hr < 0) {
            say("profkit: clr: setting the enter/leave hooks failed (HRESULT 0x%08x); the program runs "
                "unprofiled", (unsigned)hr);
            return E_FAIL;
        }
    }
    if (pthread_key_create(&g_key, thread_gone) != 0 || sem_init(&g_done, 0, 0) != 0) return E_FAIL;
    while (!TICKS_ARE_NS && now_ns() - t0 < 2000000) {} /* a first tick rate: 2 ms */
    calibrate();
    atomic_store(&g_active, 1);
    if (pthread_create(&g_writer, NULL, writer_main, NULL) != 0) {
        say("profkit: clr: cannot start the writer thread; the program runs unprofiled");
        atomic_store(&g_active, 0);
        return E_FAIL;
    }
    g_writer_started = 1;
    if (S.output) { /* an unhandled exception ends in abort(): save the profile first */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_abort;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(SIGABRT, &sa, &g_old_abrt);
    }
    return S_OK;
}

static HRESULT cb_InitializeForAttach(void) { return E_NOTIMPL; }

static HRESULT cb_Shutdown(void *self) {
    (void)self;
    /* code whose address was not known when it was compiled or found */
    for (size_t i = 0; i < g_n_pending; i++) add_code(g_pending[i].fid, g_pending[i].kind);
    finish(0);
    return S_OK;
}

typedef HRESULT (*fn_GetAssemblyInfo)(void *, AssemblyID, ULONG, ULONG *, WCHAR *, UINT_PTR *, ModuleID *);
typedef HRESULT (*fn_GetModuleInfo2)(void *, ModuleID, UINT_PTR *, ULONG, ULONG *, WCHAR *, AssemblyID *, DWORD *);
typedef HRESULT (*fn_GetThreadInfo)(void *, ThreadID, DWORD *);
typedef HRESULT (*fn_GetClassFromObject)(void *, ObjectID, ClassID *);
typedef HRESULT (*fn_GetClassIDInfo)(void *, ClassID, ModuleID *, mdToken *);
typedef HRESULT (*fn_GetModuleMetaData)(void *, ModuleID, DWORD, const GUID *, void **);

static HRESULT cb_AssemblyLoadFinished(void *self, AssemblyID id, HRESULT status) {
    (void)self;
    if (status < 0) return S_OK;
    WCHAR w[512];
    ULONG len = 0;
    UINT_PTR domain = 0;
    ModuleID mod = 0;
    if (((fn_GetAssemblyInfo)SLOT(g_info, PI_GetAssemblyInfo))(g_info, id, 512, &len, w, &domain, &mod) >= 0) {
        char name[1024];
        utf16_to_utf8(w, len, name, sizeof name);
        record("assembly", name);
    }
    return S_OK;
}

static HRESULT cb_ModuleLoadFinished(void *self, ModuleID id, HRESULT status) {
    (void)self;
    if (status < 0) return S_OK;
    WCHAR w[1024];
    ULONG len = 0;
    UINT_PTR base = 0;
    AssemblyID asm_id = 0;
    DWORD flags = 0;
    if (((fn_GetModuleInfo2)SLOT(g_info, PI_GetModuleInfo2))(g_info, id, &base, 1024, &len, w, &asm_id, &flags) < 0)
        return S_OK;
    char path[2048];
    utf16_to_utf8(w, len, path, sizeof path);
    uint32_t tid = current_tid();
    pthread_mutex_lock(&g_lock);
    if (grow((void **)&g_modules, &g_cap_modules, g_n_modules, sizeof *g_modules) == 0) {
        module_t *m = &g_modules[g_n_modules++];
        m->id = id;
        m->base = base;
        m->flags = flags;
        m->path = strdup(path);
    }
    if (S.events & EV_LOADS) record_locked(tid, "module", path);
    pthread_mutex_unlock(&g_lock);
    return S_OK;
}

static HRESULT cb_JITCompilationFinished(void *self, FunctionID fid, HRESULT status, BOOL safe) {
    (void)self, (void)safe;
    if (status >= 0 && (S.events & EV_JIT) && add_code(fid, 'j') < 0) code_later(fid, 'j');
    return S_OK;
}

static HRESULT cb_JITCachedFunctionSearchStarted(void *self, FunctionID fid, BOOL *use) {
    (void)self, (void)fid;
    *use = 1; /* keep the precompiled code: profkit observes, never changes code */
    return S_OK;
}

static HRESULT cb_JITCachedFunctionSearchFinished(void *self, FunctionID fid, int result) {
    (void)self;
    if (result == 0 /* COR_PRF_CACHED_FUNCTION_FOUND */ && (S.events & EV_JIT) && add_code(fid, 'r') < 0)
        code_later(fid, 'r');
    return S_OK;
}

static HRESULT cb_JITInlining(void *self, FunctionID caller, FunctionID callee, BOOL *inline_ok) {
    (void)self, (void)caller;
    /* An inlined call has no Enter/Leave: keep hooked functions out of line, so their
     * call counts are exact; everything else inlines as usual. */
    *inline_ok = (S.events & EV_CALLS) ? map_function(callee) == UINT32_MAX : 1;
    return S_OK;
}

static uint32_t os_tid_of(ThreadID managed) {
    DWORD tid = 0;
    if (((fn_GetThreadInfo)SLOT(g_info, PI_GetThreadInfo))(g_info, managed, &tid) >= 0 && tid) return tid;
    for (size_t i = 0; i < g_n_managed; i++)
        if (g_managed[i] == managed) return g_managed_tid[i];
    return 0;
}

static void remember_managed(ThreadID managed, uint32_t tid) {
    pthread_mutex_lock(&g_lock);
    size_t i;
    for (i = 0; i < g_n_managed; i++)
        if (g_managed[i] == managed) break;
    if (i < sizeof g_managed / sizeof g_managed[0]) {
        g_managed[i] = managed;
        g_managed_tid[i] = tid;
        if (i == g_n_managed) g_n_managed++;
    }
    pthread_mutex_unlock(&g_lock);
}

static HRESULT cb_ThreadCreated(void *self, ThreadID managed) {
    (void)self;
    uint32_t tid = os_tid_of(managed);
    if (tid) remember_managed(managed, tid);
    char text[64];
    snprintf(text, sizeof text, "%u", tid);
    if (S.events & EV_THREADS) record("thread-created", text);
    return S_OK;
}

static HRESULT cb_ThreadAssigned(void *self, ThreadID managed, DWORD tid) {
    (void)self;
    remember_managed(managed, tid);
    return S_OK;
}

static HRESULT cb_ThreadDestroyed(void *self, ThreadID managed) {
    (void)self;
    uint32_t tid = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n_managed; i++)
        if (g_managed[i] == managed) tid = g_managed_tid[i];
    pthread_mutex_unlock(&g_lock);
    char text[64];
    snprintf(text, sizeof text, "%u", tid);
    if (S.events & EV_THREADS) record("thread-destroyed", text);
    return S_OK;
}

static HRESULT cb_ThreadNameChanged(void *self, ThreadID managed, ULONG cch, WCHAR *wname) {
    (void)self;
    uint32_t tid = os_tid_of(managed);
    char name[512];
    utf16_to_utf8(wname, wname ? cch : 0, name, sizeof name);
    pthread_mutex_lock(&g_lock);
    if (grow((void **)&g_tnames, &g_cap_tnames, g_n_tnames, sizeof *g_tnames) == 0) {
        g_tnames[g_n_tnames].managed = managed;
        g_tnames[g_n_tnames].tid = tid;
        g_tnames[g_n_tnames++].name = strdup(name);
    }
    if (S.events & EV_THREADS) {
        char text[600];
        snprintf(text, sizeof text, "%u %s", tid, name);
        record_locked(current_tid(), "thread-named", text);
    }
    pthread_mutex_unlock(&g_lock);
    return S_OK;
}

static HRESULT cb_ExceptionThrown(void *self, ObjectID obj) {
    (void)self;
    char name[1024] = "(unknown exception type)";
    ClassID cls = 0;
    ModuleID mod = 0;
    mdToken td = 0;
    void *md = NULL;
    if (((fn_GetClassFromObject)SLOT(g_info, PI_GetClassFromObject))(g_info, obj, &cls) >= 0 &&
        ((fn_GetClassIDInfo)SLOT(g_info, PI_GetClassIDInfo))(g_info, cls, &mod, &td) >= 0 &&
        ((fn_GetModuleMetaData)SLOT(g_info, PI_GetModuleMetaData))(g_info, mod, 0, &IID_IMetaDataImport, &md) >= 0 &&
        md) {
        type_name(md, td, name, sizeof name);
        ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
    }
    if (S.events & EV_EXCEPTIONS) record("exception", name);
    return S_OK;
}

static HRESULT cb_ExceptionCatcherEnter(void *self, FunctionID fid, ObjectID obj) {
    (void)self, (void)obj;
    if (!(S.events & EV_EXCEPTIONS)) return S_OK;
    char name[1024];
    function_name(fid, name, sizeof name);
    record("catch", name);
    return S_OK;
}

static HRESULT cb_ExceptionUnwindFunctionEnter(void *self, FunctionID fid) {
    (void)self;
    thr_t *t = tls_thr;
    if (!t) return S_OK; /* no hooked call ever ran on this thread */
    uint32_t id = UINT32_MAX;
    pthread_mutex_lock(&g_lock);
    if (g_fmap_cap) {
        struct fent *e = fmap_slot(fid);
        if (e->fid == fid) id = e->id;
    }
    pthread_mutex_unlock(&g_lock);
    if (t->n_unwind < 64) t->unwind[t->n_unwind] = id;
    t->n_unwind++;
    return S_OK;
}

static HRESULT cb_ExceptionUnwindFunctionLeave(void *self) {
    (void)self;
    thr_t *t = tls_thr;
    if (!t || t->n_unwind == 0) return S_OK;
    t->n_unwind--;
    uint32_t id = t->n_unwind < 64 ? t->unwind[t->n_unwind] : UINT32_MAX;
    if (id != UINT32_MAX && t->depth) push_event(id, K_UNWIND); /* its Leave hook never runs */
    return S_OK;
}

/* "<generation> <induced|other>[ loh][ poh]": the highest of generations 0-2 collected,
 * then the large (3) and pinned (4) object heaps when they are collected too. */
static HRESULT cb_GarbageCollectionStarted(void *self, int n, BOOL *gens, int reason) {
    (void)self;
    int gen = -1;
    for (int i = 0; i < n && i < 3; i++)
        if (gens[i]) gen = i;
    char text[64];
    snprintf(text, sizeof text, "%d %s%s%s", gen, reason == 1 ? "induced" : "other",
             n > 3 && gens[3] ? " loh" : "", n > 4 && gens[4] ? " poh" : "");
    record("gc-start", text);
    return S_OK;
}

static HRESULT cb_GarbageCollectionFinished(void *self) {
    (void)self;
    record("gc-end", "");
    return S_OK;
}

static HRESULT cb_LoadAsNotificationOnly(void *self, BOOL *only) {
    (void)self;
    *only = 0;
    return S_OK;
}

static void *g_cb_vtbl[3 + CB_COUNT];

static void build_vtable(void) {
    g_cb_vtbl[UNK_QueryInterface] = (void *)cb_QueryInterface;
    g_cb_vtbl[UNK_AddRef] = (void *)cb_AddRef;
    g_cb_vtbl[UNK_Release] = (void *)cb_Release;
    for (int i = 0; i < CB_COUNT; i++) g_cb_vtbl[3 + i] = (void *)ok_stub;
#define SET(slot, fn) g_cb_vtbl[3 + (slot)] = (void *)(fn)
    SET(CB_Initialize, cb_Initialize);
    SET(CB_Shutdown, cb_Shutdown);
    SET(CB_AssemblyLoadFinished, cb_AssemblyLoadFinished);
    SET(CB_ModuleLoadFinished, cb_ModuleLoadFinished);
    SET(CB_JITCompilationFinished, cb_JITCompilationFinished);
    SET(CB_JITCachedFunctionSearchStarted, cb_JITCachedFunctionSearchStarted);
    SET(CB_JITCachedFunctionSearchFinished, cb_JITCachedFunctionSearchFinished);
    SET(CB_JITInlining, cb_JITInlining);
    SET(CB_ThreadCreated, cb_ThreadCreated);
    SET(CB_ThreadDestroyed, cb_ThreadDestroyed);
    SET(CB_ThreadAssignedToOSThread, cb_ThreadAssigned);
    SET(CB_ExceptionThrown, cb_ExceptionThrown);
    SET(CB_ExceptionUnwindFunctionEnter, cb_ExceptionUnwindFunctionEnter);
    SET(CB_ExceptionUnwindFunctionLeave, cb_ExceptionUnwindFunctionLeave);
    SET(CB_ExceptionCatcherEnter, cb_ExceptionCatcherEnter);
    SET(CB_ThreadNameChanged, cb_ThreadNameChanged);
    SET(CB_GarbageCollectionStarted, cb_GarbageCollectionStarted);
    SET(CB_GarbageCollectionFinished, cb_GarbageCollectionFinished);
    SET(CB_InitializeForAttach, cb_InitializeForAttach);
    SET(CB_LoadAsNotificationOnly, cb_LoadAsNotificationOnly);
#undef SET
    g_profiler.vtbl = (void *const *)g_cb_vtbl;
}

/* ---- class factory and the exported entry point ------------------------------------- */
typedef struct {
    void *const *vtbl;
} factory_t;
static factory_t g_factory;
static void *g_cf_vtbl[5];

static HRESULT cf_QueryInterface(void *self, const GUID *iid, void **out) {
    if (guid_eq(iid, &IID_IUnknown) || guid_eq(iid, &IID_IClassFactory)) {
        *out = self;
        return S_OK;
    }
    *out = NULL;
    return E_NOINTERFACE;
}

static HRESULT cf_CreateInstance(void *self, void *outer, const GUID *iid, void **out) {
    (void)self;
    if (outer) return CLASS_E_NOAGGREGATION;
    build_vtable();
    return cb_QueryInterface(&g_profiler, iid, out);
}

static HRESULT cf_LockServer(void *self, BOOL lock) {
    (void)self, (void)lock;
    return S_OK;
}

EXPORT HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid, void **out) {
    if (!out) return E_FAIL;
    *out = NULL;
    if (!guid_eq(clsid, &CLSID_PROFKIT)) return CLASS_E_CLASSNOTAVAILABLE;
    g_cf_vtbl[0] = (void *)cf_QueryInterface;
    g_cf_vtbl[1] = (void *)cb_AddRef;
    g_cf_vtbl[2] = (void *)cb_Release;
    g_cf_vtbl[3] = (void *)cf_CreateInstance;
    g_cf_vtbl[4] = (void *)cf_LockServer;
    g_factory.vtbl = (void *const *)g_cf_vtbl;
    return cf_QueryInterface(&g_factory, iid, out);
}

EXPORT HRESULT DllCanUnloadNow(void) { return 1; /* S_FALSE: never unload */ }
