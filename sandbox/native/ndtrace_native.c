/*
 * ndtrace_native: the sandbox's native helper, a CPython extension module loaded by the zygote.
 *
 * Python's standard library cannot create namespaces, mount, drop capabilities, restrict itself
 * with Landlock or install a seccomp filter, and the sandbox must never import ctypes (it would
 * hand traced code raw memory access: the tracer shares the process with it). This module gives
 * the zygote and the item processes exactly those operations: every set-up function either builds
 * isolation or reduces privileges, and all of them refuse to run after seal().
 *
 * It is also the tracer (tracer.c): traced code shares the item's process, so the tracer keeps no
 * state, frame or callable in reach of Python code; and it installs the tracer's audit hook
 * (PEP 578), in C: C hooks cannot be listed, removed or inspected from Python. See docs/sandbox.md.
 *
 * No Python.h: abi.h declares the CPython symbols used, so building needs only a C compiler and
 * the kernel headers. Build: cc -O2 -shared -fPIC -o _ndtrace_native.so *.c (sandbox/native.go).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "native.h"

PyObject *none(void) { return Py_BuildValue(""); }
static PyObject *oserror(void) { return PyErr_SetFromErrno(PyExc_OSError); }

/* ------------------------------------------------------------------ sealing */

static int sealed; /* set-up functions refuse once set (per process) */
int tampered;      /* the audit hook saw tampering: trusted callers are refused from then on */
int native_settrace;

