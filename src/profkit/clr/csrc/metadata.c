/* libprofkit_clr: names from the runtime's metadata ("Namespace.Outer+Inner.Method``N").
 *
 * Why a unit of its own: reading metadata through IMetaDataImport's slots, ECMA-335
 * signatures and UTF-16 is a different kind of code from the profiler's bookkeeping, and
 * every caller (the mapper, the code map, exception callbacks) needs the same names. It
 * only reads metadata, so it is safe in any callback; it takes no lock of ours.
 */
#include "profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HIDDEN const GUID IID_IMetaDataImport = {0x7dac8207, 0xd3ae, 0x4c75, {0x9b, 0x67, 0x92, 0x80, 0x1a, 0x49, 0x7d, 0x44}};

typedef HRESULT (*fn_GetTokenAndMetaData)(void *, FunctionID, const GUID *, void **, mdToken *);
typedef HRESULT (*fn_GetMethodProps)(void *, mdToken, mdToken *, WCHAR *, ULONG, ULONG *, DWORD *,
                                     const uint8_t **, ULONG *, ULONG *, DWORD *);
typedef HRESULT (*fn_GetTypeDefProps)(void *, mdToken, WCHAR *, ULONG, ULONG *, DWORD *, mdToken *);
typedef HRESULT (*fn_GetNestedClassProps)(void *, mdToken, mdToken *);

/* UTF-16 -> UTF-8 (unpaired surrogates become U+FFFD); tabs and newlines become spaces,
 * so a name is always one field of one line in the result file. Returns bytes written. */
HIDDEN size_t utf16_to_utf8(const WCHAR *in, size_t n, char *out, size_t cap) {
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

/* A name that does not fit `cap` bytes ends in "…" on a character boundary: cut, never
 * empty and never half a character. `o` is what is written so far. */
static size_t mark_cut(char *out, size_t o, size_t cap) {
    if (cap < 4) return o;
    while (o + 4 > cap || (o && (out[o] & 0xC0) == 0x80)) o--; /* room for "…" and the NUL */
    memcpy(out + o, "\xe2\x80\xa6", 4);
    return o + 3;
}

/* Append UTF-16 `w` (`n` units) to out[o..cap); *cut is set when it did not all fit. */
static size_t append_utf16(const WCHAR *w, ULONG n, char *out, size_t o, size_t cap, int *cut) {
    size_t units = 0;
    while (units < n && w[units]) units++;
    if (o + 1 >= cap) {
        *cut |= units > 0;
        return o;
    }
    size_t k = utf16_to_utf8(w, units, out + o, cap - o);
    /* utf16_to_utf8 stops before a character that does not fit: compare what it took */
    size_t took = 0;
    for (size_t i = 0; i < k; took++) {
        unsigned char b = (unsigned char)out[o + i];
        size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        i += len;
        if (len == 4) took++; /* a surrogate pair: two units */
    }
    *cut |= took < units;
    return o + k;
}

/* Name of a type: "Namespace.Outer+Inner`1" (metadata keeps the `N arity in the name). A
 * name longer than the first buffer is read again into one of its length. */
static size_t type_name_cut(void *md, mdToken td, char *out, size_t cap, int *cut) {
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
        WCHAR small[512], *w = small;
        ULONG len = 0, have = 512;
        DWORD flags = 0;
        mdToken ext = 0;
        HRESULT hr = ((fn_GetTypeDefProps)SLOT(md, MD_GetTypeDefProps))(md, chain[i], w, have, &len, &flags, &ext);
        if (hr >= 0 && len > have && (w = malloc(len * sizeof *w)) != NULL) {
            have = len;
            hr = ((fn_GetTypeDefProps)SLOT(md, MD_GetTypeDefProps))(md, chain[i], w, have, &len, &flags, &ext);
        }
        if (!w) w = small, have = 512;
        if (hr >= 0) {
            if (i != depth - 1 && o + 2 < cap) out[o++] = '+';
            o = append_utf16(w, len < have ? len : have, out, o, cap, cut);
        }
        if (w != small) free(w);
        if (hr < 0) return o;
    }
    return o;
}

HIDDEN size_t type_name(void *md, mdToken td, char *out, size_t cap) {
    int cut = 0;
    size_t o = type_name_cut(md, td, out, cap, &cut);
    return cut ? mark_cut(out, o, cap) : o;
}

/* "Namespace.Type.Method" (generic methods: "Method``N"), from the function's metadata;
 * a name over `cap` bytes is cut with "…" (names of any length are read whole first).
 * Safe in any callback: it only reads metadata. */
HIDDEN int function_name(FunctionID fid, char *out, size_t cap) {
    void *md = NULL;
    mdToken tok = 0;
    HRESULT hr = ((fn_GetTokenAndMetaData)SLOT(g_info, PI_GetTokenAndMetaDataFromFunction))(
        g_info, fid, &IID_IMetaDataImport, &md, &tok);
    if (hr < 0 || md == NULL) {
        snprintf(out, cap, "(unknown function 0x%lx)", (unsigned long)fid);
        return -1;
    }
    WCHAR small[512], *w = small;
    ULONG len = 0, sig_len = 0, rva = 0, have = 512;
    DWORD attr = 0, impl = 0;
    mdToken td = 0;
    const uint8_t *sig = NULL;
    fn_GetMethodProps props = (fn_GetMethodProps)SLOT(md, MD_GetMethodProps);
    hr = props(md, tok, &td, w, have, &len, &attr, &sig, &sig_len, &rva, &impl);
    if (hr >= 0 && len > have && (w = malloc(len * sizeof *w)) != NULL) {
        have = len;
        hr = props(md, tok, &td, w, have, &len, &attr, &sig, &sig_len, &rva, &impl);
    }
    if (!w) w = small, have = 512;
    if (hr < 0) {
        if (w != small) free(w);
        ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
        snprintf(out, cap, "(unknown method 0x%x)", tok);
        return -1;
    }
    int cut = 0;
    size_t o = type_name_cut(md, td, out, cap, &cut);
    if (o + 2 < cap) out[o++] = '.', out[o] = 0;
    else cut = 1;
    o = append_utf16(w, len < have ? len : have, out, o, cap, &cut);
    if (w != small) free(w);
    uint32_t arity;
    if (sig && sig_len > 1 && (sig[0] & 0x10) && sig_uint(sig + 1, sig_len - 1, &arity) > 0) {
        int k = snprintf(out + o, cap - o, "``%u", arity);
        if (k < 0 || (size_t)k >= cap - o) cut = 1, out[o] = 0;
        else o += (size_t)k;
    }
    if (cut) mark_cut(out, o, cap);
    ((fn_Release)UNK_SLOT(md, UNK_Release))(md);
    return 0;
}
