package seccomp

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	bpfseccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	docker "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// mustDeny are the syscalls the sandbox refuses whatever Docker allows.
var mustDeny = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "keyctl", "add_key",
	"request_key", "mount", "umount2", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
	"mount_setattr", "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open", "io_uring_setup",
	"io_uring_enter", "io_uring_register", "userfaultfd", "kexec_load", "kexec_file_load", "init_module",
	"finit_module", "delete_module", "memfd_create", "memfd_secret", "open_by_handle_at", "name_to_handle_at",
	"lookup_dcookie", "quotactl", "acct", "swapon", "swapoff", "reboot", "syslog", "vhangup", "fanotify_init",
	"iopl", "ioperm",
}

const (
	allow  = uint32(bpfseccomp.ActionAllow)
	eperm  = uint32(errnoEPERM)
	enosys = uint32(errnoENOSYS)
)

func native(t testing.TB) *arch.Info {
	t.Helper()
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func nr(t testing.TB, name string) uint32 {
	t.Helper()
	n, ok := native(t).SyscallNames[name]
	if !ok {
		t.Skipf("no %s on %s", name, native(t).Name)
	}
	return uint32(n)
}

func TestDenied(t *testing.T) {
	got := Denied()
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("Denied() = %v, want sorted without duplicates", got)
	}
	for _, name := range mustDeny {
		if _, ok := native(t).SyscallNames[name]; ok && !slices.Contains(got, name) {
			t.Errorf("Denied() lacks %s", name)
		}
	}
}

func TestProgram(t *testing.T) {
	p1, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	if len(p1) == 0 || len(p1)%8 != 0 || len(p1)/8 > maxInstructions {
		t.Fatalf("Program() is %d bytes, want a non-empty multiple of 8 of at most %d instructions", len(p1), maxInstructions)
	}
	p1[0] ^= 0xff // callers get a copy
	p2, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	p3, err := build(denied)
	if err != nil {
		t.Fatal(err)
	}
	if p1[0]^0xff != p2[0] || !bytes.Equal(p2, p3) {
		t.Error("Program() is not deterministic or shares its cache with callers")
	}
}

// decide runs the filter in golang.org/x/net/bpf's VM for one syscall and
// returns its action.
func decide(t testing.TB, vm *bpf.VM, auditArch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	// The VM loads big-endian words; seccomp_data is in native order, so
	// each 32-bit word goes big-endian where the kernel has it.
	in := make([]byte, 64)
	binary.BigEndian.PutUint32(in[0:], nr)
	binary.BigEndian.PutUint32(in[4:], auditArch)
	little := binary.NativeEndian.Uint16([]byte{1, 0}) == 1
	for i, a := range args {
		lo, hi := uint32(a), uint32(a>>32)
		if !little {
			lo, hi = hi, lo
		}
		binary.BigEndian.PutUint32(in[16+8*i:], lo)
		binary.BigEndian.PutUint32(in[20+8*i:], hi)
	}
	got, err := vm.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
}

func newVM(t testing.TB) *bpf.VM {
	t.Helper()
	return vmOf(t, Program)
}

