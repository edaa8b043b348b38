/*
 * tracer.c: the item's line tracer (docs/tracer-protocol.md for its output, docs/sandbox.md for
 * why it is written in C).
 *
 * Traced code runs in the tracer's process. A tracer written in Python would have frames on the
 * stack whenever traced code runs inside it (a __repr__ it renders, a __del__ the collector runs,
 * a signal handler), and from those frames traced code can reach its locals, its buffer and its
 * key, or steer it (f_trace, f_lineno). This tracer is a C trace function (PyEval_SetTrace): it
 * has no Python frame, its state lives in C memory, and the only Python objects it shares with
 * traced code are the values it renders. Python code of the item (the tracer module,
 * sandbox/tracer/) drives it through the functions at the end of this file, which check that the
 * tracer module is their caller.
 *
 * What it writes: one JSON line per event of a traced frame, locals diffed against the frame's
 * previous event, buffered and sealed per chunk with an HMAC chain under the item's key, written
 * to the events descriptor. Go checks the seals and every event against the source.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <limits.h>

#include "native.h"

#define CHUNK (64 << 10)     /* output flushed (and sealed) past this many bytes */
#define PIPE_BYTES (256 << 10) /* the events pipe's buffer, asked for at set-up */
#define MAX_NAMES 4096       /* local names one frame may report (Go's decoder has the same cap) */
#define MAX_LINE (8 << 20)   /* bytes of one record line (Go takes at most 16 MiB unsealed) */
#define NEST_LIMIT 40        /* container nesting rendered before giving up */
#define INT_BITS 14284       /* ~4300 digits (CPython's default str limit): past that, int->str is slow */
#define HEADROOM 200         /* recursion levels the tracer adds while it handles an event */
#define NT_CACHE 4096        /* code objects remembered as not traced (direct-mapped) */

/* ------------------------------------------------------------------ growable byte buffer */

typedef struct {
    char *p;
    size_t len, cap;
    size_t pre; /* bytes of the allocation before p (T.out: room for the previous seal) */
} sbuf;

static void out_of_memory(void);

static void sb_grow(sbuf *b, size_t more) __attribute__((noinline));
static inline void sb_need(sbuf *b, size_t more) {
    if (__builtin_expect(b->len + more <= b->cap, 1)) return;
    sb_grow(b, more);
}
static void sb_grow(sbuf *b, size_t more) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *p = realloc(b->p ? b->p - b->pre : NULL, cap + b->pre);
    if (!p) out_of_memory();
    b->p = p + b->pre;
    b->cap = cap;
}
static inline void sb_put(sbuf *b, const char *s, size_t n) {
    sb_need(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
#define sb_lit(b, s) sb_put((b), "" s, sizeof(s) - 1) /* a string literal */
static inline void sb_putc(sbuf *b, char c) {
    sb_need(b, 1);
    b->p[b->len++] = c;
}

/* The decimal digits of x (as printf's %lld) into the end of buf[0, 24); returns the first. */
static const char digits2[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                              "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                              "8081828384858687888990919293949596979899";
static char *dec(char *end, long long x) {
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    char *p = end;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        *--p = digits2[2 * r + 1];
        *--p = digits2[2 * r];
    }
    if (u >= 10) {
        *--p = digits2[2 * u + 1];
        *--p = digits2[2 * u];
    } else {
        *--p = (char)('0' + u);
    }
    if (x < 0) *--p = '-';
    return p;
}

/* ------------------------------------------------------------------ pointer-keyed hash map */

typedef struct {
    uintptr_t *k; /* 0: empty, 1: deleted */
    void **v;
    size_t cap, n, used;
} ptrmap;

static size_t pm_hash(uintptr_t k, size_t cap) { return (size_t)((k >> 3) * 0x9E3779B97F4A7C15ULL) & (cap - 1); }

static void *pm_get(const ptrmap *m, uintptr_t key) {
    if (!m->cap) return NULL;
    for (size_t i = pm_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->k[i] == key) return m->v[i];
        if (m->k[i] == 0) return NULL;
    }
}

static void pm_put(ptrmap *m, uintptr_t key, void *val);

static void pm_grow(ptrmap *m) {
    ptrmap old = *m;
    size_t cap = old.cap ? old.cap * 2 : 64;
    if (old.cap && old.n * 4 < old.cap) cap = old.cap; /* mostly deleted slots: rehash in place */
    m->k = calloc(cap, sizeof *m->k);
    m->v = calloc(cap, sizeof *m->v);
    if (!m->k || !m->v) out_of_memory();
    m->cap = cap;
    m->n = m->used = 0;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.k[i] > 1) pm_put(m, old.k[i], old.v[i]);
    }
    free(old.k);
    free(old.v);
}

static void pm_put(ptrmap *m, uintptr_t key, void *val) {
    if ((m->used + 1) * 4 >= m->cap * 3) pm_grow(m);
    size_t i = pm_hash(key, m->cap);
    for (;; i = (i + 1) & (m->cap - 1)) {
        if (m->k[i] == key) {
            m->v[i] = val;
            return;
        }
        if (m->k[i] == 0) break;
    }
    m->k[i] = key;
    m->v[i] = val;
    m->n++;
    m->used++;
}

static void *pm_del(ptrmap *m, uintptr_t key) {
    if (!m->cap) return NULL;
    for (size_t i = pm_hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->k[i] == key) {
            void *v = m->v[i];
            m->k[i] = 1;
            m->v[i] = NULL;
            m->n--;
            return v;
        }
        if (m->k[i] == 0) return NULL;
    }
}

/* ------------------------------------------------------------------ per-code and per-frame state */

typedef struct {
    char *a; /* "lineno":N,"depth": */
    size_t alen;
    char *b; /* ,"src":"..." */
    size_t blen;
} LinePair;

typedef struct {
    PyObject *code;  /* kept alive: its address identifies it */
    PyObject *lines; /* the source lines of its file (list of str) */
    char *head;      /* ,"func":"...","file":"...", */
    size_t headlen;
    int first, def_line, genlike;
    PyObject *co_code; /* bytes, fetched when first needed */
    PyObject *localnames; /* a function's variable names (frozenset), NULL for other code */
    ptrmap pairs;      /* lineno -> LinePair */
} CodeInfo;

typedef struct {
    PyObject *name;  /* str */
    PyObject *keyj;  /* bytes: "name": */
    PyObject *obj;   /* the last value when immutable (identity means unchanged), else NULL */
    char *val;       /* the last value's JSON */
    size_t vlen, vcap;
    int has_val;
    /* A flat list/tuple/dict of immutable scalars renders as before while it holds the very
     * same elements: its snapshot (the container, its length, its elements and keys). */
    PyObject *snap;
    Py_ssize_t snap_len;
    PyObject **snap_vals, **snap_keys;
} Slot;

typedef struct {
    PyObject *frame; /* kept alive while traced: its address identifies it */
    CodeInfo *info;
    long ordinal;
    char head[32]; /* "frame":N */
    size_t headlen;
    int lineno, depth, exc, named;
    char dstr[16];
    size_t dlen;
    Py_ssize_t nkeys;
    PyObject **keys; /* the frame's local names at its last event, in order */
    Py_ssize_t nslots;
    Slot *slots;        /* the reported names */
    Py_ssize_t *kidx;   /* slot -> index into keys */
} FrameState;

/* ------------------------------------------------------------------ configuration and state */

static struct {
    int naive, want_functions, kind_call;
    Py_ssize_t vc;
    long long max_events, max_bytes, big;
    double repr_s;
    PyObject *filename, *own_lines, *exact_targets, *prefix_targets, *exclude;
    char **prefix_c, **exclude_c;
    size_t *prefix_n, *exclude_n;
    Py_ssize_t nprefix, nexclude;
    PyObject *key, *hmac, *enc, *read_lines, *function_block, *file_codes, *same_code, *addr_sub, *dumps;
    PyObject *sig_signal, *sig_getsignal, *sig_dfl, *std_flush, *phase_code, *proxy_type;
    unsigned char normal_exit[256];
    int yield_value;
    unsigned long main_thread;
    pid_t main_pid;
} cfg;

static struct {
    int ready;          /* tracer_setup done in this process */
    int dead;           /* a process the item forked: never write, never trace */
    int tracing;        /* our trace function is installed */
    int recording;      /* events of traced frames are written */
    int ending;         /* the end record is being written: nothing else may run */
    int call_used, start_used, end_used;
    int guard;          /* a guarded user __repr__/__str__ is running */
    double guard_deadline; /* ... and has run too long past this */
    int in_event;       /* the trace function is handling an event (no re-entry: sys.call_tracing) */
    int sealing;        /* _hashlib is reading T.out (another thread may run meanwhile) */
    int sig_blocked;    /* every signal is blocked while the tracer works (restored from sig_saved) */
    sigset_t sig_saved;
    int timer_sig;      /* the real-time signal of the repr timer (never SIGALRM: that is the code's) */
    timer_t timer;
    int headroom;       /* nesting of the tracer's Python calls run with recursion headroom */
    int spare_fd;       /* /dev/null, released while a helper reads a file (the code may use up its fds) */
    /* an exception a pending signal handler raised before the tracer ran Python code: raised in
     * the traced code at its next line or call */
    PyObject *pend_t, *pend_v, *pend_tb;
    PyObject *phase_starter; /* the frame that started the running phase: only it may end it */
    codeset starters;   /* code allowed to start a phase: pluggy's callers, the tracer module's unittest run */
    sbuf out;           /* [0, commit): whole lines; past commit: the line being built */
    size_t commit;
    long long n_events, n_bytes, flush_at;
    unsigned char prev[32];
    long ordinal;
    PyObject *entry_code;   /* function items: depth-0 frames are called from it */
    /* function items whose call returned an iterator: the tracer takes values from it (consume) */
    int consuming;          /* the tracer is taking a value: depth-0 frames may be called from it */
    int consume_on;         /* a consumption started: the end record says how many values it took */
    PyObject *consume_frame; /* the frame below the tracer's own C (the tracer module's _run_call), borrowed */
    long consumed;          /* the values taken so far */
    PyObject *addresses, *slow, *keyj, *file_is_target, *file_lines, *file_codes, *alarm_fn, *address_fn, *traceobj;
    codeset own_codes;  /* function items: the code objects of the item's own file */
    codeset entry_codes; /* function items: the call expression's code and the code nested in it */
    PyObject *reprtimeout, *s_0x, *s_items, *empty_str, *empty_bytes;
    PyObject *tamper_files; /* the traced files on the stack when tampering was seen (innermost first) */
    ptrmap codes;       /* code -> CodeInfo, traced code only */
    ptrmap frames;      /* frame -> FrameState, traced frames only */
    PyObject *nt_cache[NT_CACHE]; /* code objects known not to be traced */
    void *ballast;      /* released on MemoryError so the end record can be written */
    /* test runs: the phase generator (the tracer module's _phase) being watched */
    PyObject *phase_frame;
    int phase_state; /* 0 none, 1 starting, 2 recording, 3 ending */
    long phases;
    /* scratch: one event's locals */
    PyObject **sk, **sv;
    Py_ssize_t scap;
    int saved_limit;
} T;

static void py_enter(void);
static void py_leave(void);

static void finish(int code) __attribute__((noreturn));
static void fail(const char *where) __attribute__((noreturn));
static void end_record(const char *status, PyObject *value, PyObject *exc_type, PyObject *exc_message);
static PyObject *render(PyObject *v);

static void xdecref(PyObject *o) {
    if (o) Py_DecRef(o);
}

/* No signal handler of the traced code runs inside the tracer (its exception would surface in the
 * middle of an event): before the tracer runs any Python code (a guarded __repr__, its helpers),
 * every signal is blocked until the trace function returns, then delivered to the code as usual.
 * (Python handlers run only between bytecodes, so the tracer's C code needs no blocking.) */
static void block_signals(void) {
    if (T.sig_blocked) return;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &T.sig_saved);
    T.sig_blocked = 1;
}

static void unblock_signals(void) {
    if (!T.sig_blocked) return;
    T.sig_blocked = 0;
    pthread_sigmask(SIG_SETMASK, &T.sig_saved, NULL);
}

/* Handlers of signals that arrived before the tracer started work (Python runs them at its next
 * check, which would be inside the tracer's Python code): run them now, and keep the exception
 * one raises for the traced code's next line or call. */
static void run_pending_signals(void) {
    if (PyErr_CheckSignals() == 0) return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (T.pend_t) {
        xdecref(t);
        xdecref(v);
        xdecref(tb);
        return;
    }
    T.pend_t = t;
    T.pend_v = v;
    T.pend_tb = tb;
}

/* Around every call of the tracer into Python code (a guarded __repr__, its helpers, the HMAC):
 * no signal handler of the code's runs inside it, and it has room on the recursion limit (the
 * tracer runs on top of the traced code's deepest frame). Nested pairs are fine. */
static void py_enter(void) {
    block_signals();
    if (T.headroom++ == 0) {
        run_pending_signals();
        T.saved_limit = Py_GetRecursionLimit();
        if (T.saved_limit < INT_MAX - HEADROOM) Py_SetRecursionLimit(T.saved_limit + HEADROOM);
    }
}

static void py_leave(void) {
    if (--T.headroom == 0 && T.saved_limit < INT_MAX - HEADROOM) Py_SetRecursionLimit(T.saved_limit);
}

/* ------------------------------------------------------------------ JSON */

static const char hexd[] = "0123456789abcdef";

static void json_cp(sbuf *b, unsigned cp) {
    char e[6] = {'\\', 'u', hexd[(cp >> 12) & 15], hexd[(cp >> 8) & 15], hexd[(cp >> 4) & 15], hexd[cp & 15]};
    sb_put(b, e, 6);
}

