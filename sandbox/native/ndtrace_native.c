/*
 * ndtrace_native: the sandbox's native helper, a CPython extension module loaded by the zygote.
 *
 * Python 3.11's standard library cannot create namespaces, mount, drop capabilities, restrict
 * itself with Landlock or install a seccomp filter, and the sandbox must never import ctypes (it
 * would hand traced code raw memory access: the tracer shares the process with it). This module
 * gives the zygote and the item processes exactly those operations and nothing more: every
 * function either builds isolation or reduces privileges, so code that reached the module could
 * not use it to gain anything. The set-up functions refuse to run after seal().
 *
 * It also installs the tracer's audit hook in C (PEP 578): C hooks cannot be listed, removed or
 * inspected from Python, and they filter events at C speed. See docs/sandbox.md.
 *
 * No Python.h: the few CPython C-API symbols used are declared below (they have been stable since
 * 3.9; the tracer supports 3.11+), so building needs only a C compiler and the kernel headers.
 * Build: cc -O2 -shared -fPIC -o _ndtrace_native.so ndtrace_native.c (sandbox/native.go does it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <signal.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

/* ------------------------------------------------------------------ CPython ABI subset */

typedef ssize_t Py_ssize_t;
typedef struct _object {
    Py_ssize_t ob_refcnt; /* a union of the same size on 3.12+ */
    void *ob_type;
} PyObject;
typedef PyObject *(*PyCFunction)(PyObject *, PyObject *);
typedef struct {
    const char *ml_name;
    PyCFunction ml_meth;
    int ml_flags;
    const char *ml_doc;
} PyMethodDef;
typedef struct {
    PyObject ob_base;
    PyObject *(*m_init)(void);
    Py_ssize_t m_index;
    PyObject *m_copy;
} PyModuleDef_Base;
typedef struct {
    PyModuleDef_Base m_base;
    const char *m_name;
    const char *m_doc;
    Py_ssize_t m_size;
    PyMethodDef *m_methods;
    void *m_slots, *m_traverse, *m_clear, *m_free;
} PyModuleDef;
typedef struct {
    int slot;
    void *pfunc;
} PyType_Slot;
typedef struct {
    const char *name;
    int basicsize, itemsize;
    unsigned int flags;
    PyType_Slot *slots;
} PyType_Spec;
typedef int (*visitproc)(PyObject *, void *);

#define METH_VARARGS 0x0001
#define METH_NOARGS 0x0004
#define METH_O 0x0008
#define PYTHON_API_VERSION 1013
#define Py_tp_call 50
#define Py_tp_clear 51
#define Py_tp_dealloc 52
#define Py_tp_doc 56
#define Py_tp_repr 66
#define Py_tp_traverse 71
#define Py_TPFLAGS_DISALLOW_INSTANTIATION (1UL << 7)
#define Py_TPFLAGS_IMMUTABLETYPE (1UL << 8)
#define Py_TPFLAGS_HAVE_GC (1UL << 14)
#define Py_TPFLAGS_HAVE_VERSION_TAG (1UL << 18)

extern PyObject *PyModule_Create2(PyModuleDef *, int);
extern int PyModule_AddIntConstant(PyObject *, const char *, long);
extern int PyArg_ParseTuple(PyObject *, const char *, ...);
extern PyObject *Py_BuildValue(const char *, ...);
extern PyObject *PyBool_FromLong(long);
extern PyObject *PyLong_FromLong(long);
extern long PyLong_AsLong(PyObject *);
extern unsigned long PyLong_AsUnsignedLong(PyObject *);
extern int PyBytes_AsStringAndSize(PyObject *, char **, Py_ssize_t *);
extern const char *PyUnicode_AsUTF8AndSize(PyObject *, Py_ssize_t *);
extern PyObject *PyErr_SetFromErrno(PyObject *);
extern void PyErr_SetString(PyObject *, const char *);
extern PyObject *PyErr_Occurred(void);
extern void PyErr_Clear(void);
extern PyObject *PyObject_Call(PyObject *, PyObject *, PyObject *);
extern PyObject *PyObject_CallFunction(PyObject *, const char *, ...);
extern PyObject *PyObject_GetAttrString(PyObject *, const char *);
extern PyObject *PyOS_FSPath(PyObject *);
extern PyObject *PyTuple_GetItem(PyObject *, Py_ssize_t);
extern Py_ssize_t PyTuple_Size(PyObject *);
extern Py_ssize_t PySequence_Size(PyObject *);
extern PyObject *PySequence_GetItem(PyObject *, Py_ssize_t);
extern PyObject *PyType_FromSpec(PyType_Spec *);
extern PyObject *PyType_GenericAlloc(void *, Py_ssize_t);
extern void PyObject_GC_UnTrack(void *);
extern void PyObject_GC_Del(void *);
extern int PyCallable_Check(PyObject *);
extern PyObject *PyUnicode_FromString(const char *);
extern void Py_IncRef(PyObject *);
extern void Py_DecRef(PyObject *);
extern PyObject *PyEval_GetFrame(void);
extern int Py_EnterRecursiveCall(const char *);
extern void Py_LeaveRecursiveCall(void);
extern PyObject *PyFrame_GetBack(PyObject *);
extern PyObject *PyFrame_GetCode(PyObject *);
extern int PySys_AddAuditHook(int (*)(const char *, PyObject *, void *), void *);
extern PyObject *PyExc_OSError, *PyExc_PermissionError, *PyExc_RuntimeError, *PyExc_ImportError,
    *PyExc_TypeError, *PyExc_ValueError;