func vmOf(t testing.TB, program func() ([]byte, error)) *bpf.VM {
	t.Helper()
	p, err := program()
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]bpf.RawInstruction, len(p)/8)
	for i := range raw {
		b := p[8*i:]
		raw[i] = bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("filter has instructions golang.org/x/net/bpf does not know")
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// TestDecisions checks the filter's answers to chosen syscalls, among them
// ones that would get through if the syscall number were not what the
// filter compares after a failed argument check.
func TestDecisions(t *testing.T) {
	vm := newVM(t)
	info := native(t)
	foreign := arch.I386.ID
	if info.ID != arch.X86_64.ID {
		foreign = arch.X86_64.ID
	}
	type call struct {
		name string
		args []uint64
		want uint32
	}
	tests := []call{
		{"getpid", nil, allow},
		{"read", nil, allow},
		{"execve", nil, allow},
		{"clone3", nil, enosys},
		{"clone", []uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone", []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}, allow},
		{"clone", []uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, allow},
		{"clone", []uint64{unix.CLONE_NEWTIME}, eperm},
		{"socket", []uint64{unix.AF_UNIX}, allow},
		{"socket", []uint64{unix.AF_INET}, allow},
		{"socket", []uint64{unix.AF_INET6}, allow},
		{"socket", []uint64{unix.AF_NETLINK}, eperm},
		{"socket", []uint64{unix.AF_PACKET}, eperm},
		{"socket", []uint64{unix.AF_ALG}, eperm},
		{"socket", []uint64{unix.AF_VSOCK}, eperm},
		{"socket", []uint64{3}, eperm}, // AF_AX25, not in Docker's list
		{"socket", []uint64{unix.AF_ALG | uint64(nr(t, "clone"))<<32}, eperm},
		{"socket", []uint64{unix.AF_NETLINK | uint64(nr(t, "read"))<<32}, eperm},
		{"socket", []uint64{uint64(nr(t, "socket"))}, allow}, // AF_KCM on x86_64, in Docker's list
		{"personality", []uint64{0xffffffff}, allow},
		{"personality", []uint64{0}, allow},
		{"personality", []uint64{0x0040000}, eperm}, // ADDR_NO_RANDOMIZE
		{"personality", []uint64{uint64(nr(t, "socket"))}, eperm},
		{"personality", []uint64{uint64(nr(t, "clone"))}, eperm},
	}
	for _, name := range Denied() {
		tests = append(tests, call{name, nil, eperm})
	}
	for _, flag := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP} {
		tests = append(tests, call{"clone", []uint64{flag | uint64(unix.SIGCHLD)}, eperm})
	}
	for _, tt := range tests {
		if got := decide(t, vm, uint32(info.ID), nr(t, tt.name), tt.args...); got != tt.want {
			t.Errorf("%s%#x = %#x, want %#x", tt.name, tt.args, got, tt.want)
		}
	}
	// Another ABI of the machine gets the default action.
	if got := decide(t, vm, uint32(foreign), 20); got != eperm {
		t.Errorf("foreign architecture: %#x, want %#x", got, eperm)
	}
	if got := decide(t, vm, uint32(info.ID), 1000); got != eperm {
		t.Errorf("unknown syscall 1000: %#x, want %#x", got, eperm)
	}
	if info.ID == arch.X86_64.ID {
		if got := decide(t, vm, uint32(info.ID), nr(t, "getpid")|0x40000000); got != enosys {
			t.Errorf("x32 getpid: %#x, want %#x", got, enosys)
		}
	}
}

// TestDecisionsMatchProfile checks every syscall of the architecture, with
// many values of argument 0, against Docker's resolved profile read
// directly, plus the sandbox's rules.
func TestDecisionsMatchProfile(t *testing.T) {
	vm := newVM(t)
	info := native(t)
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	profile, err := docker.GetDefaultProfile(spec)
	if err != nil {
		t.Fatal(err)
	}
	values := []uint64{0x3d0f00, 0x80, 0x20000, 0x20008, 0xffffffff, 1 << 32, 1 << 63, ^uint64(0), unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}
	for v := range uint64(140) {
		values = append(values, v, v<<32, v|38<<32, v<<32|38)
	}
	want := func(name string, v uint64) uint32 {
		switch {
		case slices.Contains(Denied(), name):
			return eperm
		case name == "clone3":
			return enosys
		case name == "clone" && v&cloneNewFlags != 0:
			return eperm
		case name == "socket" && slices.Contains(deniedSocketFamilies, v):
			return eperm
		}
		for _, rule := range profile.Syscalls {
			if slices.Contains(rule.Names, name) && ruleHolds(rule.Args, v) {
				if rule.Action == specs.ActAllow {
					return allow
				}
				return uint32(bpfseccomp.ActionErrno) | uint32(*rule.ErrnoRet)
			}
		}
		return eperm
	}
	for name, n := range info.SyscallNames {
		for _, v := range values {
			if got, want := decide(t, vm, uint32(info.ID), uint32(n), v), want(name, v); got != want {
				t.Errorf("%s(%#x) = %#x, want %#x", name, v, got, want)
			}
		}
	}
}

// ruleHolds evaluates a runtime-spec rule's argument checks, as runc does,
// with argument 0 v and the others 0.
func ruleHolds(args []specs.LinuxSeccompArg, v uint64) bool {
	holds := func(a specs.LinuxSeccompArg) bool {
		x := uint64(0)
		if a.Index == 0 {
			x = v
		}
		switch a.Op {
		case specs.OpEqualTo:
			return x == a.Value
		case specs.OpNotEqual:
			return x != a.Value
		case specs.OpLessThan:
			return x < a.Value
		case specs.OpLessEqual:
			return x <= a.Value
		case specs.OpGreaterThan:
			return x > a.Value
		case specs.OpGreaterEqual:
			return x >= a.Value
		case specs.OpMaskedEqual:
			return x&a.Value == a.ValueTwo
		}
		panic(a.Op)
	}
	seen := make(map[uint]bool)
	repeated := false
	for _, a := range args {
		repeated = repeated || seen[a.Index]
		seen[a.Index] = true
	}
	if repeated {
		return slices.ContainsFunc(args, holds)
	}
	for _, a := range args {
		if !holds(a) {
			return false
		}
	}
	return true
}

func TestConditionSets(t *testing.T) {
	eq := func(index uint, v uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: index, Value: v, Op: specs.OpEqualTo}
	}
	cond := func(arg uint32, v uint64) bpfseccomp.Condition {
		return bpfseccomp.Condition{Argument: arg, Operation: bpfseccomp.Equal, Value: v}
	}
	tests := []struct {
		name string
		args []specs.LinuxSeccompArg
		want []bpfseccomp.ArgumentConditions
	}{
		{"one", []specs.LinuxSeccompArg{eq(0, 1)}, []bpfseccomp.ArgumentConditions{{cond(0, 1)}}},
		{"distinct arguments are ANDed", []specs.LinuxSeccompArg{eq(0, 1), eq(2, 3)}, []bpfseccomp.ArgumentConditions{{cond(0, 1), cond(2, 3)}}},
		{"a repeated argument makes every check a set", []specs.LinuxSeccompArg{eq(0, 1), eq(0, 2), eq(1, 3)},
			[]bpfseccomp.ArgumentConditions{{cond(0, 1)}, {cond(0, 2)}, {cond(1, 3)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := conditionSets(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("conditionSets() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	tests := []struct {
		arg     specs.LinuxSeccompArg
		want    bpfseccomp.Operation
		wantErr bool
	}{
		{specs.LinuxSeccompArg{Op: specs.OpEqualTo}, bpfseccomp.Equal, false},
		{specs.LinuxSeccompArg{Op: specs.OpNotEqual}, bpfseccomp.NotEqual, false},
		{specs.LinuxSeccompArg{Op: specs.OpLessThan}, bpfseccomp.LessThan, false},
		{specs.LinuxSeccompArg{Op: specs.OpLessEqual}, bpfseccomp.LessOrEqual, false},
		{specs.LinuxSeccompArg{Op: specs.OpGreaterThan}, bpfseccomp.GreaterThan, false},
		{specs.LinuxSeccompArg{Op: specs.OpGreaterEqual}, bpfseccomp.GreaterOrEqual, false},
		{specs.LinuxSeccompArg{Op: specs.OpMaskedEqual, Value: 0xff}, bpfseccomp.BitsNotSet, false},
		{specs.LinuxSeccompArg{Op: specs.OpMaskedEqual, Value: 0xff, ValueTwo: 0xff}, "", true},
		{specs.LinuxSeccompArg{Op: specs.OpEqualTo, ValueTwo: 1}, "", true},
		{specs.LinuxSeccompArg{Op: "SCMP_CMP_UNKNOWN"}, "", true},
		{specs.LinuxSeccompArg{Op: specs.OpEqualTo, Index: 6}, "", true},
	}
	for _, tt := range tests {
		got, err := condition(tt.arg)
		if (err != nil) != tt.wantErr || err == nil && got.Operation != tt.want {
			t.Errorf("condition(%+v) = %v, %v; want %v, error %v", tt.arg, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestNewPolicyRefuses checks that profiles the filter cannot express exactly
// are errors, not wider filters.
func TestNewPolicyRefuses(t *testing.T) {
	known := native(t).SyscallNames
	errno := func(e uint) *uint { return &e }
	rule := func(name string, act specs.LinuxSeccompAction, args ...specs.LinuxSeccompArg) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: []string{name}, Action: act, Args: args}
	}
	arg := func(index uint, op specs.LinuxSeccompOperator, v uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: index, Op: op, Value: v}
	}
	tests := []struct {
		name    string
		def     specs.LinuxSeccompAction
		rules   []specs.LinuxSyscall
		wantErr bool
	}{
		{"Docker-like", specs.ActErrno, []specs.LinuxSyscall{
			rule("getpid", specs.ActAllow), rule("no_such_syscall", specs.ActAllow),
			rule("clone", specs.ActAllow, arg(0, specs.OpMaskedEqual, unix.CLONE_NEWUSER)),
			rule("socket", specs.ActAllow, arg(0, specs.OpEqualTo, unix.AF_UNIX)),
			rule("personality", specs.ActAllow, arg(0, specs.OpEqualTo, 0)),
		}, false},
		{"default allow", specs.ActAllow, nil, true},
		{"kill", specs.ActErrno, []specs.LinuxSyscall{rule("getpid", specs.ActKillProcess)}, true},
		{"log", specs.ActErrno, []specs.LinuxSyscall{rule("getpid", specs.ActLog)}, true},
		{"errnoRet on allow", specs.ActErrno, []specs.LinuxSyscall{{Names: []string{"getpid"}, Action: specs.ActAllow, ErrnoRet: errno(1)}}, true},
		{"errno 0", specs.ActErrno, []specs.LinuxSyscall{{Names: []string{"getpid"}, Action: specs.ActErrno, ErrnoRet: errno(0)}}, true},
		{"two actions", specs.ActErrno, []specs.LinuxSyscall{rule("getpid", specs.ActAllow), rule("getpid", specs.ActErrno)}, true},
		{"with and without checks", specs.ActErrno, []specs.LinuxSyscall{
			rule("personality", specs.ActAllow), rule("personality", specs.ActAllow, arg(0, specs.OpEqualTo, 0))}, true},
		{"checks on errno", specs.ActErrno, []specs.LinuxSyscall{rule("personality", specs.ActErrno, arg(0, specs.OpEqualTo, 0))}, true},
		{"checks on argument 1", specs.ActErrno, []specs.LinuxSyscall{rule("personality", specs.ActAllow, arg(1, specs.OpEqualTo, 0))}, true},
		{"unsupported operator", specs.ActErrno, []specs.LinuxSyscall{rule("personality", specs.ActAllow, arg(0, "SCMP_CMP_UNKNOWN", 0))}, true},
		{"socket without checks", specs.ActErrno, []specs.LinuxSyscall{rule("socket", specs.ActAllow)}, true},
		{"two unbounded", specs.ActErrno, []specs.LinuxSyscall{
			rule("clone", specs.ActAllow, arg(0, specs.OpMaskedEqual, unix.CLONE_NEWUSER)),
			rule("personality", specs.ActAllow, arg(0, specs.OpNotEqual, 8))}, true},
		{"own number refused before", specs.ActErrno, []specs.LinuxSyscall{
			rule("socket", specs.ActAllow, arg(0, specs.OpEqualTo, unix.AF_UNIX)),
			rule("personality", specs.ActAllow, arg(0, specs.OpEqualTo, uint64(known["personality"])))}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			profile := &specs.LinuxSeccomp{DefaultAction: tt.def, Syscalls: tt.rules}
			_, err := newPolicy(profile, known, denied)
			if (err != nil) != tt.wantErr {
				t.Errorf("newPolicy() error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestProgramWithoutSysV checks the variant for items without IPC limits: System V IPC objects
// cannot be created, everything else is decided as by Program.
func TestProgramWithoutSysV(t *testing.T) {
	with, without := newVM(t), vmOf(t, ProgramWithoutSysV)
	id := uint32(native(t).ID)
	for _, name := range []string{"shmget", "msgget", "semget"} {
		if got := decide(t, with, id, nr(t, name)); got != allow {
			t.Errorf("Program: %s = %#x, want allowed (the IPC namespace bounds it)", name, got)
		}
		if got := decide(t, without, id, nr(t, name)); got != eperm {
			t.Errorf("ProgramWithoutSysV: %s = %#x, want EPERM", name, got)
		}
	}
	for _, name := range []string{"getpid", "read", "shmat", "mmap"} {
		if got := decide(t, without, id, nr(t, name)); got != allow {
			t.Errorf("ProgramWithoutSysV: %s = %#x, want allowed", name, got)
		}
	}
}