/* The JSON string literal of str s, ASCII only (as json.encoder.encode_basestring_ascii). */
static void json_str(sbuf *b, PyObject *s) {
    Py_ssize_t n;
    const unsigned char *u = (const unsigned char *)PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) {
        /* Lone surrogates have no UTF-8: escape the code points one by one. */
        PyErr_Clear();
        Py_ssize_t len = PyUnicode_GetLength(s);
        unsigned int *cps = (unsigned int *)PyUnicode_AsUCS4Copy(s);
        if (!cps) fail("encoding a string");
        sb_need(b, (size_t)len * 12 + 2);
        b->p[b->len++] = '"';
        for (Py_ssize_t i = 0; i < len; i++) {
            unsigned c = cps[i];
            if (c >= ' ' && c <= '~' && c != '"' && c != '\\') {
                b->p[b->len++] = (char)c;
            } else if (c == '"' || c == '\\') {
                b->p[b->len++] = '\\';
                b->p[b->len++] = (char)c;
            } else if (c >= 0x10000) {
                json_cp(b, 0xD800 | ((c - 0x10000) >> 10));
                json_cp(b, 0xDC00 | ((c - 0x10000) & 0x3FF));
            } else {
                json_cp(b, c);
            }
        }
        b->p[b->len++] = '"';
        PyMem_Free(cps);
        return;
    }
    sb_need(b, (size_t)n * 6 + 2);
    b->p[b->len++] = '"';
    for (Py_ssize_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c < 0x80) {
            i++;
            if (c >= ' ' && c <= '~' && c != '"' && c != '\\') {
                b->p[b->len++] = (char)c;
                continue;
            }
            b->p[b->len++] = '\\';
            switch (c) {
            case '"': b->p[b->len++] = '"'; break;
            case '\\': b->p[b->len++] = '\\'; break;
            case '\b': b->p[b->len++] = 'b'; break;
            case '\f': b->p[b->len++] = 'f'; break;
            case '\n': b->p[b->len++] = 'n'; break;
            case '\r': b->p[b->len++] = 'r'; break;
            case '\t': b->p[b->len++] = 't'; break;
            default:
                b->len--;
                json_cp(b, c);
            }
            continue;
        }
        unsigned cp;
        if (c < 0xE0) {
            cp = ((c & 0x1F) << 6) | (u[i + 1] & 0x3F);
            i += 2;
        } else if (c < 0xF0) {
            cp = ((c & 0x0F) << 12) | ((u[i + 1] & 0x3F) << 6) | (u[i + 2] & 0x3F);
            i += 3;
        } else {
            cp = ((c & 0x07) << 18) | ((u[i + 1] & 0x3F) << 12) | ((u[i + 2] & 0x3F) << 6) | (u[i + 3] & 0x3F);
            i += 4;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            json_cp(b, 0xD800 | (cp >> 10));
            json_cp(b, 0xDC00 | (cp & 0x3FF));
        } else {
            json_cp(b, cp);
        }
    }
    b->p[b->len++] = '"';
}

/* ------------------------------------------------------------------ output: buffer, seal, write */

static void write_all(const char *p, size_t n) {
    while (n) {
        ssize_t w = write(EVENTS_FD, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            _exit(EXIT_PIPE);
        }
        p += w;
        n -= (size_t)w;
    }
}

/* write_all of a then b, in one system call when the pipe takes both. */
static void write_two(const char *a, size_t an, const char *b, size_t bn) {
    struct iovec v[2] = {{(void *)a, an}, {(void *)b, bn}};
    ssize_t w;
    do {
        w = writev(EVENTS_FD, v, 2);
    } while (w < 0 && errno == EINTR);
    if (w < 0) _exit(EXIT_PIPE);
    size_t done = (size_t)w;
    if (done < an) {
        write_all(a + done, an - done);
        done = an;
    }
    write_all(b + (done - an), bn - (done - an));
}

/* Seal the committed lines (HMAC-SHA256 over the previous tag and the lines, by CPython's
 * _hashlib: OpenSSL) and write them with their seal line. */
static void flush(void) {
    size_t n = T.commit;
    if (T.dead) {
        memmove(T.out.p, T.out.p + n, T.out.len - n);
        T.out.len -= n;
        T.commit = 0;
        return;
    }
    /* The previous tag goes in the 32 bytes reserved before the lines (T.out.pre), and the HMAC
     * reads both in place: a read-only view of C memory that only _hashlib's C code sees. */
    sb_need(&T.out, 1); /* allocated */
    memcpy(T.out.p - 32, T.prev, 32);
    PyObject *msg = PyMemoryView_FromMemory(T.out.p - 32, (Py_ssize_t)(32 + n), PyBUF_READ);
    if (!msg) fail("sealing the trace");
    py_enter();
    /* _hashlib lets other threads run while it hashes: one that reports tampering meanwhile
     * must not touch T.out under it (tracer_tamper). */
    T.sealing = 1;
    PyObject *tag = PyObject_CallFunction(cfg.hmac, "OOs", cfg.key, msg, "sha256");
    T.sealing = 0;
    py_leave();
    Py_DecRef(msg);
    char *tp;
    Py_ssize_t tl;
    if (!tag || PyBytes_AsStringAndSize(tag, &tp, &tl) < 0 || tl != 32) fail("sealing the trace");
    memcpy(T.prev, tp, 32);
    Py_DecRef(tag);
    char seal[67];
    seal[0] = '#';
    for (int i = 0; i < 32; i++) {
        seal[1 + 2 * i] = hexd[T.prev[i] >> 4];
        seal[2 + 2 * i] = hexd[T.prev[i] & 15];
    }
    seal[65] = '\n';
    write_two(T.out.p, n, seal, 66);
    memmove(T.out.p, T.out.p + n, T.out.len - n);
    T.out.len -= n;
    T.commit = 0;
}

static void limit_reached(void) __attribute__((noreturn));

/* Commit the line built past T.commit as an event (count) or a record (no count). */
static void commit_line(int event) {
    size_t size = T.out.len - T.commit;
    if ((event && T.n_events >= cfg.max_events) || T.n_bytes + (long long)size > cfg.max_bytes || size > MAX_LINE) {
        T.out.len = T.commit;
        limit_reached();
    }
    if (event) T.n_events++;
    T.n_bytes += (long long)size;
    T.commit = T.out.len;
    if (T.n_bytes >= T.flush_at) {
        T.flush_at = T.n_bytes + CHUNK;
        flush();
    }
}

static void stop_tracing(void) {
    if (T.tracing) {
        native_settrace = 1;
        PyEval_SetTrace(NULL, NULL);
        native_settrace = 0;
        T.tracing = 0;
    }
    T.recording = 0;
}

/* The end record; the caller exits. */
static void end_record(const char *status, PyObject *value, PyObject *exc_type, PyObject *exc_message) {
    stop_tracing();
    block_signals();
    T.ending = 1;
    T.out.len = T.commit; /* a line being built is dropped */
    sb_lit(&T.out, "{\"event\":\"end\",\"status\":\"");
    sb_puts(&T.out, status);
    sb_putc(&T.out, '"');
    if (value) {
        sb_lit(&T.out, ",\"value\":");
        json_str(&T.out, value);
    }
    if (exc_type) {
        sb_lit(&T.out, ",\"exc_type\":");
        json_str(&T.out, exc_type);
    }
    if (exc_message) {
        sb_lit(&T.out, ",\"exc_message\":");
        json_str(&T.out, exc_message);
    }
    Py_ssize_t nf = T.tamper_files ? PyList_Size(T.tamper_files) : 0;
    if (nf > 0) {
        /* outermost first: what a collection that ended here can leave out (execute/) */
        sb_lit(&T.out, ",\"files\":[");
        for (Py_ssize_t i = nf - 1; i >= 0; i--) {
            json_str(&T.out, PyList_GetItem(T.tamper_files, i));
            if (i) sb_putc(&T.out, ',');
        }
        sb_putc(&T.out, ']');
    }
    char tail[96];
    if (T.consume_on)
        snprintf(tail, sizeof tail, ",\"consumed\":%ld,\"events\":%lld}\n", T.consumed, T.n_events);
    else
        snprintf(tail, sizeof tail, ",\"events\":%lld}\n", T.n_events);
    sb_puts(&T.out, tail);
    T.commit = T.out.len;
    flush();
}

static void end_c(const char *status, const char *exc_type, const char *exc_message) {
    PyObject *t = exc_type ? PyUnicode_FromString(exc_type) : NULL;
    PyObject *m = exc_message ? PyUnicode_FromString(exc_message) : NULL;
    end_record(status, NULL, t, m);
}

/* Flush the interpreter's own stdout/stderr buffers and leave without any clean-up. */
static void finish(int code) {
    Py_ssize_t n = cfg.std_flush ? PyTuple_Size(cfg.std_flush) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyObject_CallFunctionObjArgs(PyTuple_GetItem(cfg.std_flush, i), NULL);
        xdecref(r);
        PyErr_Clear();
    }
    _exit(code);
}

static void limit_reached(void) {
    end_c("event_limit", NULL, NULL);
    finish(0);
}

static void out_of_memory(void) {
    free(T.ballast);
    T.ballast = NULL;
    if (!T.ready || T.ending) _exit(EXIT_NOMEM);
    T.ending = 1;
    PyErr_Clear();
    T.out.len = T.commit;
    /* The committed lines are written as they are; the end record needs a few bytes. */
    char rec[96];
    int n = snprintf(rec, sizeof rec, "{\"event\":\"end\",\"status\":\"memory\",\"exc_type\":\"MemoryError\",\"events\":%lld}\n", T.n_events);
    if (T.out.len + (size_t)n <= T.out.cap) {
        memcpy(T.out.p + T.out.len, rec, (size_t)n);
        T.out.len += (size_t)n;
        T.commit = T.out.len;
        stop_tracing();
        flush();
        finish(0);
    }
    _exit(EXIT_NOMEM);
}

/* A failure of the tracer itself: memory, or a bug (the item exits 70: a sandbox error). */
static void fail(const char *where) {
    if (!T.ready) _exit(EXIT_TRACER_BUG);
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
        free(T.ballast);
        T.ballast = NULL;
        PyErr_Clear();
        end_c("memory", "MemoryError", NULL);
        finish(0);
    }
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *q = t ? PyType_GetQualName(t) : NULL;
    const char *qs = q ? PyUnicode_AsUTF8AndSize(q, NULL) : NULL;
    char msg[256];
    snprintf(msg, sizeof msg, "internal tracer error: %s: %s", where, qs ? qs : "?");
    PyErr_Clear();
    if (T.ending) _exit(EXIT_TRACER_BUG);
    end_c("exception", "TracerError", msg);
    finish(EXIT_TRACER_BUG);
}

static int file_is_target(PyObject *fn);
static PyObject *filename_of(PyObject *code);

/* The traced files (the repository's, in a test run) of the frames on the stack, innermost first,
 * each once, at most 16: which of the repository's files was running (issue 29: a collection that
 * ended tampered is made again without the file that did it). */
static PyObject *stack_files(void) {
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    PyObject *f = PyEval_GetFrame();
    if (f) Py_IncRef(f);
    for (int depth = 0; f && depth < 100000 && PyList_Size(list) < 16; depth++) {
        PyObject *code = PyFrame_GetCode(f);
        PyObject *fn = code ? filename_of(code) : NULL;
        if (fn && file_is_target(fn) && PySequence_Contains(list, fn) == 0) PyList_Append(list, fn);
        xdecref(fn);
        xdecref(code);
        PyObject *b = PyFrame_GetBack(f);
        Py_DecRef(f);
        f = b;
    }
    xdecref(f);
    PyErr_Clear();
    return list;
}

void tracer_tamper(const char *reason) {
    if (!T.ready) return;
    if (T.dead || T.ending || T.sealing) _exit(EXIT_TAMPERED);
    stop_tracing();
    PyErr_Clear();
    if (!T.tamper_files) T.tamper_files = stack_files();
    PyErr_Clear();
    end_c("tampered", NULL, reason);
    finish(0);
}

/* ------------------------------------------------------------------ rendering values */

static PyObject *qualname(void *tp) {
    PyObject *q = PyType_GetQualName(tp);
    if (q && IS_TYPE(q, PyUnicode_Type)) return q;
    xdecref(q);
    PyErr_Clear();
    return PyUnicode_FromString("?");
}

/* The documented forms of a value whose repr (what: "repr", or "str" for an exception's message)
 * failed (docs/tracer-protocol.md, "Values"): <T object (repr raised E)>, <T object (repr
 * returned R)>, <T object (repr timed out)>, with T, E and R types' qualified names. Every path
 * that gives one goes through here. */
static PyObject *failure_of(PyObject *q, const char *what, const char *how, void *of) {
    PyObject *r;
    if (of) {
        PyObject *qo = qualname(of);
        r = qo ? PyUnicode_FromFormat("<%U object (%s %s %U)>", q, what, how, qo) : NULL;
        xdecref(qo);
    } else {
        r = PyUnicode_FromFormat("<%U object (%s %s)>", q, what, how);
    }
    return r;
}

/* failure_of the qualified name of type tp. */
static PyObject *failure(void *tp, const char *what, const char *how, void *of) {
    PyObject *q = qualname(tp);
    if (!q) return NULL;
    PyObject *r = failure_of(q, what, how, of);
    Py_DecRef(q);
    return r;
}

/* <T object (repr raised E)> for exception type t (NULL: Exception). */
static PyObject *repr_failed(void *tp, PyObject *t) { return failure(tp, "repr", "raised", t ? (void *)t : (void *)PyExc_Exception); }

static PyObject *cut(PyObject *r) {
    /* r[:vc] + "..." when r is longer than vc; consumes r */
    if (!r || PyUnicode_GetLength(r) <= cfg.vc) return r;
    PyObject *h = PyUnicode_Substring(r, 0, cfg.vc);
    Py_DecRef(r);
    if (!h) return NULL;
    PyObject *dots = PyUnicode_FromString("...");
    PyObject *c = dots ? PyUnicode_Concat(h, dots) : NULL;
    Py_DecRef(h);
    xdecref(dots);
    return c;
}

static PyObject *nd_address(PyObject *self, PyObject *m) {
    PyObject *a = PyObject_CallMethod(m, "group", "i", 0);
    if (!a) return NULL;
    PyObject *o = PyDict_GetItemWithError(T.addresses, a);
    if (o) {
        Py_IncRef(o);
        Py_DecRef(a);
        return o;
    }
    if (PyErr_Occurred()) {
        Py_DecRef(a);
        return NULL;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "0x%zx", (size_t)PyDict_Size(T.addresses) + 1);
    o = PyUnicode_FromString(buf);
    if (!o || PyDict_SetItem(T.addresses, a, o) < 0) {
        Py_DecRef(a);
        xdecref(o);
        return NULL;
    }
    Py_DecRef(a);
    return o;
}

/* Object addresses in r replaced by per-trace ordinals, looking only at a prefix of r that is
 * safely longer than what is kept. Consumes r. */
static PyObject *normalise(PyObject *r) {
    int has = PySequence_Contains(r, T.s_0x);
    if (has <= 0) {
        PyErr_Clear();
        return r;
    }
    Py_ssize_t len = PyUnicode_GetLength(r), size = cfg.vc + 64;
    for (;;) {
        PyObject *part = PyUnicode_Substring(r, 0, size < len ? size : len);
        PyObject *o = part ? PyObject_CallFunctionObjArgs(cfg.addr_sub, T.address_fn, part, NULL) : NULL;
        xdecref(part);
        if (!o) {
            if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
                Py_DecRef(r);
                return NULL;
            }
            PyErr_Clear(); /* (cannot happen with signals blocked) keep the text as it is */
            return r;
        }
        if (size >= len || PyUnicode_GetLength(o) >= cfg.vc + 24) {
            Py_DecRef(r);
            return o;
        }
        Py_DecRef(o);
        size *= 2;
    }
}