int refuse_sealed(void) {
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

/* umount2(target, flags): the item's init detaches the staging tmpfs of a writable checkout. */
static PyObject *nd_umount(PyObject *self, PyObject *args) {
    const char *target;
    int flags;
    if (!PyArg_ParseTuple(args, "si", &target, &flags) || refuse_sealed()) return NULL;
    if (umount2(target, flags) != 0) return oserror();
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

/* ------------------------------------------------------------------ code-object sets */

static int ptrcmp(const void *a, const void *b) {
    uintptr_t x = (uintptr_t) * (PyObject *const *)a, y = (uintptr_t) * (PyObject *const *)b;
    return x < y ? -1 : x > y;
}

int codeset_fill(codeset *s, PyObject *seq) {
    Py_ssize_t n = PySequence_Size(seq);
    if (n < 0) return -1;
    s->v = calloc(n ? n : 1, sizeof(PyObject *));
    if (!s->v) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        s->v[i] = PySequence_GetItem(seq, i); /* the new reference is kept */
        if (!s->v[i]) return -1;
    }
    s->n = n;
    qsort(s->v, n, sizeof(PyObject *), ptrcmp);
    return 0;
}

int codeset_has(const codeset *s, PyObject *code) {
    return code && s->n && bsearch(&code, s->v, s->n, sizeof(PyObject *), ptrcmp) != NULL;
}

codeset trusted_codes;        /* all of the tracer's Python code (the tracer module, sandbox/tracer/) */
static codeset import_codes;  /* importlib, zipimport, types.coroutine: the only code that may
                                 load bytecode or build code objects */

/* ------------------------------------------------------------------ the audit hook */

static __thread int in_hook;
static PyObject *deny_imports;  /* tuple of module names refused with ImportError */
static PyObject *tamper_imports;/* tuple of module names whose import is tampering */
static PyObject *pyc_roots;     /* tuple of directory prefixes ("/usr/") bytecode may come from */
static PyObject *ext_roots;     /* tuple of directory prefixes extension modules may come from */
static PyObject *ext_deny;      /* tuple of file-name prefixes of extension modules never loaded */

/* Tampering: the tracer seals a `tampered` end record and exits (in an item with a tracer); the
 * audited operation fails otherwise. */
static int tamper(const char *reason) {
    tampered = 1;
    tracer_tamper(reason);
    PyErr_SetString(PyExc_RuntimeError, "ndtrace: tampering detected");
    return -1;
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

/* Whether s (len bytes, no NUL inside) is an absolute path with no . or .. component and no
 * empty one, strictly below one of the read-only roots bytecode may come from. */
static int under_pyc_root(const char *s, Py_ssize_t len) {
    int ok = 0;
    if ((Py_ssize_t)strlen(s) == len && s[0] == '/' && !strstr(s, "/../") && !strstr(s, "/./") && !strstr(s, "//")) {
        Py_ssize_t n = pyc_roots ? PyTuple_Size(pyc_roots) : 0;
        for (Py_ssize_t i = 0; i < n && !ok; i++) {
            Py_ssize_t rl = 0;
            const char *r = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(pyc_roots, i), &rl);
            if (r && rl > 0 && len > rl && strncmp(s, r, rl) == 0) ok = 1;
        }
        PyErr_Clear();
    }
    return ok;
}

/* A .pyc may be loaded only from under one of the read-only roots: traced code could craft
 * bytecode (CPython does not verify it) in a writable directory and import it. */
static int pyc_allowed(PyObject *pathobj) {
    /* Only str and bytes: no __fspath__ of the code's runs inside the hook (where its own audited
     * operations would go unchecked). The open functions convert a path object before their
     * audit event, and since the bytes unmarshalled are checked themselves (below), this rule
     * only keeps honest imports on their source (a refused open makes the loader compile it). */
    if (!IS_TYPE(pathobj, PyUnicode_Type) && !IS_TYPE(pathobj, PyBytes_Type)) return 1;
    PyObject *p = PyOS_FSPath(pathobj);
    if (!p) {
        PyErr_Clear();
        return 1;
    }
    const char *s = NULL;
    Py_ssize_t len = 0;
    char *bs;
    if (IS_TYPE(p, PyBytes_Type)) {
        if (PyBytes_AsStringAndSize(p, &bs, &len) == 0) s = bs;
    } else {
        s = PyUnicode_AsUTF8AndSize(p, &len);
    }
    int ok = 1;
    if (!s) {
        PyErr_Clear();
    } else if (len >= 4 && memcmp(s + len - 4, ".pyc", 4) == 0) {
        ok = under_pyc_root(s, len);
    }
    Py_DecRef(p);
    return ok;
}

/* An extension module (native code) loads only from under the standard library's extension
 * directory and the sandbox's configured mounts, never from the interpreter's third-party
 * directories (dist-packages holds modules that read and write any memory, _cffi_backend for
 * one: with them the tracer's key and buffer are the code's), and never the standard library's
 * test modules (_testcapi and the like), by a canonical path only. */
static int ext_allowed(PyObject *pathobj) {
    /* Only str and bytes: _imp.create_dynamic audits its spec's origin as it is, and os.fspath
     * of an object of the code's ran its __fspath__ inside this hook, where nothing is checked
     * (an attacker's review, issue 29: crafted bytes unmarshalled there). The import system's
     * extension loader passes a str. */
    if (!IS_TYPE(pathobj, PyUnicode_Type) && !IS_TYPE(pathobj, PyBytes_Type)) return 0;
    PyObject *p = PyOS_FSPath(pathobj);
    if (!p) {
        PyErr_Clear();
        return 0;
    }
    const char *s = NULL;
    char *bs;
    Py_ssize_t len = 0;
    if (IS_TYPE(p, PyBytes_Type)) {
        if (PyBytes_AsStringAndSize(p, &bs, &len) == 0) s = bs;
    } else {
        s = PyUnicode_AsUTF8AndSize(p, &len);
    }
    char real[PATH_MAX];
    int ok = 0;
    /* Only a path that is its own resolution: the loader opens the path again after this check, and
     * a symlink anywhere in it (in /tmp, say) could be swapped in between. Below a root, every
     * directory is on a read-only mount, so nothing of a canonical path can change. */
    if (s && (Py_ssize_t)strlen(s) == len && realpath(s, real) && strcmp(s, real) == 0) {
        const char *base = strrchr(real, '/');
        base = base ? base + 1 : real;
        Py_ssize_t n = ext_roots ? PyTuple_Size(ext_roots) : 0;
        for (Py_ssize_t i = 0; i < n && !ok; i++) {
            Py_ssize_t rl = 0;
            const char *r = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(ext_roots, i), &rl);
            if (r && rl > 0 && (Py_ssize_t)strlen(real) > rl && strncmp(real, r, rl) == 0) ok = 1;
        }
        n = ext_deny ? PyTuple_Size(ext_deny) : 0;
        for (Py_ssize_t i = 0; i < n && ok; i++) {
            const char *d = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(ext_deny, i), NULL);
            if (d && strncmp(base, d, strlen(d)) == 0) ok = 0;
        }
    }
    PyErr_Clear();
    Py_DecRef(p);
    return ok;
}

