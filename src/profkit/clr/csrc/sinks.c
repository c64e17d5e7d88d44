/* libprofkit_clr: where the Enter/Leave lines go: the stream and the monitor's datagrams.
 *
 * Owns PROFKIT_STREAM (stderr or a file, buffered, written by the writer thread) and
 * PROFKIT_UDP (profkit monitor's PK1 datagrams, batched into one sendmmsg() each pass).
 * Why a unit of its own: opening, buffering, cutting and losing lines is I/O policy, apart
 * from what the lines say (lines.c); a broken sink never breaks the program.
 */
#include "profiler.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* line sinks */
static int g_stream_fd = -1;
static char *g_sbuf;
static size_t g_sbuf_n;
#define SBUF_CAP 65536
static int g_udp = -1;
static char g_sender[64];
HIDDEN uint64_t g_udp_seq, g_udp_dropped, g_lines;
#define MAX_DATAGRAM 1400
#define MAX_HEADER 64
static char g_dgram[MAX_DATAGRAM];
static size_t g_dgram_n; /* body bytes */
static uint32_t g_dgram_lines;
HIDDEN int g_lines_on;

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

HIDDEN void emit_line(const char *line, size_t n) {
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

/* Everything a writer pass formatted goes out now. */
HIDDEN void sinks_flush(void) {
    if (g_stream_fd >= 0) stream_flush();
    if (g_udp >= 0) udp_flush();
}

HIDDEN int open_sinks(void) {
    if (S.stream) {
        if (!strcmp(S.stream, "stderr")) {
            g_stream_fd = dup(2);
        } else {
            g_stream_fd = open_stream_file(S.stream); /* files.c: never through a planted link */
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