extern char PyFrame_Type[], PyUnicode_Type[], PyBytes_Type[];

#define TYPE(o) (((PyObject *)(o))->ob_type)

static PyObject *none(void) { return Py_BuildValue(""); }
static PyObject *oserror(void) { return PyErr_SetFromErrno(PyExc_OSError); }

/* ------------------------------------------------------------------ sealing */

static int sealed;      /* set-up functions refuse once set (per process) */
static int tampered;    /* the audit hook saw tampering: trusted_caller() is false from then on */
static int lost_events; /* tracing could not be called (recursion limit): the trace lacks events */

static int refuse_sealed(void) {
    if (sealed) {
        PyErr_SetString(PyExc_PermissionError, "ndtrace: the sandbox helper is sealed");
        return 1;
    }
    return 0;
}

static PyObject *nd_seal(PyObject *self, PyObject *unused) {
    sealed = 1;
    return none();
}

/* ------------------------------------------------------------------ process set-up */

static PyObject *nd_set_dumpable(PyObject *self, PyObject *args) {
    int v;
    if (!PyArg_ParseTuple(args, "i", &v) || refuse_sealed()) return NULL;
    if (prctl(PR_SET_DUMPABLE, v ? 1 : 0, 0, 0, 0) != 0) return oserror();
    return none();
}

static PyObject *nd_no_new_privs(PyObject *self, PyObject *unused) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return oserror();
    return none();
}

static PyObject *nd_unshare(PyObject *self, PyObject *args) {
    unsigned long flags;
    if (!PyArg_ParseTuple(args, "k", &flags) || refuse_sealed()) return NULL;
    if (unshare((int)flags) != 0) return oserror();
    return none();
}

static PyObject *nd_mount(PyObject *self, PyObject *args) {
    const char *src, *dst, *fstype, *data;
    unsigned long flags;
    if (!PyArg_ParseTuple(args, "zszkz", &src, &dst, &fstype, &flags, &data) || refuse_sealed())
        return NULL;
    if (mount(src, dst, fstype, flags, data) != 0) return oserror();
    return none();
}

#ifndef KEYCTL_JOIN_SESSION_KEYRING
#define KEYCTL_JOIN_SESSION_KEYRING 1
#endif

/* A fresh anonymous session keyring: nothing of the worker's keyrings stays reachable. */
static PyObject *nd_join_session_keyring(PyObject *self, PyObject *unused) {
    if (refuse_sealed()) return NULL;
    if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0) return oserror();
    return none();
}

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Empty effective, permitted, inheritable, ambient and bounding sets, with the securebits that
 * keep a later uid 0 or exec from granting any back. Needs CAP_SETPCAP in the current user
 * namespace for the bounding set and securebits (the item has it right after unshare). */
