// Package seccomp builds the seccomp-BPF filter every traced item process
// runs under.
//
// The policy is Docker's default seccomp profile
// (github.com/moby/profiles/seccomp), resolved for a process without any
// capability, for the running kernel and for the native architecture, and
// assembled with github.com/elastic/go-seccomp-bpf. On top of that profile
// the filter refuses these syscalls with EPERM, whatever the profile says:
//
//   - ptrace, process_vm_readv, process_vm_writev, process_madvise,
//     pidfd_getfd, kcmp: they read or steer other processes;
//   - keyctl, add_key, request_key: kernel keyrings are not namespaced;
//   - mount, umount, umount2, move_mount, open_tree, fsopen, fsconfig,
//     fsmount, fspick, mount_setattr, pivot_root, chroot: they change the
//     filesystem view the sandbox set up;
//   - unshare, setns: new namespaces (user namespaces above all) open much
//     more kernel to the process;
//   - bpf, perf_event_open, io_uring_setup, io_uring_enter,
//     io_uring_register, userfaultfd: large kernel attack surfaces and common
//     exploit primitives;
//   - kexec_load, kexec_file_load, init_module, finit_module, delete_module:
//     they replace or extend the kernel;
//   - memfd_create, memfd_secret: code and data that never touch the
//     filesystem;
//   - open_by_handle_at, name_to_handle_at: file handles bypass the mount
//     namespace;
//   - lookup_dcookie, quotactl, quotactl_fd, acct, swapon, swapoff, reboot,
//     syslog, vhangup, fanotify_init, iopl, ioperm: host administration and
//     raw hardware access.
//
// Besides, clone with any CLONE_NEW* flag fails with EPERM (namespaces, as
// above); clone3 fails with ENOSYS so that glibc and CPython fall back to
// clone, whose flags a filter can inspect; personality is limited to the
// values Docker allows; and socket is limited to Docker's address families
// minus AF_NETLINK, AF_PACKET, AF_ALG and AF_VSOCK (kernel configuration,
// raw frames, kernel crypto and host/guest channels). Every other syscall the
// profile does not allow fails with EPERM, and so does every syscall made
// through another ABI of the machine (i386's int 0x80 on x86_64); syscalls of
// x86_64's x32 ABI fail with ENOSYS.
//
// Nothing here installs the filter: the sandbox's native helper installs
// Program in each item process with seccomp(SECCOMP_SET_MODE_FILTER), after
// setting no_new_privs, before the item's code runs.
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	docker "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// denied lists the syscalls refused with EPERM whatever Docker's profile says.
var denied = []string{
	// Other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
	// Keyrings.
	"keyctl", "add_key", "request_key",
	// Filesystem view.
	"mount", "umount", "umount2", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
	"fspick", "mount_setattr", "pivot_root", "chroot",
	// Namespaces.
	"unshare", "setns",
	// Kernel attack surface.
	"bpf", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
	// The kernel itself.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	// Memory-only files.
	"memfd_create", "memfd_secret",
	// File handles.
	"open_by_handle_at", "name_to_handle_at",
	// Host administration and hardware.
	"lookup_dcookie", "quotactl", "quotactl_fd", "acct", "swapon", "swapoff", "reboot", "syslog",
	"vhangup", "fanotify_init", "iopl", "ioperm",
}

// cloneNewFlags are the clone flags that create namespaces.
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// deniedSocketFamilies are refused even where Docker's profile allows them.
var deniedSocketFamilies = []uint64{unix.AF_NETLINK, unix.AF_PACKET, unix.AF_ALG, unix.AF_VSOCK}

// narrowed holds conditions ANDed to every argument check with which the
// profile allows a syscall: clone's flags (argument 0 on every architecture
// go-seccomp-bpf has a syscall table for) carry no CLONE_NEW* flag, and
// socket's family is none of deniedSocketFamilies.
var narrowed = map[string]bpfseccomp.ArgumentConditions{
	"clone":  {{Argument: 0, Operation: bpfseccomp.BitsNotSet, Value: cloneNewFlags}},
	"socket": notEqual(0, deniedSocketFamilies),
}

// Errno actions of the filter.
const (
	errnoEPERM  = bpfseccomp.ActionErrno | bpfseccomp.Action(unix.EPERM)
	errnoENOSYS = bpfseccomp.ActionErrno | bpfseccomp.Action(unix.ENOSYS)
)

// maxInstructions is the kernel's limit on a filter's length (BPF_MAXINSNS).
const maxInstructions = 4096

