/* libprofkit_clr: the hot path, what runs on every hooked call of the program.
 *
 * Owns the per-thread event rings (the thread produces, the writer consumes), the
 * Enter/Leave/Tailcall hooks (WithInfo: plain C; fast: the assembly stubs), which hooks
 * the runtime gets, and the unwind callbacks that pop frames an exception unwinds. Why
 * one unit: push_event must inline into every hook, and the ring's producer-side rules
 * (never lock, never allocate after a thread's first call, never block) live together.
 */
#include "profiler.h"

#include <stdlib.h>
#include <sys/mman.h>

typedef HRESULT (*fn_SetMapper2)(void *, void *, void *);
typedef HRESULT (*fn_SetHooks3)(void *, void *, void *, void *);

HIDDEN _Atomic(thr_t *) g_threads;
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

/* Hand the runtime the mapper and the hooks: the fast ones (our stubs) or WithInfo. */
HIDDEN HRESULT hooks_install(void) {
    HRESULT hr = ((fn_SetMapper2)SLOT(g_info, PI_SetFunctionIDMapper2))(g_info, (void *)mapper, NULL);
#if HAVE_FAST_HOOKS
    if (hr >= 0 && S.fast_hooks)
        hr = ((fn_SetHooks3)SLOT(g_info, PI_SetEnterLeaveFunctionHooks3))(
            g_info, (void *)profkit_fast_enter, (void *)profkit_fast_leave, (void *)profkit_fast_tail);
    else
#endif
    if (hr >= 0)
        hr = ((fn_SetHooks3)SLOT(g_info, PI_SetEnterLeaveFunctionHooks3WithInfo))(
            g_info, (void *)hook_enter, (void *)hook_leave, (void *)hook_tail);
    return hr;
}

/* The key whose destructor marks a thread's ring dead when the thread exits. */
HIDDEN int hooks_prepare(void) { return pthread_key_create(&g_key, thread_gone); }

/* Events are recorded only while active: from Initialize to finish(). */
HIDDEN void hooks_active(int on) { atomic_store(&g_active, on); }

/* ---- exception unwinding: a frame unwound pops like a Leave ---------------------------- *
 * The runtime's second pass calls ExceptionUnwindFunctionEnter(f) for each managed frame
 * it reaches, then ExceptionUnwindFunctionLeave() once that frame is popped: its Leave
 * hook never runs, so the Leave is ours to record. The frame that catches gets an
 * UnwindFunctionEnter and then ExceptionCatcherEnter instead of an UnwindFunctionLeave
 * (it stays on the stack and goes on running), so its entry is removed there. An
 * exception thrown and caught inside a finally that another exception is unwinding
 * nests above the outer one's entries, hence a stack rather than one slot. Growing it
 * allocates, as the rare exception path may (never the hooks). */
static void unwind_push(thr_t *t, uint32_t id) {
    if (t->n_unwind == t->cap_unwind) {
        uint32_t cap = t->cap_unwind ? t->cap_unwind * 2 : 16;
        uint32_t *p = cap > t->cap_unwind ? realloc(t->unwind, (size_t)cap * sizeof *p) : NULL;
        if (p) {
            t->unwind = p;
            t->cap_unwind = cap;
        }
    }
    if (t->n_unwind < t->cap_unwind) t->unwind[t->n_unwind] = id;
    if (t->n_unwind < UINT32_MAX) t->n_unwind++;
}

/* The top entry's id (UINT32_MAX: unhooked, or not kept), popped; -1 when empty. */
static int unwind_pop(thr_t *t, uint32_t *id) {
    if (t->n_unwind == 0) return -1;
    t->n_unwind--;
    *id = t->n_unwind < t->cap_unwind ? t->unwind[t->n_unwind] : UINT32_MAX;
    return 0;
}

HIDDEN HRESULT cb_ExceptionUnwindFunctionEnter(void *self, FunctionID fid) {
    (void)self;
    thr_t *t = tls_thr;
    if (!t) return S_OK; /* no hooked call ever ran on this thread */
    unwind_push(t, method_id(fid));
    return S_OK;
}

HIDDEN HRESULT cb_ExceptionUnwindFunctionLeave(void *self) {
    (void)self;
    thr_t *t = tls_thr;
    uint32_t id;
    if (!t || unwind_pop(t, &id) < 0) return S_OK;
    if (id != UINT32_MAX && t->depth) push_event(id, K_UNWIND); /* its Leave hook never runs */
    return S_OK;
}

/* ExceptionCatcherEnter: the catching frame's unwinding ends without a Leave. */
HIDDEN void unwind_caught(FunctionID fid) {
    (void)fid;
    thr_t *t = tls_thr;
    uint32_t id;
    if (t) (void)unwind_pop(t, &id);
}