static double now_s(void);

static PyObject *nd_on_alarm(PyObject *self, PyObject *args) {
    /* Only interrupts a guarded repr past its deadline; a late or foreign tick is ignored. */
    if (T.guard && now_s() >= T.guard_deadline) {
        PyErr_SetNone(T.reprtimeout);
        return NULL;
    }
    return none();
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* slot(obj) (a user __repr__ or __str__) under a timer: the str result, or a placeholder. The
 * timer (a POSIX timer on a real-time signal of the tracer's, so the code's own SIGALRM and
 * itimers are never touched) fires after repr_ms and again every 20 ms, so a repr that swallows
 * one ReprTimeout is interrupted again. Only that signal is unblocked during the call. */
static PyObject *guarded(PyObject *obj, int which, const char *what) {
    PyObject *name = qualname(TYPE(obj));
    if (!name) return NULL;
    PyObject *id = PyLong_FromVoidPtr(obj);
    PyObject *seen = id ? PyDict_GetItemWithError(T.slow, id) : NULL;
    if (seen == obj) {
        Py_DecRef(id);
        PyObject *r = failure_of(name, what, "timed out", NULL);
        Py_DecRef(name);
        return r;
    }
    PyErr_Clear();
    reprfunc fn = (reprfunc)PyType_GetSlot(TYPE(obj), which);
    if (!fn) fn = (reprfunc)(which == Py_tp_str ? PyType_GetSlot(TYPE(obj), Py_tp_repr) : NULL);
    if (!fn) {
        PyErr_Clear();
        Py_DecRef(id);
        PyObject *r = PyUnicode_FromFormat("<%U object>", name);
        Py_DecRef(name);
        return r;
    }
    py_enter();
    PyObject *cur = PyObject_CallFunction(cfg.sig_getsignal, "i", T.timer_sig);
    if (!cur) PyErr_Clear();
    if (cur != T.alarm_fn) {
        PyObject *r = PyObject_CallFunction(cfg.sig_signal, "iO", T.timer_sig, T.alarm_fn);
        if (!r) PyErr_Clear();
        xdecref(r);
    }
    xdecref(cur);
    struct itimerspec its = {{0, 20 * 1000000L}, {0, 0}}, off = {{0, 0}, {0, 0}};
    double rs = cfg.repr_s;
    its.it_value.tv_sec = (time_t)rs;
    its.it_value.tv_nsec = (long)((rs - (double)(time_t)rs) * 1e9);
    if (!its.it_value.tv_sec && !its.it_value.tv_nsec) its.it_value.tv_nsec = 1000000;
    sigset_t only, prevmask;
    sigemptyset(&only);
    sigaddset(&only, T.timer_sig);
    T.guard_deadline = now_s() + rs;
    T.guard = 1;
    timer_settime(T.timer, 0, &its, NULL);
    pthread_sigmask(SIG_UNBLOCK, &only, &prevmask);
    PyObject *result = fn(obj);
    pthread_sigmask(SIG_BLOCK, &only, NULL);
    T.guard = 0;
    timer_settime(T.timer, 0, &off, NULL);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&only, NULL, &zero) > 0) {
    } /* ticks that came too late */
    pthread_sigmask(SIG_SETMASK, &prevmask, NULL);
    PyObject *failed = NULL;
    if (!result) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        if (t && PyErr_GivenExceptionMatches(t, T.reprtimeout)) {
            failed = failure_of(name, what, "timed out", NULL);
            if (id) PyDict_SetItem(T.slow, id, obj);
        } else if (t && PyErr_GivenExceptionMatches(t, PyExc_MemoryError)) {
            PyErr_Restore(t, v, tb);
            fail("rendering a value");
        } else {
            failed = failure_of(name, what, "raised", t ? (void *)t : (void *)PyExc_Exception);
        }
        xdecref(t);
        xdecref(v);
        xdecref(tb);
    }
    Py_DecRef(id);
    if (failed) {
        xdecref(result);
        Py_DecRef(name);
        py_leave();
        return failed;
    }
    if (!IS_TYPE(result, PyUnicode_Type)) {
        if (!PyType_IsSubtype(TYPE(result), PyUnicode_Type)) {
            PyObject *r = failure_of(name, what, "returned", TYPE(result));
            Py_DecRef(result);
            Py_DecRef(name);
            py_leave();
            return r;
        }
        PyObject *s = PyUnicode_FromObject(result); /* an exact str copy: no user code */
        Py_DecRef(result);
        result = s;
        if (!result) {
            Py_DecRef(name);
            py_leave();
            return NULL;
        }
    }
    Py_DecRef(name);
    PyObject *r = normalise(result);
    py_leave();
    return r;
}

/* repr() of a built-in value through its type's slot: PyObject_Repr would first run pending
 * signal handlers (3.11) and count a recursion level, neither of which the tracer may do. */
static PyObject *srepr(PyObject *v) {
    reprfunc f = (reprfunc)PyType_GetSlot(TYPE(v), Py_tp_repr);
    if (!f) {
        PyErr_Clear();
        return PyUnicode_FromString("?");
    }
    return f(v);
}

static int is_container(void *tp) {
    return tp == PyList_Type || tp == PyTuple_Type || tp == PyDict_Type || tp == PySet_Type || tp == PyFrozenSet_Type;
}

static int is_immutable(void *tp) {
    return tp == PyLong_Type || tp == PyFloat_Type || tp == PyComplex_Type || tp == PyBool_Type ||
           tp == TYPE(Py_None) || tp == PyUnicode_Type || tp == PyBytes_Type;
}

/* An int as repr() gives it, or a placeholder past INT_BITS (int->str is quadratic). */
static PyObject *int_repr(PyObject *v) {
    size_t nb = _PyLong_NumBits(v);
    long bits = nb == (size_t)-1 ? LONG_MAX : (long)nb;
    PyErr_Clear();
    if (bits > INT_BITS) return PyUnicode_FromFormat("<int with %ld bits>", bits);
    PyObject *r = srepr(v);
    if (!r && PyErr_ExceptionMatches(PyExc_ValueError)) { /* past sys.get_int_max_str_digits() */
        PyErr_Clear();
        return PyUnicode_FromFormat("<int with %ld bits>", bits);
    }
    return r;
}

/* Upper bound on the C repr work for the items of a flat collection of safe scalars, or -1. */
enum { K_INT = 1, K_FLOAT = 2, K_STR = 4, K_OTHER = 8 };

static int item_kind(PyObject *x, long long big, long long *strlen_sum, int *inrange) {
    void *t = TYPE(x);
    if (t == PyLong_Type) {
        int of = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &of);
        if (of || !(-big < v && v < big)) *inrange = 0;
        PyErr_Clear();
        return K_INT;
    }
    if (t == PyBool_Type) return K_INT | K_FLOAT;
    if (t == PyFloat_Type || t == TYPE(Py_None)) return K_FLOAT;
    if (t == PyUnicode_Type) {
        *strlen_sum += PyUnicode_GetLength(x);
        return K_STR;
    }
    return K_OTHER;
}

/* flat_cost over an iterable of n items (consumes it). */
static long long flat_cost_iter(PyObject *it, Py_ssize_t n) {
    int all_int = 1, all_float = 1, all_str = 1, inrange = 1;
    long long slen = 0;
    if (!it) return -2;
    PyObject *x;
    while ((x = PyIter_Next(it))) {
        int k = item_kind(x, cfg.big, &slen, &inrange);
        Py_DecRef(x);
        if (!(k & K_INT)) all_int = 0;
        if (!(k & K_FLOAT)) all_float = 0;
        if (k != K_STR) all_str = 0;
        if (!all_int && !all_float && !all_str) break;
    }
    Py_DecRef(it);
    if (PyErr_Occurred()) return -2;
    if (all_int) return inrange ? 21 * (long long)n : -1;
    if (all_float) return 26 * (long long)n;
    if (all_str) return slen + 4 * (long long)n;
    return -1;
}

/* The repr of safe scalar x appended to b; *err set instead when x is not one, or when the strings
 * rendered so far (*slen) pass work. flat_cost checked the elements before, but allocations of
 * ours since (an iterator, a dict view) may have started a collection whose callbacks or __del__
 * changed the container: checked again here, no element's own code ever runs, and with none
 * running the container cannot change while its (borrowed) elements are read. */
static void put_repr(sbuf *b, PyObject *x, int *err, long long *slen, long long work) {
    int inrange = 1;
    if (*err || item_kind(x, cfg.big, slen, &inrange) == K_OTHER || !inrange || *slen > work) {
        *err = 1;
        return;
    }
    PyObject *r = srepr(x);
    Py_ssize_t n;
    const char *u = r ? PyUnicode_AsUTF8AndSize(r, &n) : NULL;
    if (!u) {
        *err = 1;
        xdecref(r);
        return;
    }
    sb_put(b, u, (size_t)n);
    Py_DecRef(r);
}

/* repr() of a flat container of built-in scalars of bounded size (exact output), built element by
 * element through the types' slots; NULL with no exception when it does not qualify. */