// sysvIPC are the calls that create System V IPC objects. An item's IPC namespace bounds them
// through sysctls the item's init sets; where it cannot (no /proc it may mount or write: a
// masked /proc in a container), the item runs under ProgramWithoutSysV instead.
var sysvIPC = []string{"shmget", "msgget", "semget", "ipc"}

var (
	program       = sync.OnceValues(func() ([]byte, error) { return build(denied) })
	programNoSysV = sync.OnceValues(func() ([]byte, error) { return build(append(slices.Clone(denied), sysvIPC...)) })
)

// Program returns the filter as raw sock_filter instructions in native byte
// order (8 bytes each: code u16, jt u8, jf u8, k u32), ready for
// seccomp(SECCOMP_SET_MODE_FILTER) / a struct sock_fprog. It is computed once;
// each call returns a fresh copy. It is safe for concurrent use.
func Program() ([]byte, error) {
	p, err := program()
	if err != nil {
		return nil, err
	}
	return slices.Clone(p), nil
}

// ProgramWithoutSysV is Program that also refuses to create System V shared memory, message
// queues and semaphores (EPERM), for items whose IPC namespace cannot be given limits.
func ProgramWithoutSysV() ([]byte, error) {
	p, err := programNoSysV()
	if err != nil {
		return nil, err
	}
	return slices.Clone(p), nil
}

// Denied lists the syscall names the filter refuses outright (for docs and
// tests), sorted. Names without a number on the native architecture are left
// out.
func Denied() []string {
	names := slices.Clone(denied)
	if info, err := arch.GetInfo(""); err == nil {
		names = slices.DeleteFunc(names, func(name string) bool {
			_, ok := info.SyscallNames[name]
			return !ok
		})
	}
	slices.Sort(names)
	return names
}

// build resolves Docker's profile, adds the sandbox's denials (deny) and assembles
// the filter for the native architecture.
func build(deny []string) ([]byte, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: native architecture: %w", err)
	}
	// A spec with empty capability sets: the rules Docker keeps for
	// CAP_SYS_ADMIN, CAP_SYS_PTRACE and the like are left out.
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	profile, err := docker.GetDefaultProfile(spec)
	if err != nil {
		return nil, fmt.Errorf("seccomp: resolving Docker's default profile: %w", err)
	}
	if profile == nil {
		return nil, errors.New("seccomp: Docker's default profile resolved to no filter")
	}
	policy, err := newPolicy(profile, info.SyscallNames, deny)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	instructions, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling the policy: %w", err)
	}
	// Long jumps inside a group come out wrong from go-seccomp-bpf (a
	// backward "ja" was seen); groups are kept short enough to need none.
	// Check that it inserted none, neither jumps nor copies of returns: the
	// only jump may skip the program for a foreign architecture, at index
	// 2, and the returns are one per group, the default's and x32's.
	want := 1
	if info.ID == arch.X86_64.ID {
		want++
	}
	for _, g := range policy.Syscalls {
		if len(g.Names)+len(g.NamesWithCondtions) > 0 {
			want++
		}
	}
	rets := 0
	for i, ins := range instructions {
		switch ins.(type) {
		case bpf.RetConstant:
			rets++
		case bpf.Jump:
			if i != 2 {
				return nil, fmt.Errorf("seccomp: go-seccomp-bpf inserted a long jump at instruction %d", i)
			}
		}
	}
	if rets != want {
		return nil, fmt.Errorf("seccomp: go-seccomp-bpf inserted long jumps (%d returns, want %d)", rets, want)
	}
	if _, err := bpf.NewVM(instructions); err != nil {
		return nil, fmt.Errorf("seccomp: invalid filter: %w", err)
	}
	raw, err := bpf.Assemble(instructions)
	if err != nil {
		return nil, fmt.Errorf("seccomp: encoding the filter: %w", err)
	}
	if len(raw) > maxInstructions {
		return nil, fmt.Errorf("seccomp: filter has %d instructions, the kernel takes at most %d", len(raw), maxInstructions)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.NativeEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}