static PyObject *nd_drop_capabilities(PyObject *self, PyObject *unused) {
    if (refuse_sealed()) return NULL;
    /* SECBIT_NOROOT|NOROOT_LOCKED|NO_SETUID_FIXUP|NO_SETUID_FIXUP_LOCKED|KEEP_CAPS_LOCKED and
     * NO_CAP_AMBIENT_RAISE|its lock (0x40|0x80). */
    if (prctl(PR_SET_SECUREBITS, 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80, 0, 0, 0) != 0)
        return oserror();
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
            if (errno == EINVAL) break; /* past the last capability the kernel knows */
            return oserror();
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return oserror();
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &hdr, data) != 0) return oserror();
    /* Check: nothing left anywhere. */
    if (syscall(SYS_capget, &hdr, data) != 0) return oserror();
    for (int i = 0; i < 2; i++) {
        if (data[i].effective || data[i].permitted || data[i].inheritable) {
            errno = EPERM;
            return oserror();
        }
    }
    if (prctl(PR_CAPBSET_READ, 0, 0, 0, 0) != 0) {
        errno = EPERM;
        return oserror();
    }
    return none();
}

/* seccomp(program): install a seccomp-BPF filter (raw sock_filter bytes, native order) on the
 * calling thread and every thread of the process, after no_new_privs. */
static PyObject *nd_seccomp(PyObject *self, PyObject *args) {
    PyObject *prog;
    char *buf;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "O", &prog) || refuse_sealed()) return NULL;
    if (PyBytes_AsStringAndSize(prog, &buf, &len) < 0) return NULL;
    if (len == 0 || len % sizeof(struct sock_filter) != 0 || len / sizeof(struct sock_filter) > 4096) {
        PyErr_SetString(PyExc_ValueError, "ndtrace: malformed seccomp program");
        return NULL;
    }
    struct sock_fprog fprog = {(unsigned short)(len / sizeof(struct sock_filter)), (struct sock_filter *)buf};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return oserror();
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog) != 0)
        return oserror();
    return none();
}

/* ------------------------------------------------------------------ Landlock */

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};
struct ll_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

/* The filesystem rights each ABI version handles (bit 0 EXECUTE ... bit 15 IOCTL_DEV). */
static uint64_t ll_fs_rights(long abi) {
    uint64_t r = (1ULL << 13) - 1; /* v1: EXECUTE .. MAKE_SYM */
    if (abi >= 2) r |= 1ULL << 13; /* REFER */
    if (abi >= 3) r |= 1ULL << 14; /* TRUNCATE */
    if (abi >= 5) r |= 1ULL << 15; /* IOCTL_DEV */
    return r;
}

static PyObject *nd_landlock_abi(PyObject *self, PyObject *unused) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return PyLong_FromLong(abi < 0 ? 0 : abi);
}

/* landlock(rules): restrict this process (and everything it starts) to the given filesystem
 * rights: rules is a sequence of (path, rights) with rights a mask of the LL_* constants. Every
 * right the running kernel knows is handled, so anything not granted is denied; TCP bind and
 * connect are denied (ABI 4+), and signals and abstract unix sockets may not leave the domain
 * (ABI 6+). Paths that do not exist are skipped. Returns the ABI version used. */
static PyObject *nd_landlock(PyObject *self, PyObject *args) {
    PyObject *rules;
    if (!PyArg_ParseTuple(args, "O", &rules) || refuse_sealed()) return NULL;
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    if (abi < 1) {
        errno = abi < 0 ? errno : ENOSYS;
        return oserror();
    }
    struct ll_ruleset_attr attr = {ll_fs_rights(abi), 0, 0};
    size_t size = 8;
    if (abi >= 4) {
        attr.handled_access_net = 3; /* BIND_TCP | CONNECT_TCP */
        size = 16;
    }
    if (abi >= 6) {
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
        size = 24;
    }
    int rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rfd < 0) return oserror();
    Py_ssize_t n = PySequence_Size(rules);
    if (n < 0) {
        close(rfd);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(rules, i);
        const char *path;
        unsigned long long rights;
        if (!item) {
            close(rfd);
            return NULL;
        }
        int ok = PyArg_ParseTuple(item, "sK", &path, &rights);
        if (!ok) {
            Py_DecRef(item);
            close(rfd);
            return NULL;
        }
        int fd = open(path, O_PATH | O_CLOEXEC);
        Py_DecRef(item);
        if (fd < 0) {
            if (errno == ENOENT || errno == ENOTDIR) continue;
            int e = errno;
            close(rfd);
            errno = e;
            return oserror();
        }
        struct stat st;
        uint64_t allowed = rights & attr.handled_access_fs;
        if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
            /* Rights that only make sense on directories are refused by the kernel on files. */
            allowed &= (1ULL << 0) | (1ULL << 1) | (1ULL << 2) | (1ULL << 14) | (1ULL << 15);
        }
        struct ll_path_beneath_attr pb = {allowed, fd};
        long r = allowed ? syscall(SYS_landlock_add_rule, rfd, LL_RULE_PATH_BENEATH, &pb, 0) : 0;
        int e = errno;
        close(fd);
        if (r != 0) {
            close(rfd);
            errno = e;
            return oserror();
        }
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, rfd, 0) != 0) {
        int e = errno;
        close(rfd);
        errno = e;
        return oserror();
    }
    close(rfd);
    return PyLong_FromLong(abi);
}

