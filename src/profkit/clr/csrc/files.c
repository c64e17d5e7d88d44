/* libprofkit_clr: opening the files the library writes itself, by profkit's rules.
 *
 * The PROFKIT_STREAM file and the result file (PROFKIT_CLR_OUTPUT) are opened as the Python
 * writers open theirs (profkit/_streamfile.py, profkit/_atomic.py): a name is opened with
 * O_NOFOLLOW or created with O_CREAT|O_EXCL, so a link planted in a shared directory such
 * as /tmp is never followed by accident; a link is followed only as the kernel's
 * fs.protected_symlinks would follow it (it belongs to us or to the sticky directory's
 * owner), and a file is truncated only once opened and checked. Why a unit of its own:
 * these rules are a security contract shared by two writers, tested with planted links
 * (tests/clr/test_files.py), and they change apart from what is written.
 */
#include "profiler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_LINKS 40

/* The directory part of `path` into `dir` ("." for a bare name). */
static void dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
    } else if (slash == path) {
        snprintf(dir, cap, "/");
    } else {
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    }
}

/* Follow the symlinks at `path` (into `final`: the first name of the chain that is not a
 * link), refusing one that fs.protected_symlinks would refuse: in a sticky, world-writable
 * directory, a link that belongs neither to us nor to the directory's owner. 0, or -1 with
 * errno (EACCES: such a link; ELOOP: too many; ENAMETOOLONG). */
HIDDEN int follow_links(const char *path, char *final, size_t cap) {
    char cur[PATH_MAX], dir[PATH_MAX], next[PATH_MAX];
    if ((size_t)snprintf(cur, sizeof cur, "%s", path) >= sizeof cur) return errno = ENAMETOOLONG, -1;
    for (int i = 0; i < MAX_LINKS; i++) {
        struct stat link, parent;
        if (lstat(cur, &link) != 0 || !S_ISLNK(link.st_mode)) {
            if ((size_t)snprintf(final, cap, "%s", cur) >= cap) return errno = ENAMETOOLONG, -1;
            return 0;
        }
        dir_of(cur, dir, sizeof dir);
        if (stat(dir, &parent) == 0 && (parent.st_mode & S_ISVTX) && (parent.st_mode & S_IWOTH) &&
            link.st_uid != geteuid() && link.st_uid != parent.st_uid)
            return errno = EACCES, -1;
        ssize_t n = readlink(cur, next, sizeof next - 1);
        if (n < 0) return -1;
        next[n] = 0;
        int w = next[0] == '/' ? snprintf(cur, sizeof cur, "%s", next) : snprintf(cur, sizeof cur, "%s/%s", dir, next);
        if (w < 0 || (size_t)w >= sizeof cur) return errno = ENAMETOOLONG, -1;
    }
    return errno = ELOOP, -1;
}

/* Truncate `fd` if it is a regular file (a FIFO or a terminal is written as it is). */
static int ready(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0)) {
        int e = errno;
        close(fd);
        return errno = e, -1;
    }
    return fd;
}

/* PROFKIT_STREAM: opened for writing as profkit.run --stream opens it (_streamfile.py):
 * the name itself with O_NOFOLLOW, a missing file created with O_EXCL; a link followed
 * only if the rule above allows it and the path still names the opened file once open. */
HIDDEN int open_stream_file(const char *path) {
    const int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY;
    for (int i = 0; i < 3; i++) {
        int fd = open(path, flags | O_NOFOLLOW);
        if (fd >= 0) return ready(fd);
        if (errno == ELOOP || errno == EMLINK) break; /* a link: see below */
        if (errno != ENOENT) return -1;
        fd = open(path, flags | O_NOFOLLOW | O_CREAT | O_EXCL, 0666);
        if (fd >= 0 || errno != EEXIST) return fd; /* EEXIST: created meanwhile, look again */
    }
    if (errno == EEXIST) return -1;
    char final[PATH_MAX];
    if (follow_links(path, final, sizeof final) < 0) return -1;
    int fd = open(path, flags | O_CREAT, 0666);
    if (fd < 0) return -1;
    struct stat opened, named;
    if (follow_links(path, final, sizeof final) < 0 || fstat(fd, &opened) != 0 || stat(path, &named) != 0 ||
        opened.st_dev != named.st_dev || opened.st_ino != named.st_ino) {
        close(fd);
        return errno = EACCES, -1;
    }
    return ready(fd);
}

/* The result file: `target` gets the path to rename onto (a link's target, if the rule
 * allows following it; an existing FIFO, device or directory is refused: EINVAL) and `tmp`
 * a new file beside it, created with O_EXCL|O_NOFOLLOW (never an existing name, never
 * through a link). An existing target's permission bits are kept. */
HIDDEN FILE *open_result(const char *path, char *target, size_t target_cap, char *tmp, size_t tmp_cap) {
    if (follow_links(path, target, target_cap) < 0) return NULL;
    struct stat st;
    int exists = stat(target, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) return errno = EINVAL, NULL;
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; i++) {
        int w = i == 0 ? snprintf(tmp, tmp_cap, "%s.%d.tmp", target, (int)getpid())
                       : snprintf(tmp, tmp_cap, "%s.%d.%llx.tmp", target, (int)getpid(),
                                  (unsigned long long)(now_ns() * 2654435761u + (unsigned)i));
        if (w < 0 || (size_t)w >= tmp_cap) return errno = ENAMETOOLONG, NULL;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) return NULL;
    }
    if (fd < 0) return NULL;
    if (exists) (void)fchmod(fd, st.st_mode & 07777);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
    }
    return f;
}