// newPolicy translates a resolved runtime-spec profile into a go-seccomp-bpf
// policy for an architecture whose syscall numbers are known, the sandbox's
// rules first. The first group that matches a syscall decides its fate.
//
// go-seccomp-bpf (v1.6.0) does not reload the syscall number after a failed
// argument check: the groups after it compare an argument word with syscall
// numbers. So the groups without argument checks come first, and the
// syscalls allowed under conditions come last, in an order that makes a
// failed check harmless (see conditionalGroups).
func newPolicy(profile *specs.LinuxSeccomp, known map[string]int, denied []string) (bpfseccomp.Policy, error) {
	def, err := action(profile.DefaultAction, profile.DefaultErrnoRet)
	if err != nil {
		return bpfseccomp.Policy{}, fmt.Errorf("default action: %w", err)
	}
	if def != errnoEPERM {
		return bpfseccomp.Policy{}, fmt.Errorf("default action is %s (%#x), want ERRNO(EPERM)", profile.DefaultAction, uint32(def))
	}
	overridden := map[string]bool{"clone3": true}
	for _, name := range denied {
		overridden[name] = true
	}
	policy := bpfseccomp.Policy{
		// Plain ActionErrno: go-seccomp-bpf validates the default action
		// against its named actions and returns EPERM for it.
		DefaultAction: bpfseccomp.ActionErrno,
	}
	policy.Syscalls = append(policy.Syscalls, groups(knownNames(denied, known, nil), errnoEPERM)...)
	policy.Syscalls = append(policy.Syscalls, groups(knownNames([]string{"clone3"}, known, nil), errnoENOSYS)...)

	// actions holds the action of each syscall the profile rules on without
	// argument checks; sets holds the argument checks (ORed) under which it
	// allows the others, and conditional those in the profile's order.
	actions := make(map[string]bpfseccomp.Action)
	sets := make(map[string][]bpfseccomp.ArgumentConditions)
	var conditional []string
	for i, rule := range profile.Syscalls {
		act, err := action(rule.Action, rule.ErrnoRet)
		if err != nil {
			return bpfseccomp.Policy{}, fmt.Errorf("profile rule %d %v: %w", i, rule.Names, err)
		}
		names := knownNames(rule.Names, known, overridden)
		for _, name := range names {
			// libseccomp does not depend on the order of rules, the
			// policy does: profiles where it would matter are refused.
			_, cond := sets[name]
			prev, uncond := actions[name]
			if len(rule.Args) == 0 && cond || len(rule.Args) > 0 && uncond {
				return bpfseccomp.Policy{}, fmt.Errorf("profile rule %d: %s has rules with and without argument checks", i, name)
			}
			if uncond && prev != act {
				return bpfseccomp.Policy{}, fmt.Errorf("profile rule %d: %s has actions %#x and %#x", i, name, uint32(prev), uint32(act))
			}
		}
		if len(rule.Args) == 0 {
			for _, name := range names {
				actions[name] = act
			}
			policy.Syscalls = append(policy.Syscalls, groups(names, act)...)
			continue
		}
		if act != bpfseccomp.ActionAllow {
			return bpfseccomp.Policy{}, fmt.Errorf("profile rule %d %v: argument checks on action %s", i, rule.Names, rule.Action)
		}
		ruleSets, err := conditionSets(rule.Args)
		if err != nil {
			return bpfseccomp.Policy{}, fmt.Errorf("profile rule %d %v: %w", i, rule.Names, err)
		}
		if slices.ContainsFunc(rule.Args, func(a specs.LinuxSeccompArg) bool { return a.Index != 0 }) {
			return bpfseccomp.Policy{}, fmt.Errorf("profile rule %d %v: argument checks beyond argument 0 are not supported", i, rule.Names)
		}
		for _, name := range names {
			if _, ok := sets[name]; !ok {
				conditional = append(conditional, name)
			}
			sets[name] = append(sets[name], ruleSets...)
		}
	}

	for name, extra := range narrowed {
		if _, ok := actions[name]; ok {
			return bpfseccomp.Policy{}, fmt.Errorf("profile allows %s without argument checks, the sandbox narrows it", name)
		}
		if _, ok := sets[name]; ok {
			sets[name] = narrow(sets[name], extra)
		}
	}
	last, err := conditionalGroups(conditional, sets, known)
	if err != nil {
		return bpfseccomp.Policy{}, err
	}
	policy.Syscalls = append(policy.Syscalls, last...)
	return policy, nil
}

// maxGroup is the most syscalls an unconditional group holds: more would
// need long jumps.
const maxGroup = 200

// groups returns groups of at most maxGroup names taking action.
func groups(names []string, act bpfseccomp.Action) []bpfseccomp.SyscallGroup {
	var out []bpfseccomp.SyscallGroup
	for chunk := range slices.Chunk(names, maxGroup) {
		out = append(out, bpfseccomp.SyscallGroup{Names: chunk, Action: act})
	}
	return out
}