/* Whether the Python code running now (the caller of the audited operation) is one of set s. */
static int caller_in(const codeset *s) {
    PyObject *cur = PyEval_GetFrame();
    PyObject *code = cur ? PyFrame_GetCode(cur) : NULL;
    int ok = codeset_has(s, code);
    if (code) Py_DecRef(code);
    return ok;
}

/* Whether the Python code running now (the caller of the audited operation) is the code of set s
 * named name (the set makes it the standard library's very function; the name tells which). */
static int caller_is(const codeset *s, const char *name) {
    PyObject *cur = PyEval_GetFrame();
    PyObject *code = cur ? PyFrame_GetCode(cur) : NULL;
    int ok = 0;
    if (codeset_has(s, code)) {
        PyObject *n = PyObject_GetAttrString(code, "co_name");
        ok = n && IS_TYPE(n, PyUnicode_Type) && PyUnicode_CompareWithASCIIString(n, name) == 0;
        if (n) Py_DecRef(n);
        PyErr_Clear();
    }
    if (code) Py_DecRef(code);
    return ok;
}

/* ------------------------------------------------------------------ unmarshalled bytecode
 *
 * CPython does not verify bytecode, and the import system's functions are traced code's to call
 * (importlib._bootstrap_external._compile_bytecode(crafted)), to subclass (a loader whose
 * get_data returns crafted bytes) and to patch (their module globals, their classes' methods,
 * zipimport's table of contents): that marshal.loads is called by import code proves nothing of
 * where its bytes came from. So the bytes themselves are checked: marshal.loads unmarshals only
 * in importlib's _compile_bytecode, when its bytecode_path names a file under a read-only root
 * (the .pyc rule's roots, by the same textual rule) whose contents past the 16-byte header are
 * exactly the bytes being unmarshalled, read again here (by C calls: nothing of traced code runs),
 * and when what marshal reads is those very bytes: the frame's globals an exact dict whose
 * `marshal` is the real module (its type unchanged, its `loads` the real function, as they were
 * when the hook was installed), and its `data` immutable (bytes, or a memoryview of bytes: a
 * bytearray could be changed by a finalizer while marshal reads it). Everything else is refused:
 * zipimport's bytecode (zipimport then falls back to the archive's source, as it does for stale
 * bytecode), marshal.load, the frozen-module path. Honest imports are unchanged: every .pyc of
 * the standard library, dist-packages and environments loads through _compile_bytecode from its
 * own path, and a .pyc anywhere else is refused at its open (the loader compiles the source). */
extern PyObject *PyImport_ImportModule(const char *);
extern PyObject *PyModule_GetDict(PyObject *);
extern char PyMemoryView_Type[];
/* Taken at install_audit, before any traced code: the module, its type, its dict, its loads. */
static PyObject *real_marshal, *real_marshal_dict, *real_loads;
static void *real_marshal_type;

/* Dict d's value under the str key name (borrowed), or NULL: none, or a key of d is not an exact
 * str. Runs none of the code's Python, where a dict lookup would: a key of name's hash placed
 * before name (a module's globals, marshal's dict and a frame's locals dict are the code's to
 * change) has its __eq__ called, and that code ran inside this hook, where nothing is checked (an
 * attacker's review, issue 29: a .pyc opened in /tmp, crafted bytes unmarshalled). A dict whose
 * keys are all exact str is also one where the interpreter's own lookup of name finds this value. */