static PyObject *fast_repr(PyObject *v, void *tp) {
    Py_ssize_t n = PyObject_Size(v);
    if (n < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (n == 0) {
        return PyUnicode_FromString(tp == PyList_Type ? "[]" : tp == PyTuple_Type ? "()" : tp == PyDict_Type ? "{}"
                                    : tp == PySet_Type ? "set()" : "frozenset()");
    }
    long long work = 4 * (long long)cfg.vc + 1024;
    if ((long long)n * 3 > work) return NULL;
    long long c;
    if (tp == PyDict_Type) {
        long long kc = flat_cost_iter(PyObject_GetIter(v), n);
        if (kc < 0) {
            PyErr_Clear();
            return NULL;
        }
        PyObject *vals = PyObject_CallMethod(v, "values", NULL);
        c = vals ? flat_cost_iter(PyObject_GetIter(vals), n) : -2;
        xdecref(vals);
        if (c < 0) {
            PyErr_Clear();
            return NULL;
        }
        c += kc;
    } else {
        c = flat_cost_iter(PyObject_GetIter(v), n);
        if (c < 0) {
            PyErr_Clear();
            return NULL;
        }
    }
    if (c > work) return NULL;
    sbuf b = {0};
    int err = 0;
    long long slen = 0;
    sb_puts(&b, tp == PyList_Type ? "[" : tp == PyTuple_Type ? "(" : tp == PyFrozenSet_Type ? "frozenset({" : "{");
    if (tp == PyDict_Type) {
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *x;
        while (!err && PyDict_Next(v, &pos, &k, &x)) {
            if (i == n) err = 1; /* grown since it was measured (see put_repr) */
            if (i++) sb_lit(&b, ", ");
            put_repr(&b, k, &err, &slen, work);
            sb_lit(&b, ": ");
            put_repr(&b, x, &err, &slen, work);
        }
    } else {
        PyObject *it = PyObject_GetIter(v), *x;
        Py_ssize_t i = 0;
        if (!it) err = 1;
        while (!err && it && (x = PyIter_Next(it))) {
            if (i == n) err = 1;
            if (i++) sb_lit(&b, ", ");
            put_repr(&b, x, &err, &slen, work);
            Py_DecRef(x);
        }
        xdecref(it);
    }
    sb_puts(&b, tp == PyList_Type ? "]" : tp == PyTuple_Type ? (n == 1 ? ",)" : ")") : tp == PyFrozenSet_Type ? "})" : "}");
    PyObject *r = err || PyErr_Occurred() ? NULL : PyUnicode_FromStringAndSize(b.p, (Py_ssize_t)b.len);
    free(b.p);
    if (!r && !PyErr_ExceptionMatches(PyExc_MemoryError)) PyErr_Clear();
    return r;
}

#define ROOM_ERR ((Py_ssize_t)INT64_MIN)

/* The containers and objects being rendered (open), for cycles; objs counts the objects. */
typedef struct {
    PyObject *open[NEST_LIMIT + 2];
    int nopen, objs;
} openset;

static int is_open(openset *o, PyObject *x) {
    for (int i = 0; i < o->nopen; i++)
        if (o->open[i] == x) return 1;
    return 0;
}

static Py_ssize_t into(PyObject *x, PyObject *out, Py_ssize_t room, openset *o, int depth);
static Py_ssize_t obj_into(PyObject *x, PyObject *out, Py_ssize_t room, openset *o, int depth);
static int by_attributes(void *tp);

static int append(PyObject *out, PyObject *s) {
    if (!s) return -1;
    int r = PyList_Append(out, s);
    Py_DecRef(s);
    return r;
}

static Py_ssize_t element(PyObject *e, PyObject *out, Py_ssize_t room, openset *o, int depth) {
    void *te = TYPE(e);
    PyObject *r;
    if (is_container(te)) {
        r = is_open(o, e) ? NULL : fast_repr(e, te);
        if (!r) {
            if (PyErr_Occurred()) return ROOM_ERR;
            return into(e, out, room, o, depth + 1);
        }
        r = cut(r);
    } else if (by_attributes(te)) {
        return obj_into(e, out, room, o, depth + 1);
    } else {
        r = render(e);
    }
    if (!r) return ROOM_ERR;
    Py_ssize_t len = PyUnicode_GetLength(r);
    if (append(out, r) < 0) return ROOM_ERR;
    return room - len;
}

/* Append the repr of container x to out element by element; returns the room left (negative:
 * spent, the caller cuts), ROOM_ERR with an exception set. */
static Py_ssize_t into(PyObject *x, PyObject *out, Py_ssize_t room, openset *o, int depth) {
    void *tp = TYPE(x);
    if (is_open(o, x)) {
        const char *s = tp == PyList_Type ? "[...]" : tp == PyTuple_Type ? "(...)" : tp == PyDict_Type ? "{...}"
                      : tp == PySet_Type ? "set(...)" : "frozenset(...)";
        if (append(out, PyUnicode_FromString(s)) < 0) return ROOM_ERR;
        return room - (Py_ssize_t)strlen(s);
    }
    Py_ssize_t n = PyObject_Size(x);
    if (n < 0) return ROOM_ERR;
    if (n == 0) {
        PyObject *s = PyUnicode_FromString(tp == PyList_Type ? "[]" : tp == PyTuple_Type ? "()" : tp == PyDict_Type ? "{}"
                                           : tp == PySet_Type ? "set()" : "frozenset()");
        if (!s) return ROOM_ERR;
        Py_ssize_t len = PyUnicode_GetLength(s);
        if (append(out, s) < 0) return ROOM_ERR;
        return room - len;
    }
    if (depth >= NEST_LIMIT) return -1;
    const char *opener, *closer;
    if (tp == PyList_Type) opener = "[", closer = "]";
    else if (tp == PyTuple_Type) opener = "(", closer = n == 1 ? ",)" : ")";
    else if (tp == PyFrozenSet_Type) opener = "frozenset({", closer = "})";
    else opener = "{", closer = "}";
    if (append(out, PyUnicode_FromString(opener)) < 0) return ROOM_ERR;
    room -= (Py_ssize_t)strlen(opener);
    o->open[o->nopen++] = x;
    PyObject *items = tp == PyDict_Type ? PyObject_CallMethod(x, "items", NULL) : (Py_IncRef(x), x);
    PyObject *it = items ? PyObject_GetIter(items) : NULL;
    xdecref(items);
    if (!it) {
        o->nopen--;
        return ROOM_ERR;
    }
    int first = 1;
    PyObject *e;
    while ((e = PyIter_Next(it))) {
        if (room < 0) {
            Py_DecRef(e);
            break;
        }
        if (first) first = 0;
        else {
            if (append(out, PyUnicode_FromString(", ")) < 0) room = ROOM_ERR;
            else room -= 2;
        }
        if (room != ROOM_ERR && tp == PyDict_Type) {
            room = element(PyTuple_GetItem(e, 0), out, room, o, depth);
            if (room != ROOM_ERR) {
                if (append(out, PyUnicode_FromString(": ")) < 0) room = ROOM_ERR;
                else room -= 2;
            }
            if (room != ROOM_ERR) room = element(PyTuple_GetItem(e, 1), out, room, o, depth);
        } else if (room != ROOM_ERR) {
            room = element(e, out, room, o, depth);
        }
        Py_DecRef(e);
        if (room == ROOM_ERR) break;
    }
    Py_DecRef(it);
    o->nopen--;
    if (room == ROOM_ERR || PyErr_Occurred()) return ROOM_ERR;
    if (room < 0) return room; /* cut anyway: a closer would only be misleading */
    if (append(out, PyUnicode_FromString(closer)) < 0) return ROOM_ERR;
    return room - (Py_ssize_t)strlen(closer);
}

/* Objects whose type has object's own repr (no __repr__ anywhere in its MRO) render by their
 * attributes, P(x=1, y=[2]), as docs/tracer-protocol.md ("Values") says: at most OBJ_DEPTH of them
 * nested (deeper ones, and an object reached again while open, are P(...)), the first OBJ_WIDTH
 * attributes with exact str names among the first OBJ_SCAN entries of the instance's dict, then
 * "...". Only classes of the code's qualify: heap types a class statement could make (subclassable,
 * not immutable). A built-in type without a repr of its own (an iterator, object()) keeps
 * <T object at 0xN>, and so does an extension module's (itertools.chain, zlib.Compress), which
 * 3.12 made heap types too but which keep their state in C, not in an instance dict. */
#define OBJ_DEPTH 3
#define OBJ_WIDTH 16
#define OBJ_SCAN 256

static reprfunc object_repr; /* object's tp_repr, set with the tracer */

static int by_attributes(void *tp) {
    unsigned long f = PyType_GetFlags(tp);
    return object_repr && (f & Py_TPFLAGS_HEAPTYPE) && (f & Py_TPFLAGS_BASETYPE) && !(f & Py_TPFLAGS_IMMUTABLETYPE) &&
           (reprfunc)PyType_GetSlot(tp, Py_tp_repr) == object_repr;
}

/* Append "name=" to out (name cut to what room can show); returns the room left. */
static Py_ssize_t attr_name(PyObject *k, PyObject *out, Py_ssize_t room) {
    Py_ssize_t n = PyUnicode_GetLength(k), keep = room < 0 ? 0 : room + 1;
    PyObject *s = n > keep ? PyUnicode_Substring(k, 0, keep) : (Py_IncRef(k), k);
    if (!s) return ROOM_ERR;
    n = PyUnicode_GetLength(s);
    if (append(out, s) < 0 || append(out, PyUnicode_FromString("=")) < 0) return ROOM_ERR;
    return room - n - 1;
}

/* Append the attribute rendering of object x (by_attributes) to out; as into(). The instance's
 * dict is read in C (PyObject_GenericGetDict: the real one, whatever the class says __dict__ is;
 * no __getattribute__, property or descriptor runs) and its first entries are taken, with
 * references, before any attribute value is rendered: a value's own repr (guarded) may change
 * the dict but not what is shown. */
static Py_ssize_t obj_into(PyObject *x, PyObject *out, Py_ssize_t room, openset *o, int depth) {
    PyObject *name = qualname(TYPE(x));
    if (!name) return ROOM_ERR;
    if (is_open(o, x) || o->objs >= OBJ_DEPTH || depth >= NEST_LIMIT) {
        PyObject *s = PyUnicode_FromFormat("%U(...)", name);
        Py_DecRef(name);
        if (!s) return ROOM_ERR;
        Py_ssize_t len = PyUnicode_GetLength(s);
        if (append(out, s) < 0) return ROOM_ERR;
        return room - len;
    }
    PyObject *ks[OBJ_WIDTH], *vs[OBJ_WIDTH];
    int n = 0, more = 0;
    PyObject *d = PyObject_GenericGetDict(x, NULL);
    if (!d) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            Py_DecRef(name);
            return ROOM_ERR;
        }
        PyErr_Clear(); /* no __dict__ (slots only): P() */
    } else if (PyType_IsSubtype(TYPE(d), PyDict_Type)) {
        Py_ssize_t pos = 0, seen = 0;
        PyObject *k, *v;
        while (PyDict_Next(d, &pos, &k, &v)) { /* raw entries, also of a dict subclass */
            if (++seen > OBJ_SCAN) {
                more = 1;
                break;
            }
            if (!IS_TYPE(k, PyUnicode_Type)) continue;
            if (n == OBJ_WIDTH) {
                more = 1;
                break;
            }
            Py_IncRef(k);
            Py_IncRef(v);
            ks[n] = k;
            vs[n++] = v;
        }
    }
    xdecref(d);
    Py_ssize_t len = PyUnicode_GetLength(name);
    if (append(out, name) < 0 || append(out, PyUnicode_FromString("(")) < 0) room = ROOM_ERR;
    else room -= len + 1;
    o->open[o->nopen++] = x;
    o->objs++;
    int i;
    for (i = 0; i < n && room != ROOM_ERR && room >= 0; i++) {
        if (i) {
            if (append(out, PyUnicode_FromString(", ")) < 0) {
                room = ROOM_ERR;
                break;
            }
            room -= 2;
        }
        room = attr_name(ks[i], out, room);
        if (room != ROOM_ERR && room >= 0) room = element(vs[i], out, room, o, depth);
    }
    o->nopen--;
    o->objs--;
    for (int j = 0; j < n; j++) {
        Py_DecRef(ks[j]);
        Py_DecRef(vs[j]);
    }
    if (room == ROOM_ERR || PyErr_Occurred()) return ROOM_ERR;
    if (room < 0) return room;
    if (more) {
        if (append(out, PyUnicode_FromString(n ? ", ..." : "...")) < 0) return ROOM_ERR;
        room -= n ? 5 : 3;
        if (room < 0) return room;
    }
    if (append(out, PyUnicode_FromString(")")) < 0) return ROOM_ERR;
    return room - 1;
}

/* The rendering of container or object v built by into or obj_into within the budget: cut
 * when the budget was spent (or the nesting was too deep), a repr failure of v's type when the
 * walk raised (e.g. an element's repr mutated a dict being rendered). */
static PyObject *walk(PyObject *v, Py_ssize_t (*fn)(PyObject *, PyObject *, Py_ssize_t, openset *, int)) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    openset o = {{0}, 0, 0};
    Py_ssize_t room = fn(v, out, cfg.vc, &o, 0);
    if (room == ROOM_ERR) {
        Py_DecRef(out);
        PyObject *t, *ev, *tb;
        PyErr_Fetch(&t, &ev, &tb);
        if (t && PyErr_GivenExceptionMatches(t, PyExc_MemoryError)) {
            PyErr_Restore(t, ev, tb);
            return NULL;
        }
        PyObject *r = repr_failed(TYPE(v), t);
        xdecref(t);
        xdecref(ev);
        xdecref(tb);
        return r;
    }
    PyObject *r = PyUnicode_Join(T.empty_str, out);
    Py_DecRef(out);
    if (r && room < 0) { /* budget spent (or nesting too deep): always cut */
        PyObject *h = PyUnicode_Substring(r, 0, cfg.vc);
        Py_DecRef(r);
        PyObject *dots = h ? PyUnicode_FromString("...") : NULL;
        r = dots ? PyUnicode_Concat(h, dots) : NULL;
        xdecref(h);
        xdecref(dots);
    }
    return r;
}

/* The rendering of v: repr-identical for builtins, at most vc characters plus "...". Returns
 * NULL only on MemoryError (or an interpreter failure). */
static PyObject *render(PyObject *v) {
    void *tp = TYPE(v);
    PyObject *r;
    if (tp == PyUnicode_Type || tp == PyBytes_Type || tp == PyByteArray_Type) {
        Py_ssize_t n = PyObject_Size(v);
        if (n > cfg.vc) {
            PyObject *h = PySequence_GetSlice(v, 0, cfg.vc);
            r = h ? srepr(h) : NULL;
            xdecref(h);
        } else {
            r = srepr(v);
        }
    } else if (tp == PyLong_Type) {
        int of = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &of);
        if (!of && -cfg.big < x && x < cfg.big) r = PyUnicode_FromFormat("%lld", x);
        else {
            PyErr_Clear();
            r = int_repr(v);
        }
    } else if (tp == PyFloat_Type || tp == PyComplex_Type || tp == PyBool_Type || tp == TYPE(Py_None)) {
        r = srepr(v);
    } else if (is_container(tp)) {
        r = fast_repr(v, tp);
        if (!r) {
            if (PyErr_Occurred()) return NULL;
            return walk(v, into);
        }
    } else if (by_attributes(tp)) {
        return walk(v, obj_into);
    } else {
        r = guarded(v, Py_tp_repr, "repr");
    }
    if (!r && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        /* (cannot happen for built-in values; never the tracer's failure) */
        PyObject *t, *ev, *tb;
        PyErr_Fetch(&t, &ev, &tb);
        r = repr_failed(TYPE(v), t);
        xdecref(t);
        xdecref(ev);
        xdecref(tb);
        return r;
    }
    return cut(r);
}

/* str(exc) (guarded, capped) for an end record. */
static PyObject *exc_message(PyObject *exc) { return cut(guarded(exc, Py_tp_str, "str")); }

/* render(v), or the end of the run (memory). */
static PyObject *render_top(PyObject *v) {
    PyObject *r = render(v);
    if (!r) fail("rendering a value");
    return r;
}

/* ------------------------------------------------------------------ source lines and code info */

static PyObject *getsrc(PyObject *lines, int lineno) {
    Py_ssize_t n = lines ? PyList_Size(lines) : 0;
    if (lineno > 0 && lineno <= n) return PyList_GetItem(lines, lineno - 1); /* borrowed */
    PyErr_Clear();
    return T.empty_str;
}

/* Whether text (after leading whitespace) starts with `prefix` as a word. */
static const char *lstrip(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\f' || *s == '\v') s++;
    return s;
}
static int word_at(const char *s, const char *w) {
    size_t n = strlen(w);
    if (strncmp(s, w, n) != 0) return 0;
    unsigned char c = (unsigned char)s[n];
    return !(c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80);
}
static int is_def_line(PyObject *line) {
    const char *s = PyUnicode_AsUTF8AndSize(line, NULL);
    if (!s) {
        PyErr_Clear();
        return 0;
    }
    s = lstrip(s);
    if (word_at(s, "def") || word_at(s, "class")) return 1;
    if (strncmp(s, "async", 5) == 0 && (s[5] == ' ' || s[5] == '\t')) return word_at(lstrip(s + 5), "def");
    return 0;
}
static int starts_at(PyObject *line) {
    const char *s = PyUnicode_AsUTF8AndSize(line, NULL);
    if (!s) {
        PyErr_Clear();
        return 0;
    }
    return *lstrip(s) == '@';
}

/* helper(arg), one of the tracer module's helpers that read files: with a descriptor free for
 * them (the traced code may have used up its own) and as any Python call of the tracer's
 * (py_enter). */
static PyObject *call_helper(PyObject *helper, PyObject *arg) {
    py_enter();
    if (T.spare_fd >= 0) {
        close(T.spare_fd);
        T.spare_fd = -1;
    }
    PyObject *r = PyObject_CallOneArg(helper, arg);
    T.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    py_leave();
    return r;
}

/* The lines of a traced file, read once (helpers.read_lines: Go checks every event's source
 * text against the real file, so nothing here is trusted). */
static PyObject *file_lines(PyObject *fn) {
    if (PyUnicode_Compare(fn, cfg.filename) == 0) return cfg.own_lines;
    PyErr_Clear();
    PyObject *l = PyDict_GetItemWithError(T.file_lines, fn);
    if (l) return l;
    if (PyErr_Occurred()) fail("reading source lines");
    l = call_helper(cfg.read_lines, fn);
    if (!l || !IS_TYPE(l, PyList_Type)) {
        if (l == NULL && PyErr_ExceptionMatches(PyExc_MemoryError)) fail("reading source lines");
        PyErr_Clear();
        xdecref(l);
        l = PyList_New(0);
        if (!l) fail("reading source lines");
    }
    if (PyDict_SetItem(T.file_lines, fn, l) < 0) fail("reading source lines");
    Py_DecRef(l);
    return l;
}

/* A `function` record for a code object's first traced call (test runs): the helper finds the
 * block in the file's AST (and says None for a block already written). */
static void function_record(PyObject *code, PyObject *fn) {
    PyObject *r = call_helper(cfg.function_block, code);
    if (!r) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) fail("a function record");
        PyErr_Clear();
        return;
    }
    PyObject *q, *text;
    long first, last;
    if (r == Py_None || !IS_TYPE(r, PyTuple_Type) || !PyArg_ParseTuple(r, "UllU", &q, &first, &last, &text)) {
        PyErr_Clear();
        Py_DecRef(r);
        return;
    }
    T.out.len = T.commit;
    sb_lit(&T.out, "{\"event\":\"function\",\"file\":");
    json_str(&T.out, fn);
    sb_lit(&T.out, ",\"qualname\":");
    json_str(&T.out, q);
    char nums[64];
    snprintf(nums, sizeof nums, ",\"first\":%ld,\"last\":%ld,\"source\":", first, last);
    sb_puts(&T.out, nums);
    json_str(&T.out, text);
    sb_lit(&T.out, "}\n");
    Py_DecRef(r);
    commit_line(0);
}

/* The code's file name as an exact str (a str subclass given to compile() stays one: its __eq__ and
 * __hash__ must never run inside the tracer, nor poison its caches); NULL when it has none. */
