/* libprofkit_clr: the settings, read once from the environment at Initialize.
 *
 * Owns S (every setting), their parsers and say(), the one-line stderr report. Why a unit
 * of its own: the rules (profkit's PROFKIT_* names win over the article's, durations as
 * profkit writes them, a bad value means one line and an unprofiled run) are the user's
 * contract, checked by tests/clr, and change apart from the profiler's machinery.
 */
#include "profiler.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

HIDDEN settings_t S;

HIDDEN void say(const char *fmt, ...) {
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

/* ASCII whitespace: what the settings' grammar skips around a value and its parts. */
static int is_blank(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The duration grammar, one for profkit (settings/parse.py's parse_duration; the test
 * tests/clr/test_settings_grammar.py feeds both the same strings): blanks, digits with an
 * optional fraction ("100", "0.5", "1.", ".5"), blanks, an optional unit (ns, us, µs, ms,
 * s; none means microseconds), blanks. No sign, exponent, hex, inf or nan, which strtod
 * alone would take. At most a week; rounded half to even, as Python's round(). */
static int parse_duration(const char *text, uint64_t *out) {
    while (is_blank(*text)) text++;
    const char *p = text;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++) digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return -1;
    char *end;
    double v = strtod(text, &end); /* the span is digits and one '.': a plain decimal */
    if (end != p) return -1;        /* (a locale with a decimal comma would stop early) */
    while (is_blank(*end)) end++;
    double scale = 1e3;
    if (!strncmp(end, "ns", 2)) scale = 1, end += 2;
    else if (!strncmp(end, "us", 2)) scale = 1e3, end += 2;
    else if (!strncmp(end, "\xc2\xb5s", 3)) scale = 1e3, end += 3;
    else if (!strncmp(end, "ms", 2)) scale = 1e6, end += 2;
    else if (*end == 's') scale = 1e9, end += 1;
    while (is_blank(*end)) end++;
    if (*end) return -1;
    double ns = v * scale;
    if (!(ns <= 7 * 86400e9)) return -1; /* also inf: 400 digits overflow the double */
    uint64_t whole = (uint64_t)ns;      /* exact: a week of ns is below 2^53 */
    double rest = ns - (double)whole;
    if (rest > 0.5 || (rest == 0.5 && (whole & 1))) whole++;
    *out = whole;
    return 0;
}

/* Comma-separated, each part trimmed of blanks, empty parts skipped (api/names.py's
 * split_prefixes). Python checks each part is a module path; a .NET namespace is matched as
 * text, so any part is kept here. */
static int parse_prefixes(const char *text) {
    char *copy = strdup(text);
    if (!copy) return -1;
    char *save = NULL;
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        while (is_blank(*p)) p++;
        size_t n = strlen(p);
        while (n && is_blank(p[n - 1])) p[--n] = 0;
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
        else if (!strcmp(p, "alloc")) mask |= EV_ALLOC;
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
HIDDEN int read_settings(void) {
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
            "exceptions, threads, loads, gc, jit, args, alloc, all; the program runs unprofiled", v);
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

HIDDEN int prefix_match(const char *name) {
    if (S.n_prefixes == 0) return 1;
    for (int i = 0; i < S.n_prefixes; i++) {
        size_t n = S.prefix_len[i];
        if (!strncmp(name, S.prefixes[i], n) && (name[n] == 0 || name[n] == '.' || name[n] == '+'))
            return 1;
    }
    return 0;
}
