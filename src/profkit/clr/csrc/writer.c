/* libprofkit_clr: the writer thread, and finishing the profile.
 *
 * The writer drains every thread's ring each millisecond (shadow.c), flushes the sinks
 * and, when stopped, writes the result file (output.c). Finishing stops it exactly once,
 * whichever comes first: Shutdown, the library's unloading at exit, the abort() an
 * unhandled exception or a stack overflow ends in, or a Ctrl-C (SIGINT) about to end the
 * process (both signal handlers, so it waits at most 5 s, and calls still open are closed
 * at that moment). Why a unit of its own: the thread's life and the ways a run can end
 * are one concern.
 */
#include "profiler.h"

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

static pthread_t g_writer;
static _Atomic int g_stop; /* 1: stop; 2: stop, the process is dying (a signal handler waits) */
static sem_t g_done;
static int g_writer_started;

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
        if (stopping) {
            uint64_t now = tick_ns(ticks());
            for (thr_t *t = atomic_load_explicit(&g_threads, memory_order_acquire); t; t = t->next) close_open(t, now);
        }
        sinks_flush();
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

/* ---- finishing: Shutdown, process exit, or abort() after an unhandled exception -------- */
static _Atomic int g_finished;

HIDDEN int writer_dying(void) { return atomic_load_explicit(&g_stop, memory_order_relaxed) == 2; }

HIDDEN void finish(int from_signal) {
    if (atomic_exchange(&g_finished, 1)) return;
    hooks_active(0);
    if (!g_writer_started) return;
    atomic_store_explicit(&g_stop, from_signal ? 2 : 1, memory_order_release);
    if (from_signal) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        while (sem_timedwait(&g_done, &ts) < 0 && errno == EINTR) {}
    } else {
        pthread_join(g_writer, NULL);
    }
}

static struct sigaction g_old_abrt, g_old_int;
static void on_abort(int sig) {
    finish(1);
    sigaction(SIGABRT, &g_old_abrt, NULL); /* then die exactly as before */
    raise(sig);
}

/* Ctrl-C. The runtime's own handler (the PAL's), or System.Native's once the program uses
 * the console, comes here only when the signal is to end the process: System.Native
 * installs after us and hands the signal back to the handler it found (ours) unless a
 * Console.CancelKeyPress handler cancels it. So: save, then whatever was there before. */
static void on_interrupt(int sig, siginfo_t *info, void *context) {
    finish(1);
    if (g_old_int.sa_flags & SA_SIGINFO) {
        if (g_old_int.sa_sigaction) g_old_int.sa_sigaction(sig, info, context);
    } else if (g_old_int.sa_handler != SIG_DFL && g_old_int.sa_handler != SIG_IGN) {
        g_old_int.sa_handler(sig);
    } else if (g_old_int.sa_handler == SIG_DFL) {
        sigaction(SIGINT, &g_old_int, NULL); /* die of it, as without us */
        raise(sig);
    }
}

__attribute__((destructor)) static void at_unload(void) { finish(0); }

/* Before the writer starts: the semaphore a signal-time finish() waits on. */
HIDDEN int writer_prepare(void) { return sem_init(&g_done, 0, 0); }

/* Start the writer thread; 0, or -1 when it cannot start. */
HIDDEN int writer_start(void) {
    if (pthread_create(&g_writer, NULL, writer_main, NULL) != 0) return -1;
    g_writer_started = 1;
    return 0;
}

/* An unhandled exception ends in abort(), Ctrl-C in SIGINT: save the profile first. A
 * SIGINT the process ignores (started in the background, nohup) stays ignored. */
HIDDEN void save_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_abort;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGABRT, &sa, &g_old_abrt);
    struct sigaction now;
    if (sigaction(SIGINT, NULL, &now) != 0 || (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN)) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigaction(SIGINT, &sa, &g_old_int);
}