static PyObject *filename_of(PyObject *code) {
    PyObject *fn = PyObject_GetAttrString(code, "co_filename");
    if (!fn) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) fail("reading a code object");
        PyErr_Clear();
        return NULL;
    }
    if (IS_TYPE(fn, PyUnicode_Type)) return fn;
    PyObject *exact = PyType_IsSubtype(TYPE(fn), PyUnicode_Type) ? PyUnicode_FromObject(fn) : NULL;
    Py_DecRef(fn);
    if (!exact) PyErr_Clear();
    return exact;
}

static CodeInfo *code_info(PyObject *code, PyObject *fn) {
    CodeInfo *info = calloc(1, sizeof *info);
    if (!info) out_of_memory();
    Py_IncRef(code);
    info->code = code;
    info->lines = file_lines(fn);
    Py_IncRef(info->lines);
    PyObject *name = PyObject_GetAttrString(code, "co_qualname");
    if (!name) {
        PyErr_Clear();
        name = PyObject_GetAttrString(code, "co_name");
    }
    PyObject *first = PyObject_GetAttrString(code, "co_firstlineno");
    PyObject *flags = PyObject_GetAttrString(code, "co_flags");
    if (!name || !IS_TYPE(name, PyUnicode_Type) || !first || !flags) fail("reading a code object");
    if (PyLong_AsLong(flags) & 0x0001 /* CO_OPTIMIZED: a function */) {
        /* Its locals are its variables: a name written into its f_locals mapping (which the
         * frame cannot read as a variable) is no local of it. */
        PyObject *all = PyList_New(0);
        static const char *attrs[] = {"co_varnames", "co_cellvars", "co_freevars"};
        for (int i = 0; all && i < 3; i++) {
            PyObject *t = PyObject_GetAttrString(code, attrs[i]);
            Py_ssize_t k = t && IS_TYPE(t, PyTuple_Type) ? PyTuple_Size(t) : 0;
            for (Py_ssize_t j = 0; j < k; j++) PyList_Append(all, PyTuple_GetItem(t, j));
            xdecref(t);
        }
        info->localnames = all ? PyFrozenSet_New(all) : NULL;
        xdecref(all);
        if (!info->localnames) fail("reading a code object");
    }
    sbuf h = {0};
    sb_lit(&h, ",\"func\":");
    json_str(&h, name);
    sb_lit(&h, ",\"file\":");
    json_str(&h, fn);
    sb_putc(&h, ',');
    info->head = h.p;
    info->headlen = h.len;
    info->first = (int)PyLong_AsLong(first);
    long fl = PyLong_AsLong(flags);
    info->genlike = (fl & (CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
    Py_DecRef(name);
    Py_DecRef(first);
    Py_DecRef(flags);
    /* A decorated function's co_firstlineno is its first decorator; its call event points at the
     * def line (decorators may span several lines). */
    info->def_line = info->first;
    if (starts_at(getsrc(info->lines, info->first))) {
        for (int ln = info->first + 1; ln < info->first + 200; ln++) {
            if (is_def_line(getsrc(info->lines, ln))) {
                info->def_line = ln;
                break;
            }
        }
    }
    pm_put(&T.codes, (uintptr_t)code, info);
    if (cfg.want_functions) function_record(code, fn);
    return info;
}

static LinePair *line_pair(CodeInfo *info, int lineno) {
    LinePair *p = pm_get(&info->pairs, (uintptr_t)(unsigned)lineno + 2);
    if (p) return p;
    p = calloc(1, sizeof *p);
    if (!p) out_of_memory();
    char a[48];
    int n = snprintf(a, sizeof a, "\"lineno\":%d,\"depth\":", lineno);
    p->a = strdup(a);
    p->alen = (size_t)n;
    sbuf b = {0};
    sb_lit(&b, ",\"src\":");
    json_str(&b, getsrc(info->lines, lineno));
    p->b = b.p;
    p->blen = b.len;
    if (!p->a) out_of_memory();
    pm_put(&info->pairs, (uintptr_t)(unsigned)lineno + 2, p);
    return p;
}

/* Whether a file is traced: a target (exact, or under a prefix without /../ or /./), not excluded. */
static int prefixed(const char *s, size_t n, char **pre, size_t *pn, Py_ssize_t k) {
    for (Py_ssize_t i = 0; i < k; i++)
        if (n >= pn[i] && memcmp(s, pre[i], pn[i]) == 0) return 1;
    return 0;
}

static int file_is_target(PyObject *fn) {
    PyObject *t = PyDict_GetItemWithError(T.file_is_target, fn);
    if (t) return t != Py_None; /* Py_None: not a target; anything else: a target */
    if (PyErr_Occurred()) fail("checking a file");
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(fn, &n);
    int yes = 0;
    if (!s) {
        PyErr_Clear();
    } else {
        int exact = PySet_Contains(cfg.exact_targets, fn);
        if (exact < 0) PyErr_Clear();
        yes = exact > 0 || (prefixed(s, (size_t)n, cfg.prefix_c, cfg.prefix_n, cfg.nprefix) &&
                            !memmem(s, (size_t)n, "/../", 4) && !memmem(s, (size_t)n, "/./", 3));
        if (yes && prefixed(s, (size_t)n, cfg.exclude_c, cfg.exclude_n, cfg.nexclude)) yes = 0;
    }
    if (PyDict_SetItem(T.file_is_target, fn, yes ? T.empty_str : Py_None) < 0) fail("checking a file");
    return yes;
}

/* Whether code is one of the traced file fn's own code objects: for the item's own file, one
 * nested in the module code it compiled; for any other, equal (code objects compare by bytecode,
 * constants, names and line table) to one compiled from the file as the import system does. */
static int genuine(PyObject *code, PyObject *fn) {
    if (T.own_codes.n && PyUnicode_Compare(fn, cfg.filename) == 0) return codeset_has(&T.own_codes, code);
    PyErr_Clear();
    PyObject *list = PyDict_GetItemWithError(T.file_codes, fn);
    if (!list) {
        if (PyErr_Occurred()) fail("checking a code object");
        list = call_helper(cfg.file_codes, fn);
        if (!list) {
            if (PyErr_ExceptionMatches(PyExc_MemoryError)) fail("checking a code object");
            PyErr_Clear();
            list = Py_None;
            Py_IncRef(list);
        }
        if (PyDict_SetItem(T.file_codes, fn, list) < 0) fail("checking a code object");
        Py_DecRef(list);
    }
    if (!IS_TYPE(list, PyList_Type)) return 0;
    Py_ssize_t n = PyList_Size(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GetItem(list, i) == code) return 1;
    }
    /* Equal to one of them: the same bytecode, names, line table and constants (compared by
     * type and value, a NaN equal to a NaN: the tracer module's same_code). */
    py_enter();
    PyObject *r = PyObject_CallFunctionObjArgs(cfg.same_code, code, list, NULL);
    py_leave();
    if (!r && PyErr_ExceptionMatches(PyExc_MemoryError)) fail("checking a code object");
    int ok = r == (PyObject *)&_Py_TrueStruct;
    xdecref(r);
    PyErr_Clear();
    return ok;
}

/* ------------------------------------------------------------------ frames */

static void set_lines(PyObject *frame, int on) {
    ((unsigned char *)frame)[frame_trace_lines_offset] = (unsigned char)on;
}

static void free_slot(Slot *s) {
    xdecref(s->name);
    xdecref(s->keyj);
    xdecref(s->obj);
    free(s->val);
    if (s->snap) {
        for (Py_ssize_t i = 0; i < s->snap_len; i++) {
            xdecref(s->snap_vals[i]);
            if (s->snap_keys) xdecref(s->snap_keys[i]);
        }
        free(s->snap_vals);
        free(s->snap_keys);
        Py_DecRef(s->snap);
    }
    memset(s, 0, sizeof *s);
}

static void free_state(FrameState *st) {
    for (Py_ssize_t i = 0; i < st->nslots; i++) free_slot(&st->slots[i]);
    for (Py_ssize_t i = 0; i < st->nkeys; i++) xdecref(st->keys[i]);
    free(st->slots);
    free(st->kidx);
    free(st->keys);
    xdecref(st->frame);
    free(st);
}

static FrameState *new_frame(CodeInfo *info, PyObject *frame) {
    FrameState *st = calloc(1, sizeof *st);
    if (!st) out_of_memory();
    st->ordinal = ++T.ordinal;
    st->headlen = (size_t)snprintf(st->head, sizeof st->head, "\"frame\":%ld", st->ordinal);
    st->info = info;
    st->lineno = info->first;
    Py_IncRef(frame);
    st->frame = frame;
    pm_put(&T.frames, (uintptr_t)frame, st);
    return st;
}

/* The JSON key of a local name ("name":), or empty when the name is not reported: a
 * comprehension's .0, dunders such as a __class__ cell. */
static PyObject *keyj_of(PyObject *k) {
    PyObject *j = PyDict_GetItemWithError(T.keyj, k);
    if (j) return j;
    if (PyErr_Occurred()) fail("local names");
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(k, &n);
    int skip;
    if (!s) {
        PyErr_Clear();
        skip = 1;
    } else {
        skip = (n >= 1 && s[0] == '.') || (n >= 2 && s[0] == '_' && s[1] == '_' && s[n - 2] == '_' && s[n - 1] == '_');
    }
    if (skip) {
        j = T.empty_bytes;
        Py_IncRef(j);
    } else {
        sbuf b = {0};
        json_str(&b, k);
        sb_putc(&b, ':');
        j = PyBytes_FromStringAndSize(b.p, (Py_ssize_t)b.len);
        free(b.p);
        if (!j) fail("local names");
    }
    if (PyDict_SetItem(T.keyj, k, j) < 0) fail("local names");
    Py_DecRef(j);
    return j;
}

/* Whether two local names are the same name, without running user code (a class body's namespace
 * may hold str subclasses as keys). */
static int same_name(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (!IS_TYPE(a, PyUnicode_Type) || !IS_TYPE(b, PyUnicode_Type)) return 0;
    int eq = PyUnicode_Compare(a, b) == 0;
    PyErr_Clear();
    return eq;
}

static size_t bytes_len(PyObject *b) {
    char *p;
    Py_ssize_t n;
    return PyBytes_AsStringAndSize(b, &p, &n) == 0 ? (size_t)n : 0;
}

/* Whether key k of a frame of code info is a reported local: an exact str, not a hidden name, and
 * for a function one of its variables. */
static int is_local(CodeInfo *info, PyObject *k) {
    if (!IS_TYPE(k, PyUnicode_Type) || !bytes_len(keyj_of(k))) return 0;
    if (!info->localnames) return 1;
    int in = PySet_Contains(info->localnames, k);
    PyErr_Clear();
    return in > 0;
}

/* The frame's local names changed: recompute the reported ones (slots), keeping the state of the
 * names still there. Appends ,"names":[...] to the line when the reported names changed. */
static void rename_locals(FrameState *st, PyObject **ks, Py_ssize_t n) {
    Py_ssize_t *kidx = malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (!kidx) out_of_memory();
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (is_local(st->info, ks[i])) kidx[m++] = i;
    }
    if (m > MAX_NAMES) {
        free(kidx);
        limit_reached();
    }
    int same = m == st->nslots;
    for (Py_ssize_t i = 0; same && i < m; i++) same = same_name(ks[kidx[i]], st->slots[i].name);
    /* the keys, kept for the next event's comparison */
    for (Py_ssize_t i = 0; i < st->nkeys; i++) xdecref(st->keys[i]);
    free(st->keys);
    st->keys = malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    if (!st->keys) out_of_memory();
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_IncRef(ks[i]);
        st->keys[i] = ks[i];
    }
    st->nkeys = n;
    free(st->kidx);
    st->kidx = kidx;
    if (same && st->named) return;
    st->named = 1;
    Slot *slots = calloc((size_t)(m ? m : 1), sizeof(Slot));
    if (!slots) out_of_memory();
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *name = ks[kidx[i]];
        Py_ssize_t j;
        for (j = 0; j < st->nslots; j++) {
            PyObject *o = st->slots[j].name;
            if (o && same_name(o, name)) break;
        }
        if (j < st->nslots) {
            slots[i] = st->slots[j];
            memset(&st->slots[j], 0, sizeof(Slot));
        } else {
            Py_IncRef(name);
            slots[i].name = name;
            slots[i].keyj = keyj_of(name);
            Py_IncRef(slots[i].keyj);
        }
    }
    for (Py_ssize_t j = 0; j < st->nslots; j++) free_slot(&st->slots[j]); /* gone: re-emitted if back */
    free(st->slots);
    st->slots = slots;
    st->nslots = m;
    sb_lit(&T.out, ",\"names\":[");
    for (Py_ssize_t i = 0; i < m; i++) {
        if (i) sb_putc(&T.out, ',');
        json_str(&T.out, slots[i].name);
    }
    sb_putc(&T.out, ']');
}

/* The frame's locals, as (name, value) references in T.sk/T.sv; returns their count. */
static void release_locals(Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DecRef(T.sk[i]);
        Py_DecRef(T.sv[i]);
    }
}

static void locals_room(Py_ssize_t n) {
    if (n <= T.scap) return;
    free(T.sk);
    free(T.sv);
    T.scap = n * 2;
    T.sk = malloc(sizeof(PyObject *) * (size_t)T.scap);
    T.sv = malloc(sizeof(PyObject *) * (size_t)T.scap);
    if (!T.sk || !T.sv) out_of_memory();
}

/* 3.13+: the locals of a function's frame from its FrameLocalsProxy's items(), a list of
 * (name, value) in the frame's variable order, then names written into the mapping; a name met
 * again is skipped. The same names, order and values as proxy.copy() (a dict built from keys()
 * and [key]), at half the cost and without hashing a key: a key planted in the mapping is never
 * hashed or compared by its own methods (only exact strs are names, same_name). -1: not a
 * list of pairs. */
static Py_ssize_t proxy_locals(PyObject *proxy) {
    PyObject *items = PyObject_CallMethodObjArgs(proxy, T.s_items, NULL);
    if (!items) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) fail("reading locals");
        PyErr_Clear();
        return 0;
    }
    if (!IS_TYPE(items, PyList_Type)) {
        Py_DecRef(items);
        return -1;
    }
    Py_ssize_t n = PyList_Size(items), m = 0;
    locals_room(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kv = PyList_GetItem(items, i);
        if (!kv || !IS_TYPE(kv, PyTuple_Type) || PyTuple_Size(kv) != 2) {
            PyErr_Clear();
            release_locals(m);
            Py_DecRef(items);
            return -1;
        }
        PyObject *k = PyTuple_GetItem(kv, 0), *v = PyTuple_GetItem(kv, 1);
        int seen = 0;
        for (Py_ssize_t j = 0; j < m && !seen; j++) seen = same_name(T.sk[j], k);
        if (seen) continue;
        Py_IncRef(k);
        Py_IncRef(v);
        T.sk[m] = k;
        T.sv[m] = v;
        m++;
    }
    Py_DecRef(items);
    return m;
}

