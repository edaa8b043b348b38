"""attribute.py: summaries of profile.sh's perf recordings (docs/sandbox.md, "What an item costs").

  attribute.py --kernel CPU.TXT                 the sandbox's CPU by kernel path, share of all its samples
  attribute.py --faults FAULTS.TXT MAPS PID     page faults per item by process role and mapping
  attribute.py --callers DWARF.TXT              samples under the native helper's and CPython's set-up functions
  attribute.py --zygote                         the pid of a running zygote (none: prints nothing)
"""
import os
import collections
import re
import sys

# Kernel paths, first match wins (a sample's stack is searched for each pattern in order).
KERNEL_PATHS = [("exit", "do_exit"), ("execve", "execve"), ("fork", "copy_process"), ("fork", "dup_mm"),
                ("page fault", "handle_mm_fault"), ("page fault", "exc_page_fault"), ("seccomp", "do_seccomp"),
                ("landlock", "landlock"), ("mount", "path_mount"), ("mount", "__x64_sys_mount"),
                ("umount", "cleanup_mnt"), ("unshare", "ksys_unshare"), ("open", "do_sys_openat2"),
                ("wait", "kernel_wait4"), ("read/write", "ksys_read"), ("read/write", "ksys_write"),
                ("read/write", "vfs_writev"), ("mmap", "do_mmap"), ("munmap", "__vm_munmap"),
                ("close", "close_range"), ("close", "__x64_sys_close"), ("other syscall", "do_syscall_64")]

CALLERS = ["nd_spawn_item", "PyOS_AfterFork_Child", "nd_seccomp", "nd_landlock", "nd_drop_capabilities",
           "nd_install_audit", "nd_tracer_setup", "nd_tracer_call", "Py_CompileStringObject", "HMAC",
           "do_exit", "copy_process", "exc_page_fault"]


def samples(path):
    """perf script's samples: (header line, [frames]), frames innermost first."""
    for block in open(path, errors="replace").read().split("\n\n"):
        lines = block.strip("\n").split("\n")
        if lines and lines[0].strip():
            yield lines[0], [ln.strip() for ln in lines[1:] if ln.strip()]


def kernel(path):
    by, total, kern = collections.Counter(), 0, 0
    for _, frames in samples(path):
        if not frames:
            continue
        total += 1
        if "kallsyms" not in frames[0]:
            continue
        kern += 1
        stack = "\n".join(frames)
        for name, pattern in KERNEL_PATHS:
            if pattern in stack:
                by[name] += 1
                break
        else:
            by["other kernel"] += 1
    print("sandbox processes: %d samples, %.1f%% in the kernel" % (total, 100 * kern / max(1, total)))
    for name, n in by.most_common():
        print("%6.1f%%  %s" % (100 * n / max(1, total), name))


def faults(path, maps_path, zygote):
    maps = []
    for line in open(maps_path):
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        maps.append((lo, hi, (f[5].rsplit("/", 1)[-1] if len(f) > 5 else "[anon]") + " " + f[1]))
    maps.sort()
    parent, events = {}, []
    for line in open(path, errors="replace"):
        m = re.match(r"\s*(.+?)\s+(\d+)/(\d+)\s+(\S+):\s*(.*)", line)
        if not m:
            continue
        tid, event, rest = int(m.group(3)), m.group(4), m.group(5)
        if event.startswith("sched"):
            child = re.search(r"child_pid=(\d+)", rest)
            if child:
                parent[int(child.group(1))] = tid
        elif rest.strip():
            events.append((tid, int(rest.split()[0], 16)))

    def role(tid):
        if tid == zygote:
            return "zygote"
        depth = 0
        while tid in parent and depth < 6:
            tid, depth = parent[tid], depth + 1
        return {1: "keeper", 2: "init", 3: "item"}.get(depth, "item's child") if tid == zygote else None

    count, procs = collections.Counter(), collections.defaultdict(set)
    for tid, addr in events:
        r = role(tid)
        if r is None:
            continue
        region = "unmapped when saved"
        for lo, hi, name in maps:
            if lo <= addr < hi:
                region = name
                break
        count[(r, region)] += 1
        procs[r].add(tid)
    items = max(1, len(procs["item"]))
    print("%d items; page faults per item:" % len(procs["item"]))
    per_role = collections.Counter()
    for (r, _), n in count.items():
        per_role[r] += n
    for r, n in per_role.most_common():
        print("  %-12s %7.1f" % (r, n / items))
    print("by mapping:")
    for (r, region), n in count.most_common(20):
        print("  %-12s %-40s %7.1f" % (r, region, n / items))


def callers(path):
    inc, total = collections.Counter(), 0
    for _, frames in samples(path):
        if not frames:
            continue
        total += 1
        names = {f.split(None, 1)[-1].split("+")[0] for f in frames}
        for c in CALLERS:
            if c in names:
                inc[c] += 1
    print("sandbox processes: %d samples; share under each function:" % total)
    for c in CALLERS:
        print("%6.1f%%  %s" % (100 * inc[c] / max(1, total), c))


def zygote():
    """A process running the tracer's bootstrap whose parent does not (keepers, inits and items
    are forks of the zygote and show its command line)."""
    procs = {}
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and b"/.ndtrace/common.py" in open("/proc/%s/cmdline" % p, "rb").read():
                procs[p] = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1]
        except OSError:
            pass
    for p, ppid in procs.items():
        if ppid not in procs:
            print(p)
            return


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--kernel":
        kernel(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "--faults":
        faults(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--callers":
        callers(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "--zygote":
        zygote()
    else:
        sys.exit(__doc__)