static PyObject *dict_str_get(PyObject *d, const char *name) {
    PyObject *k, *v, *hit = NULL;
    Py_ssize_t pos = 0;
    if (!d || !IS_TYPE(d, PyDict_Type)) return NULL;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!IS_TYPE(k, PyUnicode_Type)) return NULL;
        if (!hit && PyUnicode_CompareWithASCIIString(k, name) == 0) hit = v;
    }
    PyErr_Clear();
    return hit;
}

/* frame's local name (a new reference), or NULL. Runs none of the code's Python: the locals are
 * a dict of exact str keys, scanned (dict_str_get; 3.13: a FrameLocalsProxy, whose get finds a
 * function's own local by C comparisons). */
static PyObject *frame_local(PyObject *frame, const char *name) {
    PyObject *loc = PyFrame_GetLocals(frame), *key = PyUnicode_FromString(name);
    PyObject *v = NULL;
    if (loc && key && IS_TYPE(loc, PyDict_Type)) {
        v = dict_str_get(loc, name);
        if (v) Py_IncRef(v);
    } else if (loc && key) {
        v = PyObject_CallMethod(loc, "get", "O", key);
    }
    if (loc) Py_DecRef(loc);
    if (key) Py_DecRef(key);
    if (v == Py_None) {
        Py_DecRef(v);
        v = NULL;
    }
    PyErr_Clear();
    return v;
}

/* Whether the regular file at path holds exactly 16 bytes (a .pyc header) and then data. */
static int file_holds(const char *path, const char *data, Py_ssize_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st;
    int ok = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == (off_t)n + 16) {
        size_t want = (size_t)n + 16, got = 0;
        char *buf = malloc(want);
        while (buf && got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        ok = buf && got == want && memcmp(buf + 16, data, (size_t)n) == 0;
        free(buf);
    }
    close(fd);
    return ok;
}

/* Whether marshal.loads, called from _compile_bytecode's frame with bytes audited, reads the
 * contents of a .pyc file under a read-only root (see above). */
static int bytecode_proven(PyObject *frame, PyObject *audited) {
    int ok = 0;
    PyObject *g = PyFrame_GetGlobals(frame), *key = PyUnicode_FromString("marshal"), *m = NULL;
    PyObject *lkey = PyUnicode_FromString("loads"), *data = NULL, *obj = NULL, *path = NULL;
    if (!g || !key || !lkey || !IS_TYPE(g, PyDict_Type) || !real_marshal) goto out;
    m = dict_str_get(g, "marshal"); /* borrowed */
    if (m != real_marshal || TYPE(m) != real_marshal_type) goto out;
    /* By the module's dict: a getattr could run a module __getattr__ of the code's. */
    if (dict_str_get(real_marshal_dict, "loads") != real_loads) goto out;
    data = frame_local(frame, "data");
    if (!data) goto out;
    if (IS_TYPE(data, PyMemoryView_Type)) {
        obj = PyObject_GetAttrString(data, "obj");
        if (!obj || !IS_TYPE(obj, PyBytes_Type)) goto out;
    } else if (!IS_TYPE(data, PyBytes_Type)) {
        goto out;
    }
    path = frame_local(frame, "bytecode_path");
    Py_ssize_t pl = 0, an = 0;
    const char *ps = path && IS_TYPE(path, PyUnicode_Type) ? PyUnicode_AsUTF8AndSize(path, &pl) : NULL;
    char *ab = NULL;
    if (!ps || !under_pyc_root(ps, pl)) goto out;
    if (!audited || !IS_TYPE(audited, PyBytes_Type) || PyBytes_AsStringAndSize(audited, &ab, &an) < 0) goto out;
    ok = file_holds(ps, ab, an);
out:
    if (g) Py_DecRef(g);
    if (key) Py_DecRef(key);
    if (lkey) Py_DecRef(lkey);
    if (data) Py_DecRef(data);
    if (obj) Py_DecRef(obj);
    if (path) Py_DecRef(path);
    PyErr_Clear();
    return ok;
}