static Py_ssize_t gather_locals(PyObject *frame) {
    PyObject *loc = PyFrame_GetLocals(frame);
    if (loc && cfg.proxy_type && TYPE(loc) == (void *)cfg.proxy_type) {
        Py_ssize_t n = proxy_locals(loc);
        Py_DecRef(loc);
        if (n < 0) fail("reading locals");
        return n;
    }
    if (!loc) {
        /* A class body's own mapping (__prepare__) may refuse what CPython writes into it. */
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) fail("reading locals");
        PyErr_Clear();
        loc = PyDict_New();
        if (!loc) fail("reading locals");
    }
    PyObject *d = loc;
    if (!IS_TYPE(loc, PyDict_Type)) {
        /* A class body may use any mapping from __prepare__, whose iteration would run user
         * code: that is no locals. (3.13+'s FrameLocalsProxy is read above.) */
        d = PyDict_New();
        Py_DecRef(loc);
        if (!d && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();
            d = PyDict_New();
        }
        if (!d || !IS_TYPE(d, PyDict_Type)) fail("reading locals");
    }
    Py_ssize_t n = PyDict_Size(d);
    locals_room(n);
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (i < n && PyDict_Next(d, &pos, &k, &v)) {
        Py_IncRef(k);
        Py_IncRef(v);
        T.sk[i] = k;
        T.sv[i] = v;
        i++;
    }
    Py_DecRef(d);
    return i;
}


/* Whether the flat container v still holds exactly the elements of the slot's snapshot. */
/* A list's size and item array, read in place where list_layout_ok() found CPython's
 * PyListObject layout (PyVarObject's size, then the item pointer); NULL otherwise. */
static int list_direct;
static PyObject **list_items(PyObject *v, Py_ssize_t *n) {
    if (!list_direct) return NULL;
    *n = ((Py_ssize_t *)v)[2];
    return ((PyObject ***)v)[3];
}

/* Whether lists are laid out as list_items() reads them: checked on lists built here. */
static int list_layout_ok(void) {
    PyObject *objs[3] = {Py_None, T.empty_str, T.empty_bytes};
    for (int len = 0; len <= 3; len++) {
        PyObject *l = PyList_New(0);
        if (!l) return 0;
        for (int i = 0; i < len; i++) PyList_Append(l, objs[i]);
        int ok = PyList_Size(l) == len && ((Py_ssize_t *)l)[2] == len;
        for (int i = 0; ok && i < len; i++) ok = ((PyObject ***)l)[3][i] == objs[i];
        Py_DecRef(l);
        if (!ok) return 0;
    }
    return 1;
}

static int snap_same(Slot *s, PyObject *v, void *tp) {
    if (s->snap != v) return 0;
    /* The very tuple (kept alive here): its items cannot have changed. */
    if (tp == PyTuple_Type) return 1;
    Py_ssize_t ln;
    PyObject **items = tp == PyList_Type ? list_items(v, &ln) : NULL;
    if (items || (list_direct && tp == PyList_Type))
        return ln == s->snap_len && (ln == 0 || memcmp(items, s->snap_vals, sizeof(PyObject *) * (size_t)ln) == 0);
    if (PyObject_Size(v) != s->snap_len) {
        PyErr_Clear();
        return 0;
    }
    if (tp == PyDict_Type) {
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            if (i >= s->snap_len || s->snap_vals[i] != x || s->snap_keys[i] != k) return 0;
            i++;
        }
        return i == s->snap_len;
    }
    for (Py_ssize_t i = 0; i < s->snap_len; i++) {
        PyObject *x = tp == PyList_Type ? PyList_GetItem(v, i) : PyTuple_GetItem(v, i);
        if (x != s->snap_vals[i]) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

static void snap_take(Slot *s, PyObject *v, void *tp) {
    if (s->snap) {
        for (Py_ssize_t i = 0; i < s->snap_len; i++) {
            xdecref(s->snap_vals[i]);
            if (s->snap_keys) xdecref(s->snap_keys[i]);
        }
        free(s->snap_vals);
        free(s->snap_keys);
        Py_DecRef(s->snap);
        s->snap = NULL;
        s->snap_vals = s->snap_keys = NULL;
    }
    if (tp != PyList_Type && tp != PyTuple_Type && tp != PyDict_Type) return;
    Py_ssize_t n = PyObject_Size(v);
    if (n < 0) {
        PyErr_Clear();
        return;
    }
    PyObject **vals = malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    PyObject **keys = tp == PyDict_Type ? malloc(sizeof(PyObject *) * (size_t)(n ? n : 1)) : NULL;
    if (!vals || (tp == PyDict_Type && !keys)) out_of_memory();
    Py_ssize_t i = 0;
    int flat = 1;
    if (tp == PyDict_Type) {
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (i < n && PyDict_Next(v, &pos, &k, &x)) {
            if (!is_immutable(TYPE(k)) || !is_immutable(TYPE(x))) {
                flat = 0;
                break;
            }
            keys[i] = k;
            vals[i] = x;
            i++;
        }
    } else {
        for (; i < n; i++) {
            PyObject *x = tp == PyList_Type ? PyList_GetItem(v, i) : PyTuple_GetItem(v, i);
            if (!x || !is_immutable(TYPE(x))) {
                flat = 0;
                break;
            }
            vals[i] = x;
        }
    }
    PyErr_Clear();
    if (!flat || i != n) {
        free(vals);
        free(keys);
        return;
    }
    for (i = 0; i < n; i++) {
        Py_IncRef(vals[i]);
        if (keys) Py_IncRef(keys[i]);
    }
    Py_IncRef(v);
    s->snap = v;
    s->snap_len = n;
    s->snap_vals = vals;
    s->snap_keys = keys;
}

/* Append "name":J for a changed value; J is compared with the slot's last JSON in place. */
static int diff_value(Slot *s, PyObject *v, int *nchanged) {
    if (v == s->obj) return 0; /* the same immutable object as last time: unchanged */
    void *tp = TYPE(v);
    size_t mark = T.out.len;
    if (*nchanged) sb_putc(&T.out, ',');
    char *kp;
    Py_ssize_t kn;
    PyBytes_AsStringAndSize(s->keyj, &kp, &kn);
    sb_put(&T.out, kp, (size_t)kn);
    size_t jstart = T.out.len;
    int of = 0, small = 0;
    long long x = 0;
    if (tp == PyLong_Type) {
        x = PyLong_AsLongLongAndOverflow(v, &of);
        small = !of && -cfg.big < x && x < cfg.big;
        PyErr_Clear();
    }
    if (small) {
        char num[32], *e = num + sizeof num - 1;
        *e = '"';
        char *b = dec(e, x);
        *--b = '"';
        sb_put(&T.out, b, (size_t)(e + 1 - b));
    } else if (tp == PyUnicode_Type && PyUnicode_GetLength(v) <= cfg.vc) {
        PyErr_Clear();
        PyObject *r = cut(srepr(v));
        if (!r) fail("rendering a value");
        json_str(&T.out, r);
        Py_DecRef(r);
    } else {
        PyErr_Clear();
        if (s->snap && snap_same(s, v, tp)) {
            T.out.len = mark;
            return 0;
        }
        PyObject *r = render_top(v);
        json_str(&T.out, r);
        Py_DecRef(r);
        snap_take(s, v, tp);
    }
    xdecref(s->obj);
    s->obj = NULL;
    if (is_immutable(tp)) {
        Py_IncRef(v);
        s->obj = v;
    }
    size_t jlen = T.out.len - jstart;
    if (s->has_val && s->vlen == jlen && memcmp(s->val, T.out.p + jstart, jlen) == 0) {
        T.out.len = mark;
        return 0;
    }
    if (jlen > s->vcap || !s->val) {
        size_t cap = jlen < 32 ? 32 : jlen;
        char *nv = realloc(s->val, cap);
        if (!nv) out_of_memory();
        s->val = nv;
        s->vcap = cap;
    }
    memcpy(s->val, T.out.p + jstart, jlen);
    s->vlen = jlen;
    s->has_val = 1;
    (*nchanged)++;
    return 1;
}

static PyObject *co_code_of(CodeInfo *info) {
    if (!info->co_code) {
        info->co_code = PyCode_GetCode(info->code);
        if (!info->co_code) PyErr_Clear();
    }
    return info->co_code;
}

/* The opcode at the frame's last instruction, -1 when unknown. */
static int last_opcode(CodeInfo *info, PyObject *frame) {
    PyObject *cc = co_code_of(info);
    int lasti = PyFrame_GetLasti(frame);
    char *p;
    Py_ssize_t n;
    if (!cc || lasti < 0 || PyBytes_AsStringAndSize(cc, &p, &n) < 0 || lasti >= n) {
        PyErr_Clear();
        return -1;
    }
    return (unsigned char)p[lasti];
}

/* A return right after an exception event: is the frame left by that exception? */
static int unwinding(CodeInfo *info, PyObject *frame, PyObject *arg) {
    if (arg != Py_None) return 0;
    int op = last_opcode(info, frame);
    return op < 0 || !cfg.normal_exit[op];
}

static const char *event_names[] = {"call", "exception", "line", "return"};
static const char *event_heads[] = {"{\"event\":\"call\",", "{\"event\":\"exception\",", "{\"event\":\"line\",",
                                    "{\"event\":\"return\","};
static const size_t event_heads_len[] = {16, 21, 16, 18};

/* The naive baseline (benchmarks only): plain repr and json.dumps of the whole event. */
static PyObject *plain(PyObject *v) {
    PyObject *r = PyObject_Repr(v);
    if (!r) {
        PyObject *t, *ev, *tb;
        PyErr_Fetch(&t, &ev, &tb);
        r = repr_failed(TYPE(v), t);
        xdecref(t);
        xdecref(ev);
        xdecref(tb);
    }
    return cut(r);
}

/* d[k] = v, stealing v. */
static void dput(PyObject *d, const char *k, PyObject *v) {
    PyObject *ks = PyUnicode_FromString(k);
    if (!ks || !v || PyDict_SetItem(d, ks, v) < 0) fail("naive event");
    Py_DecRef(ks);
    Py_DecRef(v);
}

static void naive_event(FrameState *st, PyObject *frame, int what, PyObject *arg, int lineno, Py_ssize_t n) {
    py_enter();
    PyObject *ev = PyDict_New(), *code = PyFrame_GetCode(frame);
    if (!ev || !code) fail("naive event");
    dput(ev, "event", PyUnicode_FromString(event_names[what]));
    dput(ev, "frame", PyLong_FromLong(st->ordinal));
    PyObject *fn = PyObject_GetAttrString(code, "co_qualname");
    dput(ev, "func", fn ? fn : PyObject_GetAttrString(code, "co_name"));
    dput(ev, "file", PyObject_GetAttrString(code, "co_filename"));
    Py_DecRef(code);
    dput(ev, "lineno", PyLong_FromLong(lineno));
    dput(ev, "depth", PyLong_FromLong(st->depth));
    PyObject *src = getsrc(st->info->lines, lineno);
    Py_IncRef(src);
    dput(ev, "src", src);
    PyObject *names = PyList_New(0), *locals = PyDict_New();
    if (!names || !locals) fail("naive event");
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!is_local(st->info, T.sk[i])) continue;
        if (++kept > MAX_NAMES) limit_reached();
        PyObject *r = plain(T.sv[i]);
        if (!r || PyList_Append(names, T.sk[i]) < 0 || PyDict_SetItem(locals, T.sk[i], r) < 0) fail("naive event");
        Py_DecRef(r);
    }
    dput(ev, "names", names);
    dput(ev, "locals", locals);
    if (what == PyTrace_RETURN) {
        dput(ev, "value", plain(arg));
        if (st->exc && unwinding(st->info, frame, arg)) dput(ev, "unwind", PyBool_FromLong(1));
    } else if (what == PyTrace_EXCEPTION) {
        dput(ev, "value", plain(PyTuple_GetItem(arg, 1)));
        dput(ev, "exc_type", qualname(PyTuple_GetItem(arg, 0)));
    }
    PyObject *s = PyObject_CallOneArg(cfg.dumps, ev);
    Py_DecRef(ev);
    Py_ssize_t sl;
    const char *sp = s ? PyUnicode_AsUTF8AndSize(s, &sl) : NULL;
    if (!sp) fail("naive event");
    sb_put(&T.out, sp, (size_t)sl);
    sb_putc(&T.out, '\n');
    Py_DecRef(s);
    py_leave();
}

/* One event of a traced frame (recording): the line, then the locals diffed against the
 * frame's previous event. */
static void trace_event(FrameState *st, PyObject *frame, int what, PyObject *arg) {
    CodeInfo *info = st->info;
    int lineno = PyFrame_GetLineNumber(frame);
    if (lineno < 0) lineno = st->lineno; /* 3.12+: artificial instructions have no line */
    else if (what == PyTrace_CALL && lineno == info->first) lineno = info->def_line;
    st->lineno = lineno;
    Py_ssize_t n = gather_locals(frame);
    T.out.len = T.commit;
    if (cfg.naive) {
        naive_event(st, frame, what, arg, lineno, n);
    } else {
        LinePair *lp = line_pair(info, lineno);
        sb_put(&T.out, event_heads[what], event_heads_len[what]);
        sb_put(&T.out, st->head, st->headlen);
        sb_put(&T.out, info->head, info->headlen);
        sb_put(&T.out, lp->a, lp->alen);
        sb_put(&T.out, st->dstr, st->dlen);
        sb_put(&T.out, lp->b, lp->blen);
        int same = n == st->nkeys && st->keys;
        for (Py_ssize_t i = 0; same && i < n; i++) same = same_name(T.sk[i], st->keys[i]);
        if (!same) rename_locals(st, T.sk, n);
        sb_lit(&T.out, ",\"locals\":{");
        int nchanged = 0;
        for (Py_ssize_t i = 0; i < st->nslots; i++) diff_value(&st->slots[i], T.sv[st->kidx[i]], &nchanged);
        if (what == PyTrace_RETURN) {
            sb_lit(&T.out, "},\"value\":");
            PyObject *r = render_top(arg);
            json_str(&T.out, r);
            Py_DecRef(r);
            sb_puts(&T.out, st->exc && unwinding(info, frame, arg) ? ",\"unwind\":true}\n" : "}\n");
        } else if (what == PyTrace_EXCEPTION) {
            PyObject *tp = PyTuple_GetItem(arg, 0), *val = PyTuple_GetItem(arg, 1);
            if (!tp || !val) fail("an exception event");
            sb_lit(&T.out, "},\"value\":");
            PyObject *r = render_top(val);
            json_str(&T.out, r);
            Py_DecRef(r);
            sb_lit(&T.out, ",\"exc_type\":");
            PyObject *q = qualname(tp);
            json_str(&T.out, q);
            xdecref(q);
            sb_lit(&T.out, "}\n");
        } else {
            sb_lit(&T.out, "}}\n");
        }
    }
    release_locals(n);
    st->exc = what == PyTrace_EXCEPTION;
    commit_line(1);
}

