package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// There is no container engine where the tests run, so the Dockerfile is checked by reading it:
// a small parser for the Dockerfile syntax (comments, parser directives, line continuations,
// exec and shell forms) and checks of what the image must have.

// instruction is one Dockerfile instruction.
type instruction struct {
	line  int
	cmd   string // upper case
	flags []string
	args  string   // the rest, continuations joined
	exec  []string // set when args is a JSON array (exec form)
}

var dockerfileCommands = map[string]bool{
	"ADD": true, "ARG": true, "CMD": true, "COPY": true, "ENTRYPOINT": true, "ENV": true, "EXPOSE": true,
	"FROM": true, "HEALTHCHECK": true, "LABEL": true, "ONBUILD": true, "RUN": true, "SHELL": true,
	"STOPSIGNAL": true, "USER": true, "VOLUME": true, "WORKDIR": true,
}

// takesFlags are the instructions with --flags before their arguments.
var takesFlags = map[string]bool{"ADD": true, "COPY": true, "FROM": true, "HEALTHCHECK": true, "RUN": true}

// parseDockerfile splits a Dockerfile into instructions; it fails on unknown instructions,
// a dangling continuation and malformed exec forms.
func parseDockerfile(src string) ([]instruction, error) {
	var out []instruction
	sc := bufio.NewScanner(strings.NewReader(src))
	var cur strings.Builder
	start, n := 0, 0
	directives := true
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			if directives && regexp.MustCompile(`^#\s*[a-zA-Z]+\s*=`).MatchString(trimmed) {
				continue // parser directive such as # syntax=docker/dockerfile:1
			}
			directives = false
			continue // comments also may sit inside continued instructions
		}
		directives = false
		if trimmed == "" && cur.Len() == 0 {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		ins, err := parseInstruction(start, cur.String())
		if err != nil {
			return nil, err
		}
		out = append(out, ins)
		cur.Reset()
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a continued instruction", start)
	}
	return out, sc.Err()
}

func parseInstruction(line int, text string) (instruction, error) {
	cmd, rest, _ := strings.Cut(text, " ")
	ins := instruction{line: line, cmd: strings.ToUpper(cmd)}
	if !dockerfileCommands[ins.cmd] {
		return ins, fmt.Errorf("line %d: unknown instruction %q", line, cmd)
	}
	rest = strings.TrimSpace(rest)
	for takesFlags[ins.cmd] && strings.HasPrefix(rest, "--") {
		f, r, _ := strings.Cut(rest, " ")
		ins.flags = append(ins.flags, f)
		rest = strings.TrimSpace(r)
	}
	ins.args = rest
	if strings.HasPrefix(rest, "[") && (ins.cmd == "CMD" || ins.cmd == "ENTRYPOINT" || ins.cmd == "RUN" || ins.cmd == "SHELL") {
		if err := json.Unmarshal([]byte(rest), &ins.exec); err != nil {
			return ins, fmt.Errorf("line %d: %s exec form is not a JSON array of strings: %v", line, ins.cmd, err)
		}
	}
	if rest == "" {
		return ins, fmt.Errorf("line %d: %s without arguments", line, ins.cmd)
	}
	return ins, nil
}

