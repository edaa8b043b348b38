/*
 * spawn.c: an item's keeper and init in C (spawn_item), so that the two processes that only build
 * the item's namespaces never run Python.
 *
 * They are forks of the zygote, a warm interpreter: run as Python (item.py's _keeper and
 * _item_init), each took about 230 copy-on-write page faults and a Python process's start and exit
 * of CPU per item, for a few dozen system calls. Here each touches a few pages of C stack. They do
 * exactly what _keeper and _item_init do, in the same order and with the same failures (a line on
 * the item's stderr, exit EXIT_SETUP), and item.py keeps that Python path for the items this one
 * does not serve: those with a writable checkout view (its overlay or copy is Python's).
 * docs/sandbox.md ("What an item costs") has the measurements.
 *
 * Only the item returns into Python (PyOS_AfterFork_Child runs in it alone); the keeper and the
 * init end with _exit and call no Python API after their fork.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>

#include "native.h"

#define EXIT_SETUP 97
#define CODE_UID 1000
#define MAX_FDS 16

struct spawn {
    int sock;                 /* the control socket: the zygote's alone */
    int fds[MAX_FDS], nfds;   /* the item's pipes */
    int cg[MAX_FDS], ncg;     /* the item group's cgroup.procs, one per hierarchy */
    long drop_uid, drop_gid;  /* -1: keep the zygote's */
    long long tmp_bytes, shm_bytes;
    int landlock;             /* the item will be under Landlock */
    int ro_sysctl;            /* tests: sysctls that cannot be written */
    int no_proc;              /* tests: no /proc of the item's own (a runtime that masks /proc) */
};

/* Best effort, as item.py's _report_setup_failure: the reason on the item's stderr pipe (fds[3]:
 * the item's pipes are its request, events, stdout and stderr). */
static void report(const struct spawn *s, const char *what, int err, const char *detail) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "ndtrace: %s failed: [Errno %d] %s (%s)\n", what, err, strerror(err), detail);
    if (s->nfds > 3 && n > 0) {
        ssize_t w = write(s->fds[3], buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w;
    }
}

static void close_item_fds(const struct spawn *s) {
    for (int i = 0; i < s->nfds; i++) close(s->fds[i]);
}

static int write_file(const char *path, const char *data) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t n = strlen(data);
    ssize_t w = write(fd, data, n);
    int err = errno;
    close(fd);
    if (w != (ssize_t)n) {
        errno = w < 0 ? err : EIO;
        return -1;
    }
    return 0;
}

/* End this process the way the process with wait status `status` ended (item.py's _mirror_exit). */
static void mirror_exit(int status) {
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit zero = {0, 0};
        sigset_t set;
        /* As Python's: a signal that cannot be reset (SIGKILL, SIGSTOP) ends it with 128+sig. */
        if (signal(sig, SIG_DFL) != SIG_ERR && setrlimit(RLIMIT_CORE, &zero) == 0) {
            sigemptyset(&set);
            sigaddset(&set, sig);
            sigprocmask(SIG_UNBLOCK, &set, NULL);
            kill(getpid(), sig);
        }
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_SETUP);
}

/* The item's init after its fork of the item (item.py's _item_init, from "pid = os.fork()"):
 * maps the item's user namespace when it asks, hides /proc where the item may not have it, reaps
 * everything, reports the item's wait status to the keeper. Never returns. */
static void init_wait(const struct spawn *s, pid_t pid, int status_w, int to_init, int from_init, int have_proc) {
    /* The item's pipes stay open until the handshake is done: a failure is reported on its stderr. */
    char c = 0, path[64], map[64];
    int failed = 0;
    if (read(to_init, &c, 1) == 1 && c == 'u') {
        snprintf(map, sizeof map, "%d 0 1\n", CODE_UID);
        const char *step = "uid_map";
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
        int ok = write_file(path, map) == 0;
        if (ok) {
            step = "setgroups";
            snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
            ok = write_file(path, "deny") == 0;
        }
        if (ok) {
            step = "gid_map";
            snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
            ok = write_file(path, map) == 0;
        }
        if (ok && !(have_proc && s->landlock)) {
            /* Without Landlock nothing would keep the item from its own /proc/self/mem; without a
             * /proc of its own, the sandbox's would show the zygote: it gets no /proc at all. */
            step = "tmpfs over /proc";
            ok = mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4096,mode=0555") == 0;
        }
        if (ok) ok = write(from_init, "g", 1) == 1;
        if (!ok) {
            report(s, "item user namespace", errno, step);
            kill(pid, SIGKILL);
            failed = 1;
        }
    }
    close_item_fds(s);
    close(to_init);
    close(from_init);
    int status = EXIT_SETUP << 8;
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, 0);
        if (p < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p == pid) {
            status = failed ? EXIT_SETUP << 8 : st; /* the SIGKILL was ours, not the item's end */
            break;
        }
    }
    char buf[16];
    int n = snprintf(buf, sizeof buf, "%d", status);
    ssize_t w = write(status_w, buf, (size_t)n);
    (void)w;
    _exit(0);
}