// conditionalGroups returns the last groups of the policy, one per syscall
// allowed under conditions, in which it is allowed when one of its
// condition sets holds. It refuses sets under which go-seccomp-bpf's missing
// reload could allow a syscall.
//
// All checks must be on argument 0. Once a syscall's checks have failed, the
// accumulator holds a 32-bit word of that argument, v, and the groups that
// follow compare it with their syscall numbers. A group entered that way
// checks the same v, one of whose words equals its number. If the group
// allows only values below 2^32 (it is bounded), v must equal its number;
// allowing v is then harmless if every group before it allows v too (the
// group that failed did not refuse it). An unbounded group goes first, where
// the syscall number is intact; there can be only one.
func conditionalGroups(names []string, sets map[string][]bpfseccomp.ArgumentConditions, known map[string]int) ([]bpfseccomp.SyscallGroup, error) {
	var first, rest []string
	for _, name := range names {
		switch {
		case len(sets[name]) == 0:
			// Narrowed to nothing: refused by default.
		case bounded(sets[name]):
			rest = append(rest, name)
		default:
			first = append(first, name)
		}
	}
	if len(first) > 1 {
		return nil, fmt.Errorf("%v allow argument values of 2^32 and more, only one syscall can", first)
	}
	order := append(first, rest...)
	var out []bpfseccomp.SyscallGroup
	for j, name := range order {
		nr := uint64(known[name])
		if j > 0 && nr == 0 {
			return nil, fmt.Errorf("%s: syscall number 0 cannot follow another conditional syscall", name)
		}
		if j > 0 && allows(sets[name], nr) {
			for _, before := range order[:j] {
				if !allows(sets[before], nr) {
					return nil, fmt.Errorf("%s allows argument %d, its own number, which %s refuses", name, nr, before)
				}
			}
		}
		group := bpfseccomp.SyscallGroup{Action: bpfseccomp.ActionAllow}
		for _, set := range sets[name] {
			group.NamesWithCondtions = append(group.NamesWithCondtions, bpfseccomp.NameWithConditions{Name: name, Conditions: set})
		}
		out = append(out, group)
	}
	return out, nil
}

// bounded reports whether every set has a check that keeps argument 0
// below 2^32.
func bounded(sets []bpfseccomp.ArgumentConditions) bool {
	return !slices.ContainsFunc(sets, func(set bpfseccomp.ArgumentConditions) bool {
		return !slices.ContainsFunc(set, func(c bpfseccomp.Condition) bool {
			switch c.Operation {
			case bpfseccomp.Equal, bpfseccomp.LessOrEqual:
				return c.Value < 1<<32
			case bpfseccomp.LessThan:
				return c.Value <= 1<<32
			}
			return false
		})
	})
}

// allows reports whether one of the sets holds when argument 0 is v (all
// checks are on argument 0).
func allows(sets []bpfseccomp.ArgumentConditions, v uint64) bool {
	return slices.ContainsFunc(sets, func(set bpfseccomp.ArgumentConditions) bool {
		for _, c := range set {
			var ok bool
			switch c.Operation {
			case bpfseccomp.Equal:
				ok = v == c.Value
			case bpfseccomp.NotEqual:
				ok = v != c.Value
			case bpfseccomp.GreaterThan:
				ok = v > c.Value
			case bpfseccomp.LessThan:
				ok = v < c.Value
			case bpfseccomp.GreaterOrEqual:
				ok = v >= c.Value
			case bpfseccomp.LessOrEqual:
				ok = v <= c.Value
			case bpfseccomp.BitsSet:
				ok = v&c.Value != 0
			case bpfseccomp.BitsNotSet:
				ok = v&c.Value == 0
			}
			if !ok {
				return false
			}
		}
		return true
	})
}

// narrow ANDs extra to every set (all checks are on argument 0), leaving
// out what a set already implies: a set that pins the argument is kept as
// it is or dropped, and a value a set excludes needs no NotEqual.
func narrow(sets []bpfseccomp.ArgumentConditions, extra bpfseccomp.ArgumentConditions) []bpfseccomp.ArgumentConditions {
	var out []bpfseccomp.ArgumentConditions
	for _, set := range sets {
		if i := slices.IndexFunc(set, func(c bpfseccomp.Condition) bool { return c.Operation == bpfseccomp.Equal }); i >= 0 {
			if allows([]bpfseccomp.ArgumentConditions{extra}, set[i].Value) {
				out = append(out, set)
			}
			continue
		}
		narrowed := slices.Clone(set)
		for _, c := range extra {
			if c.Operation != bpfseccomp.NotEqual || allows([]bpfseccomp.ArgumentConditions{set}, c.Value) {
				narrowed = append(narrowed, c)
			}
		}
		out = append(out, narrowed)
	}
	return out
}