func TestParseDockerfile(t *testing.T) {
	bad := map[string]string{
		"unknown":      "FROM x\nRUNN true\n",
		"continuation": "FROM x\nRUN a \\\n",
		"exec form":    "FROM x\nCMD [\"a\", b]\n",
		"empty":        "FROM x\nUSER\n",
	}
	for name, src := range bad {
		if _, err := parseDockerfile(src); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	ins, err := parseDockerfile("# syntax=docker/dockerfile:1\n# c\nFROM a AS b\nRUN --mount=type=cache,target=/x \\\n  # inner comment\n  echo 1 \\\n && echo 2\nCMD [\"x\"]\n")
	if err != nil || len(ins) != 3 || ins[1].args != "echo 1  && echo 2" || !slices.Equal(ins[1].flags, []string{"--mount=type=cache,target=/x"}) || !slices.Equal(ins[2].exec, []string{"x"}) {
		t.Fatalf("%+v %v", ins, err)
	}
}

// TestDockerfile checks the image recipe: a Go build stage with -tags worker, a Debian bookworm
// slim runtime with the sandbox's packages, a non-root user, and `ndtrace worker` as entrypoint.
func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ins, err := parseDockerfile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	// ARGs before the first FROM are the defaults FROM lines may use.
	args := map[string]string{}
	type stage struct {
		name, image string
		ins         []instruction
	}
	var stages []stage
	for _, in := range ins {
		switch {
		case in.cmd == "ARG" && len(stages) == 0:
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			image := os.Expand(f[0], func(k string) string {
				v, ok := args[k]
				if !ok {
					t.Errorf("line %d: FROM uses undeclared ARG %s", in.line, k)
				}
				return v
			})
			s := stage{image: image}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
		case len(stages) == 0:
			t.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		default:
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	if len(stages) != 2 {
		t.Fatalf("want 2 stages (build, runtime), got %d", len(stages))
	}
	build, rt := stages[0], stages[1]
	if !regexp.MustCompile(`^golang:1\.26\.\d+-bookworm$`).MatchString(build.image) {
		t.Errorf("build stage image %q: want golang:1.26.x-bookworm", build.image)
	}
	if goMod, err := os.ReadFile("../go.mod"); err == nil {
		m := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(goMod)
		goVersion := strings.TrimPrefix(strings.Split(build.image, "-")[0], "golang:")
		if m != nil && versionLess(goVersion, string(m[1])) {
			t.Errorf("build image %s is older than go.mod's go %s", build.image, m[1])
		}
	}
	if rt.image != "debian:bookworm-slim" {
		t.Errorf("runtime image %q: want debian:bookworm-slim", rt.image)
	}
	var buildCmd, apt string
	for _, in := range build.ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			buildCmd = in.args
		}
		if in.cmd == "COPY" {
			for _, f := range strings.Fields(in.args)[:len(strings.Fields(in.args))-1] {
				if f != "." {
					if _, err := os.Stat(filepath.Join("..", f)); err != nil {
						t.Errorf("line %d: COPY of %s, which is not in the repository", in.line, f)
					}
				}
			}
		}
	}
	for _, want := range []string{"-tags worker", "./cmd/ndtrace", "-o /out/ndtrace"} {
		if !strings.Contains(buildCmd, want) {
			t.Errorf("go build %q lacks %q", buildCmd, want)
		}
	}
	if _, err := os.Stat("../cmd/ndtrace"); err != nil {
		t.Error(err)
	}
	var user, entry string
	var entrypoint []string
	copied := false
	for _, in := range rt.ins {
		switch in.cmd {
		case "RUN":
			if strings.Contains(in.args, "apt-get install") {
				apt = in.args
			}
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entry, entrypoint = in.args, in.exec
		case "COPY":
			if slices.Contains(in.flags, "--from="+build.name) && strings.Contains(in.args, "/out/ndtrace /usr/local/bin/ndtrace") {
				copied = true
			}
		}
	}
	pkgs := strings.Fields(apt)
	for _, p := range []string{"python3", "python3-pytest", "python3-hypothesis", "python3-venv", "python3-pip", "bubblewrap", "git", "ca-certificates", "--no-install-recommends"} {
		if !slices.Contains(pkgs, p) {
			t.Errorf("apt-get install lacks %s: %q", p, apt)
		}
	}
	if !strings.Contains(apt, "rm -rf /var/lib/apt/lists") {
		t.Error("apt lists are left in the image")
	}
	if !copied {
		t.Errorf("the runtime stage does not copy /out/ndtrace from stage %q", build.name)
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" || !regexp.MustCompile(`^\d+$`).MatchString(uid) {
		t.Errorf("USER %q: want a numeric non-root uid (Kubernetes runAsNonRoot checks it)", user)
	}
	if vals, err := os.ReadFile(filepath.Join(chartDir, "values.yaml")); err == nil && !strings.Contains(string(vals), "runAsUser: "+uid) {
		t.Errorf("values.yaml's runAsUser is not the image's uid %s", uid)
	}
	if entrypoint == nil {
		t.Errorf("ENTRYPOINT %q: want the exec form", entry)
	}
	if i := slices.Index(entrypoint, "/usr/local/bin/ndtrace"); i < 0 || i+1 >= len(entrypoint) || entrypoint[i+1] != "worker" {
		t.Errorf("ENTRYPOINT %v does not run `ndtrace worker`", entrypoint)
	}
	// The build context is the repository root: what the build needs must not be ignored.
	ignore, err := os.ReadFile("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(ignore), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for _, needed := range []string{"go.mod", "go.sum", "cmd", "sandbox", "deploy/Dockerfile"} {
			if l == needed || l == "*" || l == "**" || strings.HasPrefix(needed, l+"/") {
				t.Errorf("Dockerfile.dockerignore excludes %s (pattern %q)", needed, l)
			}
		}
	}
}

// versionLess compares dotted version numbers.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		var x, y int
		fmt.Sscan(pa[i], &x)
		fmt.Sscan(pb[i], &y)
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}