/* ------------------------------------------------------------------ opaque callables */

/* An opaque callable forwards calls to a Python callable and exposes nothing of it: no
 * attributes, no __dict__, no way to reach the wrapped function short of gc introspection (which
 * the audit hook treats as tampering). The tracer hands these to places traced code can see
 * (frame.f_trace, sys.gettrace(), signal handlers). */
typedef struct {
    PyObject ob_base;
    PyObject *fn;
    /* A trace entry point (1: the global trace function, 2: a frame's): it raises the deferred
     * signals once it has returned, and it never fails (see opaque_call). */
    int trace;
} Opaque;

static void *opaque_type;

/* Signals whose Python handler would have run inside the tracer (defer_signal): raised again by
 * a trace entry point's wrapper after the tracer has returned, from C, so the handler runs at
 * the traced code's next instruction boundary rather than in a frame of the tracer. */
static volatile uint64_t deferred_signals;


static PyObject *opaque_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    Opaque *o = (Opaque *)self;
    PyObject *r = PyObject_Call(o->fn, args, kwargs);
    if (!r && o->trace) {
        /* The call itself failed (the recursion limit reached in untraced code, before the
         * tracer's first instruction; the tracer catches everything once it runs). CPython
         * would switch tracing off for good: instead that frame goes untraced (global) or this
         * event unrecorded (local), and the run reports a trace with events missing. */
        PyErr_Clear();
        lost_events = 1;
        if (o->trace == 1) {
            r = none();
        } else {
            Py_IncRef(self);
            r = self;
        }
    }
    if (o->trace && deferred_signals) {
        uint64_t pending = deferred_signals;
        deferred_signals = 0;
        for (int s = 1; s < 64; s++) {
            if (pending & (1ULL << s)) raise(s);
        }
    }
    return r;
}

static PyObject *nd_defer_signal(PyObject *self, PyObject *args) {
    int s;
    if (!PyArg_ParseTuple(args, "i", &s)) return NULL;
    if (s > 0 && s < 64) deferred_signals |= 1ULL << s;
    return none();
}
static int opaque_traverse(PyObject *self, visitproc visit, void *arg) {
    Opaque *o = (Opaque *)self;
    if (o->fn) {
        int r = visit(o->fn, arg);
        if (r) return r;
    }
    return visit((PyObject *)TYPE(self), arg);
}
static int opaque_clear(PyObject *self) {
    Opaque *o = (Opaque *)self;
    PyObject *fn = o->fn;
    o->fn = NULL;
    if (fn) Py_DecRef(fn);
    return 0;
}
static void opaque_dealloc(PyObject *self) {
    PyObject *tp = (PyObject *)TYPE(self);
    PyObject_GC_UnTrack(self);
    opaque_clear(self);
    PyObject_GC_Del(self);
    Py_DecRef(tp);
}
static PyObject *opaque_repr(PyObject *self) { return PyUnicode_FromString("<ndtrace>"); }

static PyType_Slot opaque_slots[] = {
    {Py_tp_call, (void *)opaque_call},       {Py_tp_traverse, (void *)opaque_traverse},
    {Py_tp_clear, (void *)opaque_clear},     {Py_tp_dealloc, (void *)opaque_dealloc},
    {Py_tp_repr, (void *)opaque_repr},       {Py_tp_doc, (void *)"ndtrace"},
    {0, NULL},
};
static PyType_Spec opaque_spec = {
    "ndtrace.opaque", sizeof(Opaque), 0,
    Py_TPFLAGS_HAVE_VERSION_TAG | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION |
        Py_TPFLAGS_IMMUTABLETYPE,
    opaque_slots,
};