/* The item's init before its fork of the item (item.py's _item_init up to "pid = os.fork()"):
 * its own /proc, IPC limits, /tmp and /dev/shm. Returns 0, or -1 with the step that failed. */
static int init_mounts(const struct spawn *s, int *have_proc, int *ipc_limited, const char **step) {
    unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    char data[96];
    *step = "make / private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
    /* A container runtime that masks parts of /proc forbids a fresh one: the item then gets none. */
    *have_proc = !s->no_proc && mount("proc", "/proc", "proc", flags, NULL) == 0;
    long long shm = s->shm_bytes > 4096 ? s->shm_bytes : 4096;
    char shmmax[32], shmall[32];
    snprintf(shmmax, sizeof shmmax, "%lld", shm);
    snprintf(shmall, sizeof shmall, "%lld", shm / 4096);
    const char *sysctls[][2] = {{"/proc/sys/kernel/shm_rmid_forced", "1"}, {"/proc/sys/kernel/shmmax", shmmax},
                                {"/proc/sys/kernel/shmall", shmall},      {"/proc/sys/kernel/shmmni", "64"},
                                {"/proc/sys/kernel/msgmni", "16"},        {"/proc/sys/kernel/msgmnb", "65536"},
                                {"/proc/sys/kernel/msgmax", "8192"}};
    *ipc_limited = !s->ro_sysctl;
    for (size_t i = 0; *ipc_limited && i < sizeof sysctls / sizeof sysctls[0]; i++)
        if (write_file(sysctls[i][0], sysctls[i][1]) != 0) *ipc_limited = 0;
    write_file("/proc/sys/user/max_user_namespaces", "1"); /* seccomp refuses both anyway */
    write_file("/proc/sys/vm/memfd_noexec", "2");
    *step = "tmpfs on /tmp";
    snprintf(data, sizeof data, "size=%lld,mode=1777", s->tmp_bytes);
    if (mount("tmpfs", "/tmp", "tmpfs", flags, data) != 0) return -1;
    *step = "tmpfs on /dev/shm";
    snprintf(data, sizeof data, "size=%lld,mode=1777", shm);
    if (mount("tmpfs", "/dev/shm", "tmpfs", flags, data) != 0) return -1;
    if (*have_proc) {
        *step = "read-only /proc/sys";
        if (mount("/proc/sys", "/proc/sys", NULL, MS_BIND | MS_REC, NULL) != 0) return -1;
        if (mount(NULL, "/proc/sys", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, NULL) != 0) return -1;
    }
    return 0;
}

/* The keeper's set-up (item.py's _keeper up to its fork): the zygote's identity left, the item's
 * user, mount, PID and IPC namespaces created. Returns 0, or -1 with the step that failed. */
static int keeper_setup(const struct spawn *s, const char **step) {
    close(s->sock);
    *step = "setsid";
    if (setsid() < 0) return -1;
    for (int i = 0; i < s->ncg; i++) {
        /* "0" moves this process, and so everything it forks, into the item's group. */
        *step = "join the item's cgroup";
        if (write(s->cg[i], "0", 1) != 1) return -1;
        close(s->cg[i]);
    }
    if (s->drop_uid >= 0) {
        *step = "drop to the code uid";
        if (setgroups(0, NULL) != 0 || setresgid(s->drop_gid, s->drop_gid, s->drop_gid) != 0 ||
            setresuid(s->drop_uid, s->drop_uid, s->drop_uid) != 0)
            return -1;
    }
    *step = "dumpable";
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return -1; /* our /proc/self/ *_map stay ours */
    uid_t uid = geteuid();
    gid_t gid = getegid();
    *step = "unshare";
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC) != 0) return -1;
    char map[64];
    *step = "uid_map";
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
    if (write_file("/proc/self/uid_map", map) != 0) return -1;
    *step = "setgroups";
    if (write_file("/proc/self/setgroups", "deny") != 0) return -1;
    *step = "gid_map";
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
    if (write_file("/proc/self/gid_map", map) != 0) return -1;
    *step = "dumpable";
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return -1;
    return 0;
}