// notEqual returns conditions that argument arg is none of values.
func notEqual(arg uint32, values []uint64) bpfseccomp.ArgumentConditions {
	var out bpfseccomp.ArgumentConditions
	for _, v := range values {
		out = append(out, bpfseccomp.Condition{Argument: arg, Operation: bpfseccomp.NotEqual, Value: v})
	}
	return out
}

// conditionSets translates a rule's argument checks into sets of conditions;
// a syscall matches when every condition of one set holds. This is runc's
// reading of a rule: its checks are ANDed in one set, unless one argument is
// checked twice, in which case each check is a set of its own (ORed).
func conditionSets(args []specs.LinuxSeccompArg) ([]bpfseccomp.ArgumentConditions, error) {
	var all bpfseccomp.ArgumentConditions
	seen := make(map[uint]bool)
	repeated := false
	for _, arg := range args {
		c, err := condition(arg)
		if err != nil {
			return nil, err
		}
		repeated = repeated || seen[arg.Index]
		seen[arg.Index] = true
		all = append(all, c)
	}
	if !repeated {
		return []bpfseccomp.ArgumentConditions{all}, nil
	}
	sets := make([]bpfseccomp.ArgumentConditions, len(all))
	for i, c := range all {
		sets[i] = bpfseccomp.ArgumentConditions{c}
	}
	return sets, nil
}

// condition translates one argument check. Anything go-seccomp-bpf cannot
// express exactly is an error rather than a wider match.
func condition(arg specs.LinuxSeccompArg) (bpfseccomp.Condition, error) {
	if arg.Index > 5 {
		return bpfseccomp.Condition{}, fmt.Errorf("argument index %d out of range", arg.Index)
	}
	ops := map[specs.LinuxSeccompOperator]bpfseccomp.Operation{
		specs.OpEqualTo:      bpfseccomp.Equal,
		specs.OpNotEqual:     bpfseccomp.NotEqual,
		specs.OpLessThan:     bpfseccomp.LessThan,
		specs.OpLessEqual:    bpfseccomp.LessOrEqual,
		specs.OpGreaterThan:  bpfseccomp.GreaterThan,
		specs.OpGreaterEqual: bpfseccomp.GreaterOrEqual,
		// (arg & value) == 0, the only masked form go-seccomp-bpf has.
		specs.OpMaskedEqual: bpfseccomp.BitsNotSet,
	}
	op, ok := ops[arg.Op]
	if !ok {
		return bpfseccomp.Condition{}, fmt.Errorf("unsupported operator %q on argument %d", arg.Op, arg.Index)
	}
	if arg.ValueTwo != 0 {
		return bpfseccomp.Condition{}, fmt.Errorf("unsupported operator %q with second value %#x on argument %d", arg.Op, arg.ValueTwo, arg.Index)
	}
	return bpfseccomp.Condition{Argument: uint32(arg.Index), Operation: op, Value: arg.Value}, nil
}

// action translates a runtime-spec action. Only ALLOW and ERRNO occur in
// Docker's profile; anything else is an error.
func action(act specs.LinuxSeccompAction, errnoRet *uint) (bpfseccomp.Action, error) {
	switch {
	case act == specs.ActAllow && errnoRet == nil:
		return bpfseccomp.ActionAllow, nil
	case act == specs.ActErrno:
		errno := uint(unix.EPERM)
		if errnoRet != nil {
			errno = *errnoRet
		}
		// Errno 0 would make the syscall succeed without running; the
		// kernel keeps 16 bits of data.
		if errno == 0 || errno > 0xffff {
			return 0, fmt.Errorf("unsupported errno %d", errno)
		}
		return bpfseccomp.ActionErrno | bpfseccomp.Action(errno), nil
	case errnoRet != nil:
		return 0, fmt.Errorf("errnoRet %d on action %q", *errnoRet, act)
	default:
		return 0, fmt.Errorf("unsupported action %q", act)
	}
}

// knownNames returns the names the architecture has a number for, in order,
// less the skipped ones.
func knownNames(names []string, known map[string]int, skip map[string]bool) []string {
	var out []string
	for _, name := range names {
		if _, ok := known[name]; ok && !skip[name] {
			out = append(out, name)
		}
	}
	return out
}