static PyObject *nd_opaque(PyObject *self, PyObject *args) {
    PyObject *fn;
    int trace = 0;
    if (!PyArg_ParseTuple(args, "O|i", &fn, &trace)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "ndtrace: opaque() needs a callable");
        return NULL;
    }
    Opaque *o = (Opaque *)PyType_GenericAlloc(opaque_type, 0);
    if (!o) return NULL;
    Py_IncRef(fn);
    o->fn = fn;
    o->trace = trace == 1 || trace == 2 ? trace : 0;
    return (PyObject *)o;
}

/* ------------------------------------------------------------------ code-object sets */

/* A set of code objects compared by identity (sorted pointers, kept alive). */
typedef struct {
    PyObject **v;
    Py_ssize_t n;
} codeset;

static int ptrcmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (PyObject *const *)a, y = (uintptr_t) * (PyObject *const *)b;
    return x < y ? -1 : x > y;
}

static int codeset_fill(codeset *s, PyObject *seq) {
    Py_ssize_t n = PySequence_Size(seq);
    if (n < 0) return -1;
    s->v = calloc(n ? n : 1, sizeof(PyObject *));
    if (!s->v) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        s->v[i] = PySequence_GetItem(seq, i); /* the new reference is kept */
        if (!s->v[i]) return -1;
    }
    s->n = n;
    qsort(s->v, n, sizeof(PyObject *), ptrcmp);
    return 0;
}

static int codeset_has(const codeset *s, PyObject *code) {
    return code && s->n && bsearch(&code, s->v, s->n, sizeof(PyObject *), ptrcmp) != NULL;
}

static codeset trusted_codes;  /* all of the tracer's code: capability callers */
static codeset cap_codes;      /* code whose frames hold the tracer's state */
static codeset import_codes;   /* importlib, zipimport, types.coroutine: the only code that may
                                  load bytecode or build code objects */

/* trusted_caller(): whether the function that called trusted_caller() was itself called by the
 * tracer's code (and nothing was found tampering). Capability functions start with it. */
static PyObject *nd_trusted_caller(PyObject *self, PyObject *unused) {
    if (tampered || !trusted_codes.n) return PyBool_FromLong(0);
    PyObject *cur = PyEval_GetFrame(); /* borrowed: the calling Python function's frame */
    if (!cur) return PyBool_FromLong(0);
    PyObject *back = PyFrame_GetBack(cur);
    if (!back) return PyBool_FromLong(0);
    PyObject *code = PyFrame_GetCode(back);
    int ok = codeset_has(&trusted_codes, code);
    Py_DecRef(code);
    Py_DecRef(back);
    return PyBool_FromLong(ok);
}

/* ------------------------------------------------------------------ the audit hook */

static __thread int in_hook;
static PyObject *tamper_cb;     /* the tracer's handler: seals a `tampered` end record and exits */
static PyObject *deny_imports;  /* tuple of module names refused with ImportError */
static PyObject *tamper_imports;/* tuple of module names whose import is tampering */
static PyObject *pyc_roots;     /* tuple of directory prefixes ("/usr/") bytecode may come from */

static int tamper(const char *reason) {
    tampered = 1;
    if (tamper_cb) {
        PyObject *r = PyObject_CallFunction(tamper_cb, "s", reason);
        if (r) Py_DecRef(r);
        else PyErr_Clear();
    }
    PyErr_SetString(PyExc_RuntimeError, "ndtrace: tampering detected");
    return -1;
}

/* Whether frame or any frame below it runs code that holds the tracer's state. */
static int chain_has_cap(PyObject *frame) {
    if (!frame || TYPE(frame) != (void *)PyFrame_Type) return 0;
    Py_IncRef(frame);
    PyObject *f = frame;
    int hit = 0;
    for (int n = 0; f && n < 100000 && !hit; n++) {
        PyObject *code = PyFrame_GetCode(f);
        hit = codeset_has(&cap_codes, code);
        Py_DecRef(code);
        PyObject *b = PyFrame_GetBack(f);
        Py_DecRef(f);
        f = b;
    }
    if (f) Py_DecRef(f);
    return hit;
}

static int str_in_tuple(const char *s, PyObject *tuple) {
    if (!tuple) return 0;
    Py_ssize_t n = PyTuple_Size(tuple);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GetItem(tuple, i);
        const char *t = it ? PyUnicode_AsUTF8AndSize(it, NULL) : NULL;
        if (t && strcmp(s, t) == 0) return 1;
    }
    PyErr_Clear();
    return 0;
}