/* Whether a frame whose events are recorded is on the stack at or below frame. */
static int traced_on_stack(PyObject *frame) {
    Py_IncRef(frame);
    PyObject *f = frame;
    int hit = 0;
    while (f && !hit) {
        hit = pm_get(&T.frames, (uintptr_t)f) != NULL;
        PyObject *b = PyFrame_GetBack(f);
        Py_DecRef(f);
        f = b;
    }
    xdecref(f);
    return hit;
}

/* Test runs: events of the tracer module's _phase generator mark the test's phases. Its first
 * suspension (the `yield`) starts recording, its resumption ends it. */
static void phase_event(PyObject *frame, int what) {
    if (what == PyTrace_CALL) {
        PyObject *back = PyFrame_GetBack(frame);
        if (!T.phase_frame) {
            /* A phase starts from pluggy's hook caller (pytest) or the tracer module's unittest
             * run, with no recorded frame on the stack; the very frame that started it ends it. */
            PyObject *bc = back ? PyFrame_GetCode(back) : NULL;
            int ok = codeset_has(&T.starters, bc);
            xdecref(bc);
            if (!ok) {
                xdecref(back);
                tracer_tamper("a test phase started outside the test runner");
            }
            if (traced_on_stack(frame)) tracer_tamper("a test phase started inside traced code");
            Py_IncRef(frame);
            T.phase_frame = frame;
            T.phase_starter = back; /* the reference is kept */
            T.phase_state = 1;
        } else if (frame == T.phase_frame && T.phase_state == 2) {
            if (back != T.phase_starter) {
                xdecref(back);
                tracer_tamper("a test phase was ended by other code than the one that started it");
            }
            xdecref(back);
            if (traced_on_stack(frame)) tracer_tamper("a test phase ended inside traced code");
            T.recording = 0;
            T.phase_state = 3;
        } else {
            xdecref(back);
            tracer_tamper("a test phase started inside another");
        }
    } else if (what == PyTrace_RETURN && frame == T.phase_frame) {
        if (T.phase_state == 1) {
            T.phase_state = 2;
            T.recording = 1;
            T.phases++;
        } else {
            T.phase_state = 0;
            T.recording = 0;
            T.phase_frame = NULL;
            xdecref(T.phase_starter);
            T.phase_starter = NULL;
            Py_DecRef(frame);
        }
    }
}

/* The tracer starts handling an event: no re-entry (py_enter guards its Python calls). */
static void enter(void) { T.in_event = 1; }

static void leave(void) {
    unblock_signals();
    T.in_event = 0;
}

/* A new (or resumed) frame of traced code. */
static void call_event(FrameState *st, PyObject *frame, PyObject *code, PyObject *arg) {
    if (!st) {
        CodeInfo *info = pm_get(&T.codes, (uintptr_t)code);
        if (!info) {
            PyObject *fn = filename_of(code);
            if (!fn) fail("reading a code object");
            if (!genuine(code, fn)) {
                Py_DecRef(fn);
                tracer_tamper("code that is not the traced file's ran under its name (compiled at run time)");
            }
            info = code_info(code, fn);
            Py_DecRef(fn);
        }
        st = new_frame(info, frame);
    }
    /* depth: traced frames below this one (the nearest traced caller's depth + 1) */
    int depth = 0;
    PyObject *back = PyFrame_GetBack(frame), *f = back;
    if (f) Py_IncRef(f);
    while (f) {
        FrameState *below = pm_get(&T.frames, (uintptr_t)f);
        if (below) {
            depth = below->depth + 1;
            break;
        }
        PyObject *b = PyFrame_GetBack(f);
        Py_DecRef(f);
        f = b;
    }
    xdecref(f);
    if (depth == 0 && T.entry_code) {
        /* Function items: every frame at depth 0 is called from the item's call expression;
         * anything else means the bottom of the stack was rebound. */
        PyObject *bc = back ? PyFrame_GetCode(back) : NULL;
        /* While the tracer takes a value from the call's iterator, the frames it resumes or
         * calls (a generator's, a __next__, map's function) are called from its C code, so
         * their caller is the frame below it. */
        int ok = codeset_has(&T.entry_codes, bc) || (T.consuming && back && back == T.consume_frame);
        xdecref(bc);
        if (!ok) {
            xdecref(back);
            tracer_tamper("the traced call is not the item's call expression");
        }
    }
    xdecref(back);
    st->depth = depth;
    st->dlen = (size_t)snprintf(st->dstr, sizeof st->dstr, "%d", depth);
    set_lines(frame, 1);
    trace_event(st, frame, PyTrace_CALL, arg);
}

static PyObject **nt_slot(PyObject *code) { return &T.nt_cache[((uintptr_t)code >> 4) & (NT_CACHE - 1)]; }

/* The trace function (PyEval_SetTrace). It never fails: a failure of the tracer ends the run
 * (fail), tampering ends it as such. */
static int tracefunc(PyObject *obj, PyObject *frame, int what, PyObject *arg) {
    if (what > PyTrace_RETURN || T.ending || T.in_event) return 0;
    if (T.pend_t && (what == PyTrace_LINE || what == PyTrace_CALL)) {
        /* a signal handler's exception, raised where the code next runs */
        PyErr_Restore(T.pend_t, T.pend_v, T.pend_tb);
        T.pend_t = T.pend_v = T.pend_tb = NULL;
        return -1;
    }
    if (!arg) arg = Py_None; /* a frame left by an exception returns NULL (Python tracers see None) */
    if (T.dead) {
        stop_tracing();
        return 0;
    }
    FrameState *st = pm_get(&T.frames, (uintptr_t)frame);
    if (st) {
        if (T.recording) {
            enter();
            if (what == PyTrace_CALL) {
                PyObject *code = PyFrame_GetCode(frame);
                call_event(st, frame, code, arg);
                Py_DecRef(code);
            } else {
                trace_event(st, frame, what, arg);
            }
            leave();
        }
        if (what == PyTrace_RETURN && (!st->info->genlike || last_opcode(st->info, frame) != cfg.yield_value)) {
            pm_del(&T.frames, (uintptr_t)frame); /* the frame is done */
            free_state(st);
        }
    } else {
        if (what == PyTrace_EXCEPTION) return 0;
        PyObject *code = PyFrame_GetCode(frame);
        if (code == cfg.phase_code && cfg.phase_code) {
            phase_event(frame, what);
        } else if (what == PyTrace_LINE) {
            set_lines(frame, 0); /* no state: none of its lines is ever recorded */
        } else if (what == PyTrace_CALL) {
            PyObject **slot = nt_slot(code);
            if (!T.recording || *slot == code) {
                set_lines(frame, 0);
            } else if (pm_get(&T.codes, (uintptr_t)code)) {
                enter();
                call_event(NULL, frame, code, arg);
                leave();
            } else {
                enter();
                PyObject *fn = filename_of(code);
                int yes = fn && file_is_target(fn);
                xdecref(fn);
                if (yes) call_event(NULL, frame, code, arg);
                leave();
                if (!yes) {
                    xdecref(*slot);
                    Py_IncRef(code);
                    *slot = code;
                    set_lines(frame, 0);
                }
            }
        }
        Py_DecRef(code);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    return 0;
}

/* A trace function (PyEval_SetTrace), not PEP 669's sys.monitoring, on every version:
 * on 3.12+ a monitoring tool would receive line events without the trace function's frame
 * bookkeeping, but its state is reachable from Python code without any audit event
 * (sys.monitoring.set_events, set_local_events and free_tool_id raise none; only
 * register_callback does), so traced code could switch the tracer's events off for a code
 * object, run unseen lines, and switch them on again. The legacy trace function sits on tool
 * ids sys.monitoring refuses to touch, and sys.settrace is audited. */
static void start_tracing(void) {
    native_settrace = 1;
    PyEval_SetTrace(tracefunc, T.traceobj); /* what sys.gettrace() shows: a callable doing nothing */
    native_settrace = 0;
    T.tracing = 1;
}

/* at-fork (child): a process forked by traced code is never traced and cannot write events. */
static void at_fork_child(void) {
    if (!T.ready) return;
    T.dead = 1;
    close(EVENTS_FD);
}

/* ------------------------------------------------------------------ control functions */

/* The tracer's functions run only for the tracer module's code, on the item's main thread, in
 * the item process itself, never after tampering. */
static int refuse_untrusted(void) {
    int ok = !tampered && T.ready && !T.dead && PyThread_get_thread_ident() == cfg.main_thread &&
             getpid() == cfg.main_pid;
    /* Every frame on the stack is the tracer module's own code running with its globals: nothing
     * of the traced code's (a __repr__ the tracer renders, a function of the tracer module called
     * by traced code, one of its code objects given other globals) is between the caller and the
     * item's bottom frame. */
    PyObject *f = PyEval_GetFrame(), *globals = NULL;
    if (f) Py_IncRef(f);
    if (!f) ok = 0;
    while (f && ok) {
        PyObject *code = PyFrame_GetCode(f), *g = PyFrame_GetGlobals(f);
        ok = codeset_has(&trusted_codes, code) && g && (!globals || g == globals);
        if (!globals && g) {
            globals = g;
            Py_IncRef(globals);
        }
        xdecref(code);
        xdecref(g);
        PyObject *b = PyFrame_GetBack(f);
        Py_DecRef(f);
        f = b;
    }
    xdecref(f);
    xdecref(globals);
    if (!ok) {
        if (T.ready && !T.dead) tracer_tamper("traced code called the tracer");
        PyErr_SetString(PyExc_PermissionError, "ndtrace: the tracer is not available");
        return 1;
    }
    return 0;
}

static PyObject *dict_get(PyObject *d, const char *k) {
    PyObject *ks = PyUnicode_FromString(k);
    PyObject *v = ks ? PyDict_GetItemWithError(d, ks) : NULL;
    xdecref(ks);
    if (!v && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "ndtrace: tracer_setup: %s missing", k);
    if (v) Py_IncRef(v);
    return v;
}

static long dict_long(PyObject *d, const char *k) {
    PyObject *v = dict_get(d, k);
    long r = v ? PyLong_AsLong(v) : -1;
    xdecref(v);
    return r;
}

static int c_strings(PyObject *seq, char ***out, size_t **lens, Py_ssize_t *n) {
    *n = PySequence_Size(seq);
    if (*n < 0) return -1;
    *out = calloc((size_t)(*n ? *n : 1), sizeof(char *));
    *lens = calloc((size_t)(*n ? *n : 1), sizeof(size_t));
    if (!*out || !*lens) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *s = PySequence_GetItem(seq, i);
        Py_ssize_t l;
        const char *u = s ? PyUnicode_AsUTF8AndSize(s, &l) : NULL;
        if (!u) {
            xdecref(s);
            return -1;
        }
        (*out)[i] = malloc((size_t)l + 1);
        if (!(*out)[i]) {
            Py_DecRef(s);
            PyErr_NoMemory();
            return -1;
        }
        memcpy((*out)[i], u, (size_t)l + 1);
        (*lens)[i] = (size_t)l;
        Py_DecRef(s);
    }
    return 0;
}

/* tracer_setup(cfg, key, helpers): configure the tracer for this item (before seal()). */
static PyObject *nd_tracer_setup(PyObject *self, PyObject *args) {
    PyObject *c, *key, *h;
    if (!PyArg_ParseTuple(args, "O!SO!", PyDict_Type, &c, &key, PyDict_Type, &h) || refuse_sealed()) return NULL;
    if (T.ready) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: the tracer is already set up");
        return NULL;
    }
    char *kp;
    Py_ssize_t kn;
    if (PyBytes_AsStringAndSize(key, &kp, &kn) < 0 || kn < 16) {
        PyErr_SetString(PyExc_ValueError, "ndtrace: key too short");
        return NULL;
    }
    cfg.key = PyBytes_FromStringAndSize(kp, kn);
    cfg.vc = dict_long(c, "value_chars");
    if (cfg.vc < 1) cfg.vc = 1;
    cfg.max_events = dict_long(c, "max_events");
    cfg.max_bytes = dict_long(c, "max_trace_bytes");
    long repr_ms = dict_long(c, "repr_ms");
    cfg.repr_s = (repr_ms > 0 ? repr_ms : 1) / 1000.0;
    cfg.big = cfg.vc >= 20 ? 1000000000000000000LL : 0;
    cfg.naive = (int)dict_long(c, "naive");
    cfg.want_functions = (int)dict_long(c, "want_functions");
    cfg.yield_value = (int)dict_long(c, "yield_value");
    if (PyErr_Occurred()) return NULL;
    PyObject *exits = dict_get(c, "normal_exits");
    if (!exits) return NULL;
    for (Py_ssize_t i = 0, n = PySequence_Size(exits); i < n; i++) {
        PyObject *o = PySequence_GetItem(exits, i);
        long op = o ? PyLong_AsLong(o) : -1;
        xdecref(o);
        if (op >= 0 && op < 256) cfg.normal_exit[op] = 1;
    }
    Py_DecRef(exits);
    if (!(cfg.filename = dict_get(c, "filename")) || !(cfg.own_lines = dict_get(c, "own_lines")) ||
        !(cfg.exact_targets = dict_get(c, "exact_targets")) || !(cfg.prefix_targets = dict_get(c, "prefix_targets")) ||
        !(cfg.exclude = dict_get(c, "exclude")))
        return NULL;
    if (!IS_TYPE(cfg.own_lines, PyList_Type) || !(IS_TYPE(cfg.exact_targets, PySet_Type) || IS_TYPE(cfg.exact_targets, PyFrozenSet_Type))) {
        PyErr_SetString(PyExc_TypeError, "ndtrace: tracer_setup: own_lines must be a list, exact_targets a set");
        return NULL;
    }
    if (c_strings(cfg.prefix_targets, &cfg.prefix_c, &cfg.prefix_n, &cfg.nprefix) < 0 ||
        c_strings(cfg.exclude, &cfg.exclude_c, &cfg.exclude_n, &cfg.nexclude) < 0)
        return NULL;
    if (!(cfg.hmac = dict_get(h, "hmac")) || !(cfg.enc = dict_get(h, "enc")) || !(cfg.read_lines = dict_get(h, "read_lines")) ||
        !(cfg.function_block = dict_get(h, "function_block")) || !(cfg.file_codes = dict_get(h, "file_codes")) ||
        !(cfg.same_code = dict_get(h, "same_code")) ||
        !(cfg.addr_sub = dict_get(h, "addr_sub")) ||
        !(cfg.dumps = dict_get(h, "dumps")) || !(cfg.sig_signal = dict_get(h, "signal")) ||
        !(cfg.sig_getsignal = dict_get(h, "getsignal")) || !(cfg.sig_dfl = dict_get(h, "sig_dfl")) ||
        !(cfg.std_flush = dict_get(h, "std_flush")) || !(cfg.phase_code = dict_get(h, "phase")) ||
        !(cfg.proxy_type = dict_get(h, "proxy_type")))
        return NULL;
    if (cfg.phase_code == Py_None) {
        Py_DecRef(cfg.phase_code);
        cfg.phase_code = NULL;
    }
    if (cfg.proxy_type == Py_None) {
        Py_DecRef(cfg.proxy_type);
        cfg.proxy_type = NULL;
    }
    if (!IS_TYPE(cfg.std_flush, PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "ndtrace: tracer_setup: std_flush must be a tuple");
        return NULL;
    }
    if (!frame_trace_lines_offset) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: harden_frames() must run first");
        return NULL;
    }
    object_repr = (reprfunc)PyType_GetSlot(PyBaseObject_Type, Py_tp_repr);
    PyErr_Clear();
    if (!(T.addresses = PyDict_New()) || !(T.slow = PyDict_New()) || !(T.keyj = PyDict_New()) ||
        !(T.file_is_target = PyDict_New()) || !(T.file_lines = PyDict_New()) || !(T.file_codes = PyDict_New()) ||
        !(T.s_0x = PyUnicode_FromString("0x")) || !(T.s_items = PyUnicode_InternFromString("items")) || !(T.empty_str = PyUnicode_FromString("")) ||
        !(T.empty_bytes = PyBytes_FromStringAndSize("", 0)))
        return NULL;
    list_direct = list_layout_ok();
    PyErr_Clear();
    T.ballast = malloc(256 << 10);
    T.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    T.flush_at = CHUNK;
    if (T.out.p) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: the tracer wrote before it was set up");
        return NULL;
    }
    T.out.pre = 32; /* before any byte is written to T.out */
    /* A pipe of a few chunks: the tracer runs on while the reader catches up (fewer context
     * switches). Best effort: the pipe's owner may be over its quota of pipe buffers. */
    fcntl(EVENTS_FD, F_SETPIPE_SZ, PIPE_BYTES);
    cfg.main_thread = PyThread_get_thread_ident();
    cfg.main_pid = getpid();
    T.timer_sig = SIGRTMAX - 1;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = T.timer_sig;
    if (timer_create(CLOCK_MONOTONIC, &sev, &T.timer) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, T.timer_sig);
    pthread_sigmask(SIG_BLOCK, &only, NULL); /* unblocked only while a repr is guarded */
    if (pthread_atfork(NULL, NULL, at_fork_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: pthread_atfork failed");
        return NULL;
    }
    T.ready = 1;
    return none();
}