static int policy(const char *event, PyObject *args) {
    switch (event[0]) {
    case 's':
        if (strcmp(event, "sys.settrace") == 0 || strcmp(event, "sys.setprofile") == 0) {
            /* The tracer is the process's only trace function (it sets it from C). A trace or
             * profile function of the traced code's own would run inside every event. */
            if (native_settrace) return 0;
            return tamper("traced code called sys.settrace or sys.setprofile");
        }
        if (strcmp(event, "sys.addaudithook") == 0) {
            /* Refused quietly: CPython drops a RuntimeError from this event and adds no hook. A
             * hook of its own would see the tracer's audited operations and their arguments. */
            PyErr_SetString(PyExc_RuntimeError, "ndtrace: audit hooks are not available in the sandbox");
            return -1;
        }
        if (strncmp(event, "sys.monitoring.", 15) == 0)
            return tamper("traced code used sys.monitoring");
        if (strcmp(event, "sqlite3.enable_load_extension") == 0 || strcmp(event, "sqlite3.load_extension") == 0) {
            /* A SQLite extension is native code loaded without an import (and its check). */
            PyErr_SetString(PyExc_PermissionError, "ndtrace: SQLite extensions are not available in the sandbox");
            return -1;
        }
        return 0;
    case 'o':
        if (strcmp(event, "object.__setattr__") == 0) {
            /* A function of the tracer's given other code: its phase markers (test runs) would
             * no longer be where the tracer looks for them. */
            PyObject *obj = PyTuple_GetItem(args, 0), *nameo = PyTuple_GetItem(args, 1);
            const char *name = nameo ? PyUnicode_AsUTF8AndSize(nameo, NULL) : NULL;
            if (!obj || !name) {
                PyErr_Clear();
                return 0;
            }
            if (strcmp(name, "__code__") == 0 && IS_TYPE(obj, PyFunction_Type)) {
                PyObject *code = PyObject_GetAttrString(obj, "__code__");
                if (!code) {
                    PyErr_Clear();
                    return 0;
                }
                int hit = codeset_has(&trusted_codes, code);
                Py_DecRef(code);
                if (hit) return tamper("traced code replaced the code of a function of the tracer");
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
            /* The standard library's one use (types.coroutine sets a flag on a function's own
             * code) is allowed; the import system builds none (it unmarshals, checked below). */
            return caller_is(&import_codes, "coroutine") ? 0
                   : tamper("traced code built a code object (bytecode is not verified by CPython)");
        }
        return 0;
    case 'm':
        if (strcmp(event, "marshal.loads") == 0 || strcmp(event, "marshal.load") == 0) {
            /* Only the bytes of a .pyc under a read-only root, as importlib reads them (see
             * "unmarshalled bytecode"). importlib's and zipimport's unmarshalling of other bytes
             * is refused with an ImportError (zipimport then tries the archive's source, a
             * loader of a test's own fails its import); anything else is tampering (no honest
             * code unmarshals through the frozen-module path or marshal.load). */
            if (!caller_in(&import_codes))
                return tamper("traced code unmarshalled code (bytecode is not verified by CPython)");
            int compile_bytecode = event[12] == 's' && caller_is(&import_codes, "_compile_bytecode");
            if (compile_bytecode && bytecode_proven(PyEval_GetFrame(), PyTuple_GetItem(args, 0))) return 0;
            PyErr_Clear();
            if (!compile_bytecode && !(event[12] == 's' && caller_is(&import_codes, "_unmarshal_code")))
                return tamper("traced code unmarshalled code (bytecode is not verified by CPython)");
            PyErr_SetString(PyExc_ImportError, "ndtrace: bytecode is loaded only from .pyc files under read-only "
                                               "directories (the interpreter's and the sandbox's configured packages)");
            return -1;
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
            /* An extension module being loaded: args are (name, its file, None, None, None). */
            PyObject *path = PyTuple_GetItem(args, 1);
            if (!path) PyErr_Clear();
            if (path && path != Py_None && ext_roots && !ext_allowed(path)) {
                PyErr_Format(PyExc_ImportError,
                             "ndtrace: extension module %s is not available in the sandbox (native modules load only "
                             "from the standard library and the sandbox's configured packages)", name);
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

/* sys.settrace as the traced code sees it (issue 29). Restoring the trace function sys.gettrace()
 * returned is no change at all, and the standard library does it: doctest's DocTestRunner.run saves
 * sys.gettrace() and ends with sys.settrace(saved). The audit event "sys.settrace" carries no
 * argument, so the hook cannot tell that call from one that installs another function: this
 * replacement does nothing when its argument is (by identity) the object sys.gettrace() returns
 * now on this thread (the tracer's stand-in in a traced run, None in an untraced one), and calls
 * CPython's own sys.settrace otherwise, whose audit event is tampering as before. Nothing here
 * changes tracing state, so reaching CPython's original (kept by a module that imported it before)
 * gains nothing: it is audited. threading.settrace and sys.setprofile are untouched (audited). */
static PyObject *orig_settrace, *orig_gettrace;

static PyObject *nd_settrace(PyObject *self, PyObject *func) {
    PyObject *cur = PyObject_CallFunctionObjArgs(orig_gettrace, NULL);
    if (!cur) return NULL;
    int same = cur == func;
    Py_DecRef(cur);
    if (same) return none();
    return PyObject_CallFunctionObjArgs(orig_settrace, func, NULL);
}

static PyMethodDef settrace_def = {"settrace", nd_settrace, METH_O,
                                   "settrace(function)\n--\n\nSet the global debug tracing function."};

/* Put nd_settrace in place of sys.settrace (once per process, before any of the item's code). */
static int guard_settrace(void) {
    if (orig_settrace) return 0;
    PyObject *sys = PyImport_ImportModule("sys");
    if (!sys) return -1;
    orig_settrace = PyObject_GetAttrString(sys, "settrace");
    orig_gettrace = orig_settrace ? PyObject_GetAttrString(sys, "gettrace") : NULL;
    PyObject *fn = orig_gettrace ? PyCFunction_NewEx(&settrace_def, NULL, NULL) : NULL;
    int r = fn ? PyObject_SetAttrString(sys, "settrace", fn) : -1;
    if (fn) Py_DecRef(fn);
    Py_DecRef(sys);
    return r;
}

/* trust_codes(trusted, importlib): the code objects the audit hook and the tracer trust, the tracer
 * module's and the import system's (sequences of code objects). The zygote computes them once, before
 * any item exists: every item it forks inherits them here, in C memory, out of Python's reach (an item
 * that computed them itself spent about 2 ms and 400 page faults on it). */
static PyObject *nd_trust_codes(PyObject *self, PyObject *args) {
    PyObject *trusted, *imports;
    if (!PyArg_ParseTuple(args, "OO", &trusted, &imports) || refuse_sealed()) return NULL;
    if (trusted_codes.n) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: the trusted code is already set");
        return NULL;
    }
    if (codeset_fill(&trusted_codes, trusted) < 0 || codeset_fill(&import_codes, imports) < 0) return NULL;
    return none();
}

/* install_audit(deny_imports, tamper_imports, pyc_roots, ext_roots, ext_deny): the tracer's audit
 * policy for this process, over the code trust_codes set (tuples of str). */
static PyObject *nd_install_audit(PyObject *self, PyObject *args) {
    PyObject *deny, *tamper_mods, *roots, *eroots, *edeny;
    if (!PyArg_ParseTuple(args, "OOO!O!O!", &deny, &tamper_mods, PyTuple_Type, &roots, PyTuple_Type, &eroots,
                          PyTuple_Type, &edeny) ||
        refuse_sealed())
        return NULL;
    if (deny_imports) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: the audit hook is already installed");
        return NULL;
    }
    if (!trusted_codes.n) {
        PyErr_SetString(PyExc_RuntimeError, "ndtrace: trust_codes must come before install_audit");
        return NULL;
    }
    real_marshal = PyImport_ImportModule("marshal");
    if (!real_marshal) return NULL;
    real_marshal_type = TYPE(real_marshal);
    real_marshal_dict = PyModule_GetDict(real_marshal); /* borrowed: the module lives on */
    real_loads = PyObject_GetAttrString(real_marshal, "loads");
    if (!real_marshal_dict || !real_loads) return NULL;
    Py_IncRef(deny);
    deny_imports = deny;
    Py_IncRef(tamper_mods);
    tamper_imports = tamper_mods;
    Py_IncRef(roots);
    pyc_roots = roots;
    Py_IncRef(eroots);
    ext_roots = eroots;
    Py_IncRef(edeny);
    ext_deny = edeny;
    if (guard_settrace() < 0) return NULL;
    if (PySys_AddAuditHook(audit_hook, NULL) < 0) return NULL;
    return none();
}

static PyObject *nd_tampered(PyObject *self, PyObject *unused) { return PyBool_FromLong(tampered); }

/* trim_heap(): give the C heap's free memory back to the kernel (glibc's malloc_trim). The zygote
 * calls it once it has loaded what it keeps: compiling the tracer leaves about 12 MB of freed
 * compiler memory in the heap, which every fork would otherwise copy page-table entries of, every
 * exit tear down, and every item's allocations copy on write. A no-op elsewhere. */
static PyObject *nd_trim_heap(PyObject *self, PyObject *unused) {
    if (refuse_sealed()) return NULL;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    return none();
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"seal", nd_seal, METH_NOARGS, "Refuse every set-up function from now on."},
    {"set_dumpable", nd_set_dumpable, METH_VARARGS, "prctl(PR_SET_DUMPABLE, v)."},
    {"no_new_privs", nd_no_new_privs, METH_NOARGS, "prctl(PR_SET_NO_NEW_PRIVS, 1)."},
    {"unshare", nd_unshare, METH_VARARGS, "unshare(flags)."},
    {"mount", nd_mount, METH_VARARGS, "mount(source, target, fstype, flags, data)."},
    {"umount", nd_umount, METH_VARARGS, "umount2(target, flags)."},
    {"join_session_keyring", nd_join_session_keyring, METH_NOARGS, "A fresh anonymous session keyring."},
    {"drop_capabilities", nd_drop_capabilities, METH_NOARGS, "Empty every capability set, locked."},
    {"seccomp", nd_seccomp, METH_VARARGS, "Install a seccomp-BPF program (after no_new_privs)."},
    {"landlock_abi", nd_landlock_abi, METH_NOARGS, "The Landlock ABI version, 0 when unavailable."},
    {"landlock", nd_landlock, METH_VARARGS, "Restrict this process with Landlock: [(path, rights)]."},
    {"harden_frames", nd_harden_frames, METH_NOARGS, "Make the frame attributes that steer tracing read-only."},
    {"trust_codes", nd_trust_codes, METH_VARARGS, "Set the code objects the tracer trusts (the zygote, once)."},
    {"install_audit", nd_install_audit, METH_VARARGS, "Install the tracer's audit hook."},
    {"tampered", nd_tampered, METH_NOARGS, "Whether the audit hook saw tampering."},
    {"trim_heap", nd_trim_heap, METH_NOARGS, "Give the C heap's free memory back to the kernel."},
    {"spawn_item", nd_spawn_item, METH_VARARGS, "Fork an item's keeper, init and item (spawn.c)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module = {
    {{1, NULL}, NULL, 0, NULL}, "_ndtrace_native", "ndtrace's sandbox helper (sandbox/native).", -1, methods,
    NULL, NULL, NULL, NULL,
};

__attribute__((visibility("default"))) PyObject *PyInit__ndtrace_native(void) {
    PyObject *m = PyModule_Create2(&module, PYTHON_API_VERSION);
    if (!m) return NULL;
    if (tracer_module_init(m) < 0) return NULL;
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