/* A .pyc may be loaded only from under one of the read-only roots: traced code could craft
 * bytecode (CPython does not verify it) in a writable directory and import it. */
static int pyc_allowed(PyObject *pathobj) {
    PyObject *p = PyOS_FSPath(pathobj);
    if (!p) {
        PyErr_Clear();
        return 1; /* an fd or something io.open will reject itself */
    }
    const char *s = NULL;
    Py_ssize_t len = 0;
    char *bs;
    if (TYPE(p) == (void *)PyBytes_Type) {
        if (PyBytes_AsStringAndSize(p, &bs, &len) == 0) s = bs;
    } else {
        s = PyUnicode_AsUTF8AndSize(p, &len);
    }
    int ok = 1;
    if (!s) {
        PyErr_Clear();
    } else if (len >= 4 && memcmp(s + len - 4, ".pyc", 4) == 0) {
        ok = 0;
        if (s[0] == '/' && !strstr(s, "/../") && !strstr(s, "/./") && !strstr(s, "//")) {
            Py_ssize_t n = pyc_roots ? PyTuple_Size(pyc_roots) : 0;
            for (Py_ssize_t i = 0; i < n && !ok; i++) {
                Py_ssize_t rl = 0;
                const char *r = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(pyc_roots, i), &rl);
                if (r && rl > 0 && len > rl && strncmp(s, r, rl) == 0) ok = 1;
            }
            PyErr_Clear();
        }
    }
    Py_DecRef(p);
    return ok;
}

static int code_attr_is_cap(PyObject *obj, const char *name) {
    PyObject *code;
    if (strcmp(name, "f_code") == 0 && TYPE(obj) == (void *)PyFrame_Type) {
        code = PyFrame_GetCode(obj);
    } else {
        code = PyObject_GetAttrString(obj, name);
    }
    if (!code) {
        PyErr_Clear();
        return 0;
    }
    int hit = codeset_has(&cap_codes, code);
    Py_DecRef(code);
    return hit;
}

/* Whether the Python code running now (the caller of the audited operation) is the tracer's. */
static int caller_trusted(void) {
    PyObject *cur = PyEval_GetFrame();
    if (!cur) return 0;
    PyObject *code = PyFrame_GetCode(cur);
    int ok = codeset_has(&trusted_codes, code);
    Py_DecRef(code);
    return ok && !tampered;
}

