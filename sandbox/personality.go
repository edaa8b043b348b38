package sandbox

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// addrNoRandomize is the personality flag ADDR_NO_RANDOMIZE (linux/personality.h).
const addrNoRandomize = 0x0040000

// queryPersonality is the argument of personality(2) that reads the persona without changing it.
const queryPersonality = 0xffffffff

// personality calls personality(2) for the calling thread.
func personality(p uintptr) (uintptr, error) {
	old, _, errno := syscall.RawSyscall(syscall.SYS_PERSONALITY, p, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return old, nil
}

// startFixedAddresses starts cmd with address-space randomisation off (Config.FixedAddresses):
// the persona is per thread and inherited across fork and exec, so it is set on this goroutine's
// thread, locked to it, for the fork that starts cmd, and set back right after.
func startFixedAddresses(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, err := personality(queryPersonality)
	if err != nil {
		return fmt.Errorf("read the persona: %w", err)
	}
	if _, err := personality(old | addrNoRandomize); err != nil {
		return fmt.Errorf("turn address randomisation off: %w", err)
	}
	startErr := cmd.Start()
	if _, err := personality(old); err != nil {
		// (It cannot fail: the kernel has just taken this persona.) The thread keeps a persona
		// no other start asked for: locked once more (and unlocked once), it stays this
		// goroutine's, and the runtime ends it with the goroutine; the sandbox started from it
		// then ends too (its parent-death signal), and is started again by its next run.
		runtime.LockOSThread()
	}
	return startErr
}
