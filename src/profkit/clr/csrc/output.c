/* libprofkit_clr: the result file (PROFKIT_CLR_OUTPUT) that profkit's clr/result.py reads.
 *
 * One tab-separated record a line: the header fields, methods, each thread's call tree,
 * thread names, modules, the code map, timeline spans and events, then "end". Written to
 * a new temporary file and renamed, so a reader never sees half a file (files.c opens it,
 * by profkit's rules). Why a unit of its own: the format is a contract with the Python
 * side (tests/clr/test_result.py).
 */
#include "profiler.h"
#include "alloc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

HIDDEN void write_output(void) {
    if (!S.output) return;
    char tmp[PATH_MAX + 64], target[PATH_MAX];
    FILE *f = open_result(S.output, target, sizeof target, tmp, sizeof tmp);
    if (!f) {
        say("profkit: clr: cannot write %s: %s", S.output,
            errno == EINVAL ? "not a regular file" : strerror(errno));
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
    for (uint32_t id = 1; id < method_count(); id++) fprintf(f, "method\t%u\t%s\n", id, method_name(id));
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
    alloc_write(f);
    fprintf(f, "end\n");
    pthread_mutex_unlock(&g_lock);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, target) != 0) {
        say("profkit: clr: cannot write %s: %s", S.output, strerror(errno));
        unlink(tmp);
    }
}