/* The end record of a run whose code raised e (the traced call, a module body, a test runner).
 * Never returns. */
static void end_exception(PyObject *e) __attribute__((noreturn));
static void end_exception(PyObject *e) {
    block_signals();
    if (PyErr_GivenExceptionMatches(e, PyExc_MemoryError)) {
        free(T.ballast);
        T.ballast = NULL;
        end_c("memory", "MemoryError", NULL);
        finish(0);
    }
    PyObject *rv = render_top(e), *q = qualname(TYPE(e)), *m = exc_message(e);
    if (!m) fail("an exception's message");
    end_record("exception", rv, q, m);
    finish(0);
}

/* The exception being raised, normalised. */
static PyObject *fetch(void) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (!v) fail("an exception without a value");
    xdecref(t);
    xdecref(tb);
    return v;
}

/* How many values the tracer takes from an iterator a function item's call returned. */
#define CONSUME_VALUES 8

/* A function item's call returned r. A generator, or another iterator (its type has __next__ and
 * __iter__; neither __iter__ nor anything else of it but __next__ is called), is consumed, still
 * traced, as list(islice(r, CONSUME_VALUES)) would: up to CONSUME_VALUES values, never asking for
 * one more, so that the lazy body runs and is traced (docs/tracer-protocol.md, "consume"). A
 * consume record, written first, says at which event the consumption starts. Returns the list of
 * the values taken, r itself when it is no iterator, or NULL with the exception the iterator
 * raised (StopIteration ends the consumption, as in a for loop). A coroutine or an asynchronous
 * generator ends the run as invalid: they need an event loop to run, and the tracer drives none.
 * r and the iterator are never released (the process exits): releasing a generator would close
 * it and run its finally blocks. */
static PyObject *consume(PyObject *r) {
    void *tp = TYPE(r);
    if (tp == (void *)PyCoro_Type || tp == (void *)PyAsyncGen_Type) {
        end_c("invalid", "NotDriven",
              tp == (void *)PyCoro_Type
                  ? "the call returned a coroutine: coroutines are not driven (no event loop), so none of its body ran"
                  : "the call returned an asynchronous generator: those are not driven (no event loop), so none of its body ran");
        finish(0);
    }
    /* PyIter_Check reads the type's __next__ slot (and runs no code of the object's) */
    void *iter = PyType_GetSlot(tp, Py_tp_iter);
    PyErr_Clear(); /* PyType_GetSlot of a static type raises nothing, but be sure */
    if (!PyIter_Check(r) || !iter) return r;
    char rec[96];
    T.out.len = T.commit;
    snprintf(rec, sizeof rec, "{\"event\":\"consume\",\"start\":%lld,\"limit\":%d}\n", T.n_events, CONSUME_VALUES);
    sb_puts(&T.out, rec);
    commit_line(0);
    PyObject *vals = PyList_New(0);
    if (!vals) fail("the consumed values");
    T.consume_frame = PyEval_GetFrame();
    T.consume_on = 1;
    while (T.consumed < CONSUME_VALUES) {
        T.consuming = 1;
        PyObject *v = PyIter_Next(r); /* the type's __next__: never a name the code could rebind */
        T.consuming = 0;
        if (!v) {
            if (PyErr_Occurred()) return NULL;
            break; /* exhausted */
        }
        int bad = PyList_Append(vals, v);
        Py_DecRef(v);
        if (bad < 0) return NULL;
        T.consumed++;
    }
    return vals;
}

/* tracer_call(module_code, call_code, namespace, blocks, own_codes, entry_codes): a function item,
 * start to end: the blocks record, the module body (untraced), the traced call, the end record.
 * own_codes are the module code and every code object nested in it (the only ones of the item's
 * file that may be traced), entry_codes the call expression's (depth-0 frames are called from
 * them). Never returns. */
static PyObject *nd_tracer_call(PyObject *self, PyObject *args) {
    PyObject *mod, *call, *ns, *blocks, *own, *entry;
    if (!PyArg_ParseTuple(args, "O!O!O!UO!O!", PyCode_Type, &mod, PyCode_Type, &call, PyDict_Type, &ns, &blocks,
                          PyList_Type, &own, PyList_Type, &entry) ||
        refuse_untrusted())
        return NULL;
    if (T.call_used || T.start_used || T.end_used) tracer_tamper("the tracer's entry point ran twice");
    T.call_used = T.end_used = 1;
    if (codeset_fill(&T.own_codes, own) < 0 || !T.own_codes.n || codeset_fill(&T.entry_codes, entry) < 0 ||
        !T.entry_codes.n)
        fail("the item's code objects");
    Py_ssize_t bn;
    const char *bs = PyUnicode_AsUTF8AndSize(blocks, &bn);
    if (!bs || bn < 2 || strncmp(bs, "{\"event\":\"blocks\",", 18) != 0 || memchr(bs, '\n', (size_t)bn - 1) ||
        bs[bn - 1] != '\n')
        fail("the blocks record");
    T.out.len = T.commit;
    sb_put(&T.out, bs, (size_t)bn);
    commit_line(0);
    flush(); /* sealed before any of the item's code runs: from here on, exits are the code's */
    PyObject *r = PyEval_EvalCode(mod, ns, ns); /* the module body runs untraced */
    if (!r) end_exception(fetch());
    Py_DecRef(r);
    Py_IncRef(call);
    T.entry_code = call;
    T.recording = 1;
    start_tracing();
    r = PyEval_EvalCode(call, ns, ns);
    if (r) r = consume(r);
    stop_tracing();
    block_signals(); /* the code's handlers do not run inside the final rendering either */
    if (!r) end_exception(fetch());
    PyObject *rv = render_top(r);
    end_record("ok", rv, NULL, NULL);
    finish(0);
}

/* tracer_start(traced): a test run's code is about to run (sealed marker); traced runs trace from
 * here, recording only inside the test's phases (tracer_phases). */
static PyObject *nd_tracer_start(PyObject *self, PyObject *args) {
    int traced;
    if (!PyArg_ParseTuple(args, "p", &traced) || refuse_untrusted()) return NULL;
    if (T.call_used || T.start_used || T.end_used) tracer_tamper("the tracer's entry point ran twice");
    T.start_used = 1;
    flush();
    if (traced) {
        if (!cfg.phase_code) fail("no phase marker");
        start_tracing();
    }
    return none();
}

/* tracer_phases(starters): the code objects that may start a test phase, once the runner is
 * imported (pluggy's hook callers, wherever pluggy came from; the tracer module's unittest run). */
static PyObject *nd_tracer_phases(PyObject *self, PyObject *starters) {
    if (refuse_untrusted()) return NULL;
    if (T.starters.v || !T.start_used || !IS_TYPE(starters, PyList_Type)) tracer_tamper("the test phases were declared twice");
    if (codeset_fill(&T.starters, starters) < 0) fail("the test runner's code objects");
    return none();
}

static int valid_record(const char *s, Py_ssize_t n) {
    if (n < 2 || s[n - 1] != '\n' || memchr(s, '\n', (size_t)n - 1)) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 0;
    return strncmp(s, "{\"event\":\"test\",", 16) == 0 || strncmp(s, "{\"event\":\"collection\",", 22) == 0;
}

/* tracer_end(status, exc_type=None, exc_message=None, record=None): the last record (a test
 * run's test or collection record) and the end record. Never returns. */
static PyObject *nd_tracer_end(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"status", "exc_type", "exc_message", "record", NULL};
    const char *status;
    PyObject *et = Py_None, *em = Py_None, *rec = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|OOO", kwlist, &status, &et, &em, &rec) || refuse_untrusted())
        return NULL;
    if (T.end_used) tracer_tamper("the tracer's end ran twice");
    T.end_used = 1;
    PyObject *cur = PyEval_GetFrame();
    if (cur && traced_on_stack(cur)) tracer_tamper("the run was ended from inside traced code");
    stop_tracing();
    if (strcmp(status, "ok") && strcmp(status, "exception") && strcmp(status, "invalid") && strcmp(status, "memory"))
        fail("an unknown end status");
    if (rec != Py_None) {
        Py_ssize_t rn;
        const char *rs = IS_TYPE(rec, PyUnicode_Type) ? PyUnicode_AsUTF8AndSize(rec, &rn) : NULL;
        if (!rs || !valid_record(rs, rn)) tracer_tamper("the run's record was malformed (tracer.py's state was changed)");
        T.out.len = T.commit;
        sb_put(&T.out, rs, (size_t)rn);
        commit_line(0);
    }
    PyObject *t = et != Py_None && IS_TYPE(et, PyUnicode_Type) ? et : NULL;
    PyObject *m = em != Py_None && IS_TYPE(em, PyUnicode_Type) ? em : NULL;
    if (m) {
        Py_IncRef(m);
        m = cut(m);
    }
    end_record(status, NULL, t, m);
    finish(0);
}

/* tracer_end_exception(exc): the end record of a run whose code raised exc. Never returns. */
static PyObject *nd_tracer_end_exception(PyObject *self, PyObject *exc) {
    if (refuse_untrusted()) return NULL;
    if (T.end_used) tracer_tamper("the tracer's end ran twice");
    T.end_used = 1;
    PyObject *cur = PyEval_GetFrame();
    if (cur && traced_on_stack(cur)) tracer_tamper("the run was ended from inside traced code");
    stop_tracing();
    end_exception(exc);
}

static PyObject *nd_exc_message(PyObject *self, PyObject *v) {
    if (refuse_untrusted()) return NULL;
    int was = T.sig_blocked;
    PyObject *r = exc_message(v);
    if (!was) unblock_signals();
    return r;
}

PyMethodDef tracer_methods[] = {
    {"tracer_setup", nd_tracer_setup, METH_VARARGS, "Configure the item's tracer: (config, key, helpers)."},
    {"tracer_call", nd_tracer_call, METH_VARARGS, "Run a function item: (module_code, call_code, namespace, blocks, own_codes, entry_codes)."},
    {"tracer_start", nd_tracer_start, METH_VARARGS, "A test run starts: (traced)."},
    {"tracer_phases", nd_tracer_phases, METH_O, "The code that may start a test phase (once)."},
    {"tracer_end", (PyCFunction)(void *)nd_tracer_end, METH_VARARGS | METH_KEYWORDS, "End the run: (status, exc_type, exc_message, record)."},
    {"tracer_end_exception", nd_tracer_end_exception, METH_O, "End the run with an exception."},
    {"exc_message", nd_exc_message, METH_O, "The tracer's rendering of an exception's message."},
    {NULL, NULL, 0, NULL},
};

static PyObject *nd_noop(PyObject *self, PyObject *args) { return none(); }

static PyMethodDef alarm_def = {"on_alarm", nd_on_alarm, METH_VARARGS, "ndtrace"};
static PyMethodDef traceobj_def = {"ndtrace", nd_noop, METH_VARARGS, "ndtrace"};
static PyMethodDef address_def = {"address", nd_address, METH_O, "ndtrace"};

int tracer_module_init(PyObject *m) {
    for (PyMethodDef *d = tracer_methods; d->ml_name; d++) {
        PyObject *f = PyCFunction_NewEx(d, NULL, NULL);
        if (!f || PyObject_SetAttrString(m, d->ml_name, f) < 0) return -1;
        Py_DecRef(f);
    }
    T.alarm_fn = PyCFunction_NewEx(&alarm_def, NULL, NULL);
    T.address_fn = PyCFunction_NewEx(&address_def, NULL, NULL);
    T.traceobj = PyCFunction_NewEx(&traceobj_def, NULL, NULL);
    T.reprtimeout = PyErr_NewException("ndtrace.ReprTimeout", PyExc_BaseException, NULL);
    if (!T.alarm_fn || !T.address_fn || !T.traceobj || !T.reprtimeout) return -1;
    return 0;
}