static int fill_fds(PyObject *seq, int *out, int *n, const char *what) {
    Py_ssize_t len = PyTuple_Size(seq);
    if (len < 0) return -1;
    if (len > MAX_FDS) {
        PyErr_Format(PyExc_ValueError, "spawn_item: too many %s", what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long v = PyLong_AsLong(PyTuple_GetItem(seq, i));
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || v > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "spawn_item: bad file descriptor");
            return -1;
        }
        out[i] = (int)v;
    }
    *n = (int)len;
    return 0;
}

/* spawn_item(sock, fds, cgroup_fds, drop_uid, drop_gid, tmp_bytes, shm_bytes, landlock,
 * ro_sysctl, no_proc): fork the item's keeper, which creates its namespaces and forks its init,
 * which mounts its /proc, /tmp and /dev/shm and forks the item. Returns the keeper's pid in the zygote,
 * and (to_item, from_item, ipc_limited) in the item: its end of the handshake with its init
 * (item.py's opts.sync) and whether its IPC namespace has limits. */
PyObject *nd_spawn_item(PyObject *self, PyObject *args) {
    struct spawn s;
    PyObject *fds, *cg;
    memset(&s, 0, sizeof s);
    if (!PyArg_ParseTuple(args, "iO!O!llLLppp", &s.sock, PyTuple_Type, &fds, PyTuple_Type, &cg, &s.drop_uid,
                          &s.drop_gid, &s.tmp_bytes, &s.shm_bytes, &s.landlock, &s.ro_sysctl, &s.no_proc) ||
        refuse_sealed())
        return NULL;
    if (fill_fds(fds, s.fds, &s.nfds, "item descriptors") < 0 || fill_fds(cg, s.cg, &s.ncg, "cgroup descriptors") < 0)
        return NULL;
    if ((s.drop_uid < 0) != (s.drop_gid < 0)) {
        PyErr_SetString(PyExc_ValueError, "spawn_item: drop_uid and drop_gid go together");
        return NULL;
    }
    PyOS_BeforeFork();
    pid_t keeper = fork();
    if (keeper != 0) {
        int err = errno;
        PyOS_AfterFork_Parent();
        if (keeper < 0) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        return PyLong_FromLong(keeper);
    }

    /* The keeper: C from here on. */
    const char *step = "";
    int status_pipe[2];
    if (keeper_setup(&s, &step) != 0 || (step = "pipe", pipe2(status_pipe, O_CLOEXEC) != 0)) {
        report(&s, "item namespaces", errno, step);
        _exit(EXIT_SETUP);
    }
    pid_t init = fork();
    if (init < 0) {
        report(&s, "item namespaces", errno, "fork the item's init");
        _exit(EXIT_SETUP);
    }
    if (init > 0) {
        close(status_pipe[1]);
        close_item_fds(&s);
        int status = EXIT_SETUP << 8;
        while (waitpid(init, &status, 0) < 0 && errno == EINTR) {
        }
        char buf[32];
        ssize_t n;
        while ((n = read(status_pipe[0], buf, sizeof buf - 1)) < 0 && errno == EINTR) {
        }
        if (n > 0) {
            /* The item's own wait status, as its init saw it; else the init's. */
            buf[n] = 0;
            char *end;
            long v = strtol(buf, &end, 10);
            if (end != buf && *end == 0) status = (int)v;
        }
        mirror_exit(status);
    }

    /* The item's init: PID 1 of the item's PID namespace, root of its user namespace. */
    close(status_pipe[0]);
    int have_proc = 0, ipc_limited = 0, sync_a[2], sync_b[2];
    if (init_mounts(&s, &have_proc, &ipc_limited, &step) != 0 ||
        (step = "pipes", pipe2(sync_a, O_CLOEXEC) != 0 || pipe2(sync_b, O_CLOEXEC) != 0)) {
        report(&s, "item mounts", errno, step);
        _exit(EXIT_SETUP);
    }
    /* sync_a: init -> item (to_item is its read end); sync_b: item -> init. */
    int to_item = sync_a[0], from_init = sync_a[1], to_init = sync_b[0], from_item = sync_b[1];
    pid_t item = fork();
    if (item < 0) {
        report(&s, "item mounts", errno, "fork the item");
        _exit(EXIT_SETUP);
    }
    if (item > 0) {
        close(to_item);
        close(from_item);
        init_wait(&s, item, status_pipe[1], to_init, from_init, have_proc);
    }

    /* The item: back to Python. */
    close(status_pipe[1]);
    close(from_init);
    close(to_init);
    PyOS_AfterFork_Child();
    PyObject *got = Py_BuildValue("(iiN)", to_item, from_item, PyBool_FromLong(ipc_limited));
    if (!got) _exit(EXIT_SETUP); /* an error would unwind into the zygote's loop, in the item */
    return got;
}
