// Package cgroup bounds the memory and processes of a sandbox's item as a whole, all of its
// processes together, with cgroup v2, where the worker has a delegated cgroup v2 group (as in
// Kubernetes with a writable cgroup, or a systemd service with Delegate=yes), or with cgroup v1
// where memory is bound to v1 and the worker may write its hierarchy.
//
// Detect finds and prepares the worker's group; each sandbox then gets a group of its own:
//
//	<delegated group>/                 Manager (the worker's cgroup v2 group)
//	    ndtrace-worker/                the worker process (and whatever shared its group), moved by Detect
//	    ndtrace-sb-<pid>-<n>-<random>/ one per Sandbox, memory and pids enabled for its children
//	        supervisor/                the zygote: started there with clone3(CLONE_INTO_CGROUP), see SupervisorDir
//	        item/                      the item being run: memory.max, memory.swap.max 0, memory.oom.group 1, pids.max
//
// The zygote gets ItemProcs, the item leaf's cgroup.procs opened for writing by the worker, as an
// inherited file descriptor. Its per-item child, before it does anything else, writes "0" to that
// descriptor (os.write(fd, b"0") in Python), which moves the writing process into the item leaf,
// then closes it: everything the item forks is born in the item leaf, and memory it touches from then
// on is charged there. The kernel (5.16+) judges that write by the credentials and cgroup namespace
// of the descriptor's opener, so it works from inside the sandbox's user, PID and cgroup namespaces
// and under the sandbox's uids, and no chown of the groups is needed. The descriptor carries the
// worker's right to move processes within its subtree: it must be closed before untrusted code runs
// (the item closes every descriptor it does not need anyway).
//
// After an item, OOMKills and PidsLimitHits tell whether it ran into its limits, PeakMemory how
// much memory it used (ResetPeakMemory before each item, Linux 6.12+), and KillItem empties the
// item leaf. Close kills what is left of the sandbox and removes its groups.
//
// # cgroup v1
//
// Where Detect fails because memory is bound to a cgroup v1 hierarchy (v1 and hybrid hosts),
// DetectV1 finds the worker's own groups in the v1 memory hierarchy and, optionally, the pids one,
// and checks that the worker may create groups there (in practice a root worker). Each sandbox
// then gets a V1Sandbox:
//
//	<worker's v1 memory group>/ndtrace-sb-<pid>-<n>-<random>-p<pidns>/item   memory.limit_in_bytes, memsw, swappiness 0
//	<worker's v1 pids group>/ndtrace-sb-<pid>-<n>-<random>-p<pidns>/item     pids.max
//
// The zygote stays in the worker's groups; only the item's processes enter item, through the
// cgroup.procs files V1Sandbox.ItemProcs opens (one per hierarchy, each written "0" by the item's
// keeper, as with v2). OOMKills reads the oom_kill count of memory.oom_control; cgroup v1 has no
// memory.oom.group, so an OOM kill ends one process of the item, not all of them (the sandbox
// watches OOMKills and ends the item itself), and no cgroup.kill, so KillItem and Close signal
// each process left. DetectV1 removes the empty groups of workers of its PID namespace (<pidns>,
// the namespace's inode) that no longer run: a worker killed before it closed its sandboxes.
//
// # Fallback
//
// Where neither can be used (a read-only or undelegated cgroup2 mount; a systemd unit without
// Delegate=yes; a v1 host and an unprivileged worker), Detect and DetectV1 return errors wrapping
// ErrUnavailable and ErrV1Unavailable that say why, and the sandbox keeps per-process limits only:
// RLIMIT_AS bounds the address space of each process of the item separately and RLIMIT_NPROC the
// number of its processes, and the sandbox lowers their product to the item's memory limit
// (docs/sandbox.md, "Resources"). Neither counts page cache or kernel memory, and memory
// exhaustion shows up as allocation failures (MemoryError) and refused forks rather than an OOM
// kill.
//
// # Delegation
//
// The worker needs write access to its group's directory, cgroup.procs and cgroup.subtree_control
// (the files the kernel's delegation model hands over), memory and pids listed in its
// cgroup.controllers (enabled by the parent), and a cgroup2 mount in its mount namespace that shows
// its group (its own cgroup namespace root, usually /sys/fs/cgroup). In Kubernetes on cgroup v2
// nodes a container has its own cgroup namespace and sees its group as /sys/fs/cgroup, mounted
// read-only unless the runtime makes it writable: privileged containers, containerd 2.1+'s
// cgroup_writable = true on the runtime handler (a RuntimeClass), CRI-O's annotation
// io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw, GKE's writable cgroups, and in time the
// securityContext field of KEP-5474. The group's files then belong to root: a worker running as
// another uid needs them chowned to it first (by a root entrypoint or init step: the directory,
// cgroup.procs, cgroup.threads, cgroup.subtree_control). A systemd service needs Delegate=yes
// (systemd 251+ marks the group with the xattr Detect checks).
package cgroup
