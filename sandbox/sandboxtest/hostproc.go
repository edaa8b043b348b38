package sandboxtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// zygoteMarker is on every zygote's command line: the -c program that runs the tracer's files
// from the sandbox's support directory (sandbox.tracerBootstrap).
const zygoteMarker = "exec(compile(b''.join([open('/.ndtrace/"

// hostProcs maps every host pid to its parent.
func hostProcs() map[int]int {
	parents := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parents[pid] = ppid
	}
	return parents
}

// descends reports whether pid descends from ancestor in parents.
func descends(parents map[int]int, pid, ancestor int) bool {
	for n := 0; pid > 1 && n < 4096; n++ {
		p, ok := parents[pid]
		if !ok {
			return false
		}
		if p == ancestor {
			return true
		}
		pid = p
	}
	return false
}

// zygotes returns the host pids of the sandbox zygotes this process started: the deepest
// processes whose command line holds the tracer (under bubblewrap, bwrap's own processes carry the
// same command line above the zygote).
func zygotes() []int {
	return zygotesIn(hostProcs())
}

func zygotesIn(parents map[int]int) []int {
	me := os.Getpid()
	marked := map[int]bool{}
	for pid := range parents {
		if !descends(parents, pid, me) {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(cmd, []byte(zygoteMarker)) {
			marked[pid] = true
		}
	}
	var out []int
	for pid := range marked {
		deepest := true
		for other := range marked {
			if other != pid && descends(parents, other, pid) {
				deepest = false
				break
			}
		}
		if deepest {
			out = append(out, pid)
		}
	}
	return out
}

// strays returns, per zygote of this process, the host pids of the processes below it: between
// items there must be none (every item's processes are gone when its run returns).
func strays() map[int][]int {
	parents := hostProcs()
	out := map[int][]int{}
	for _, z := range zygotesIn(parents) {
		for pid := range parents {
			if descends(parents, pid, z) {
				out[z] = append(out[z], pid)
			}
		}
	}
	return out
}

// memoryContains reports whether the readable memory of process pid contains needle. Reading
// another process's memory needs ptrace rights over it (root on the host); ok is false when
// they are missing.
func memoryContains(pid int, needle []byte) (found, ok bool, err error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false, false, err
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return false, false, nil
	}
	defer mem.Close()
	sc := bufio.NewScanner(maps)
	buf := make([]byte, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "r") {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			continue
		}
		if len(f) >= 6 && (f[5] == "[vvar]" || f[5] == "[vsyscall]") {
			continue
		}
		var carry []byte
		for off := lo; off < hi; {
			n := uint64(len(buf))
			if hi-off < n {
				n = hi - off
			}
			k, rerr := mem.ReadAt(buf[:n], int64(off))
			if k > 0 {
				chunk := append(carry, buf[:k]...)
				if bytes.Contains(chunk, needle) {
					return true, true, nil
				}
				if len(chunk) >= len(needle) {
					carry = append([]byte{}, chunk[len(chunk)-len(needle)+1:]...)
				}
			}
			if rerr != nil || k == 0 {
				break
			}
			off += uint64(k)
		}
	}
	return false, true, sc.Err()
}