static int policy(const char *event, PyObject *args) {
    switch (event[0]) {
    case 's':
        if (strcmp(event, "sys.settrace") == 0 || strcmp(event, "sys.setprofile") == 0) {
            if (caller_trusted()) return 0;
            /* CPython switches tracing off by itself when calling the trace function fails at the
             * recursion limit (the limit reached in untraced code): no headroom is left then. The
             * tracer reports the trace as incomplete (lost_events). */
            if (Py_EnterRecursiveCall(" in the sandbox's audit hook") != 0) {
                PyErr_Clear();
                lost_events = 1;
                return 0;
            }
            Py_LeaveRecursiveCall();
            return tamper("traced code called sys.settrace or sys.setprofile");
        }
        if (strcmp(event, "sys._getframe") == 0) {
            if (caller_trusted()) return 0;
            PyObject *f = PyTuple_GetItem(args, 0);
            if (!f) PyErr_Clear();
            return chain_has_cap(f) ? tamper("traced code took a frame of the tracer (sys._getframe)") : 0;
        }
        if (strcmp(event, "sys._current_frames") == 0)
            return tamper("traced code called sys._current_frames");
        if (strcmp(event, "sys.addaudithook") == 0) {
            /* Refused quietly: CPython drops a RuntimeError from this event and adds no hook. A
             * hook of its own would see the tracer's audited operations and their arguments. */
            PyErr_SetString(PyExc_RuntimeError, "ndtrace: audit hooks are not available in the sandbox");
            return -1;
        }
        if (strncmp(event, "sys.monitoring.", 15) == 0)
            return tamper("traced code used sys.monitoring");
        return 0;
    case 'o':
        if (strcmp(event, "object.__getattr__") == 0) {
            if (caller_trusted()) return 0;
            PyObject *obj = PyTuple_GetItem(args, 0), *nameo = PyTuple_GetItem(args, 1);
            const char *name = nameo ? PyUnicode_AsUTF8AndSize(nameo, NULL) : NULL;
            if (!obj || !name) {
                PyErr_Clear();
                return 0;
            }
            if (!strcmp(name, "tb_frame") || !strcmp(name, "gi_frame") || !strcmp(name, "cr_frame") ||
                !strcmp(name, "ag_frame")) {
                PyObject *f = PyObject_GetAttrString(obj, name);
                if (!f) {
                    PyErr_Clear();
                    return 0;
                }
                int hit = chain_has_cap(f);
                Py_DecRef(f);
                return hit ? tamper("traced code took a frame of the tracer") : 0;
            }
            if (!strcmp(name, "f_code") || !strcmp(name, "__code__") || !strcmp(name, "gi_code") ||
                !strcmp(name, "cr_code") || !strcmp(name, "ag_code")) {
                return code_attr_is_cap(obj, name) ? tamper("traced code took a code object of the tracer") : 0;
            }
            return 0;
        }
        if (strcmp(event, "open") == 0) {
            PyObject *path = PyTuple_GetItem(args, 0);
            if (!path) {
                PyErr_Clear();
                return 0;
            }
            if (!pyc_allowed(path)) {
                PyErr_SetString(PyExc_PermissionError,
                                "ndtrace: bytecode (.pyc) is loaded only from read-only directories");
                return -1;
            }
        }
        return 0;
    case 'g':
        if (strcmp(event, "gc.get_objects") == 0 || strcmp(event, "gc.get_referrers") == 0 ||
            strcmp(event, "gc.get_referents") == 0)
            return tamper("traced code used gc introspection (gc.get_objects/referrers/referents)");
        return 0;
    case 'c':
        if (strncmp(event, "ctypes.", 7) == 0) return tamper("traced code used ctypes");
        if (strcmp(event, "code.__new__") == 0) {
            /* The standard library's own uses (types.coroutine sets a flag) are allowed. */
            PyObject *cur = PyEval_GetFrame();
            PyObject *code = cur ? PyFrame_GetCode(cur) : NULL;
            int ok = codeset_has(&import_codes, code);
            if (code) Py_DecRef(code);
            return ok ? 0 : tamper("traced code built a code object (bytecode is not verified by CPython)");
        }
        return 0;
    case 'm':
        if (strcmp(event, "marshal.loads") == 0 || strcmp(event, "marshal.load") == 0) {
            PyObject *cur = PyEval_GetFrame();
            PyObject *code = cur ? PyFrame_GetCode(cur) : NULL;
            int ok = codeset_has(&import_codes, code);
            if (code) Py_DecRef(code);
            return ok ? 0 : tamper("traced code unmarshalled code (bytecode is not verified by CPython)");
        }
        return 0;
    case 'i':
        if (strcmp(event, "import") == 0) {
            PyObject *m = PyTuple_GetItem(args, 0);
            const char *name = m ? PyUnicode_AsUTF8AndSize(m, NULL) : NULL;
            if (!name) {
                PyErr_Clear();
                return 0;
            }
            if (str_in_tuple(name, tamper_imports)) return tamper("traced code imported the sandbox's helper");
            if (str_in_tuple(name, deny_imports)) {
                PyErr_SetString(PyExc_ImportError, "ndtrace: this module is not available in the sandbox");
                return -1;
            }
        }
        return 0;
    }
    return 0;
}

static int audit_hook(const char *event, PyObject *args, void *data) {
    if (in_hook) return 0;
    switch (event[0]) {
    case 's': case 'o': case 'g': case 'c': case 'm': case 'i':
        break;
    default:
        return 0;
    }
    in_hook = 1;
    int r = policy(event, args);
    in_hook = 0;
    return r;
}

/* install_audit(trusted, capability, importlib, on_tamper, deny_imports, tamper_imports,
 * pyc_roots): the tracer's audit policy for this process. trusted/capability/importlib are
 * sequences of code objects; on_tamper(reason) is called on tampering (it reports and exits). */
static PyObject *nd_install_audit(PyObject *self, PyObject *args) {
    PyObject *trusted, *caps, *imports, *cb, *deny, *tamper_mods, *roots;
    if (!PyArg_ParseTuple(args, "OOOOOOO", &trusted, &caps, &imports, &cb, &deny, &tamper_mods, &roots) ||
        refuse_sealed())
        return NULL;
    if (trusted_codes.n || tamper_cb) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: the audit hook is already installed");
        return NULL;
    }
    if (!PyCallable_Check(cb)) {
        PyErr_SetString(PyExc_TypeError, "ndtrace: on_tamper must be callable");
        return NULL;
    }
    if (codeset_fill(&trusted_codes, trusted) < 0 || codeset_fill(&cap_codes, caps) < 0 ||
        codeset_fill(&import_codes, imports) < 0)
        return NULL;
    Py_IncRef(cb);
    tamper_cb = cb;
    Py_IncRef(deny);
    deny_imports = deny;
    Py_IncRef(tamper_mods);
    tamper_imports = tamper_mods;
    Py_IncRef(roots);
    pyc_roots = roots;
    if (PySys_AddAuditHook(audit_hook, NULL) < 0) return NULL;
    return none();
}

static PyObject *nd_tampered(PyObject *self, PyObject *unused) { return PyBool_FromLong(tampered); }
static PyObject *nd_lost_events(PyObject *self, PyObject *unused) { return PyBool_FromLong(lost_events); }

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"seal", nd_seal, METH_NOARGS, "Refuse every set-up function from now on."},
    {"set_dumpable", nd_set_dumpable, METH_VARARGS, "prctl(PR_SET_DUMPABLE, v)."},
    {"no_new_privs", nd_no_new_privs, METH_NOARGS, "prctl(PR_SET_NO_NEW_PRIVS, 1)."},
    {"unshare", nd_unshare, METH_VARARGS, "unshare(flags)."},
    {"mount", nd_mount, METH_VARARGS, "mount(source, target, fstype, flags, data)."},
    {"join_session_keyring", nd_join_session_keyring, METH_NOARGS, "A fresh anonymous session keyring."},
    {"drop_capabilities", nd_drop_capabilities, METH_NOARGS, "Empty every capability set, locked."},
    {"seccomp", nd_seccomp, METH_VARARGS, "Install a seccomp-BPF program (after no_new_privs)."},
    {"landlock_abi", nd_landlock_abi, METH_NOARGS, "The Landlock ABI version, 0 when unavailable."},
    {"landlock", nd_landlock, METH_VARARGS, "Restrict this process with Landlock: [(path, rights)]."},
    {"opaque", nd_opaque, METH_VARARGS, "opaque(fn, trace=0): a callable forwarding to fn, exposing nothing."},
    {"lost_events", nd_lost_events, METH_NOARGS, "Whether a trace entry point could not be entered."},
    {"defer_signal", nd_defer_signal, METH_VARARGS, "Raise signal s again once the tracer returns."},
    {"install_audit", nd_install_audit, METH_VARARGS, "Install the tracer's audit hook."},
    {"trusted_caller", nd_trusted_caller, METH_NOARGS, "Whether the caller's caller is the tracer."},
    {"tampered", nd_tampered, METH_NOARGS, "Whether the audit hook saw tampering."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module = {
    {{1, NULL}, NULL, 0, NULL}, "_ndtrace_native", "ndtrace's sandbox helper (sandbox/native).", -1, methods,
    NULL, NULL, NULL, NULL,
};

__attribute__((visibility("default"))) PyObject *PyInit__ndtrace_native(void) {
    opaque_type = PyType_FromSpec(&opaque_spec);
    if (!opaque_type) return NULL;
    PyObject *m = PyModule_Create2(&module, PYTHON_API_VERSION);
    if (!m) return NULL;
    /* Landlock filesystem rights, for landlock(). */
    static const struct { const char *name; long bit; } ll[] = {
        {"LL_EXECUTE", 0}, {"LL_WRITE_FILE", 1}, {"LL_READ_FILE", 2}, {"LL_READ_DIR", 3},
        {"LL_REMOVE_DIR", 4}, {"LL_REMOVE_FILE", 5}, {"LL_MAKE_CHAR", 6}, {"LL_MAKE_DIR", 7},
        {"LL_MAKE_REG", 8}, {"LL_MAKE_SOCK", 9}, {"LL_MAKE_FIFO", 10}, {"LL_MAKE_BLOCK", 11},
        {"LL_MAKE_SYM", 12}, {"LL_REFER", 13}, {"LL_TRUNCATE", 14}, {"LL_IOCTL_DEV", 15},
    };
    for (size_t i = 0; i < sizeof ll / sizeof ll[0]; i++) {
        if (PyModule_AddIntConstant(m, ll[i].name, 1L << ll[i].bit) < 0) return NULL;
    }
    return m;
}
