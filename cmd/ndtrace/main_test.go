package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTraceCommand(t *testing.T) {
	good := writeFile(t, "good.py", "def f(x):\n    y = x * 2\n    return y\n")
	raises := writeFile(t, "raises.py", "def f(x):\n    return 1 // x\n")
	bad := writeFile(t, "bad.py", "def f(x)\n    return x\n")
	tests := []struct {
		name       string
		args       []string
		code       int
		status     string
		stderrHas  string
		minEvents  int
		lastValue  string
		firstEvent string
	}{
		{name: "ok", args: []string{"--code", good, "--call", "f(5)"}, code: 0, status: "ok", minEvents: 4, lastValue: "10", firstEvent: "call"},
		{name: "cruxeval_input", args: []string{"--code", good, "--input", "'ab'"}, code: 0, status: "ok", lastValue: "'abab'"},
		{name: "user_exception_still_exit_0", args: []string{"--code", raises, "--call", "f(0)"}, code: 0, status: "exception"},
		{name: "timeout", args: []string{"--code", writeFile(t, "loop.py", "import time\ndef f():\n    while True:\n        time.sleep(0.001)\n"), "--call", "f()", "--timeout", "1s", "--max-events", "1000000000"}, code: 0, status: "timeout"},
		{name: "max_events", args: []string{"--code", writeFile(t, "loop2.py", "def f():\n    while True:\n        pass\n"), "--call", "f()", "--max-events", "50"}, code: 0, status: "event_limit"},
		{name: "missing_file", args: []string{"--code", "/nonexistent/x.py", "--call", "f()"}, code: 2, stderrHas: "cannot read code"},
		{name: "syntax_error", args: []string{"--code", bad, "--call", "f(1)"}, code: 2, stderrHas: "SyntaxError"},
		{name: "empty_call", args: []string{"--code", good, "--call", "  "}, code: 2, stderrHas: "empty call expression"},
		{name: "no_code", args: []string{"--call", "f()"}, code: 2, stderrHas: "--code is required"},
		{name: "bad_backend", args: []string{"--code", good, "--call", "f(1)", "--backend", "nope"}, code: 1, stderrHas: "unknown sandbox backend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"trace"}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if tc.stderrHas != "" {
				if !strings.Contains(stderr.String(), tc.stderrHas) {
					t.Errorf("stderr %q lacks %q", stderr.String(), tc.stderrHas)
				}
				if n := strings.Count(strings.TrimSpace(stderr.String()), "\n"); n != 0 {
					t.Errorf("error is %d lines, want one: %q", n+1, stderr.String())
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			var last map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
				t.Fatal(err)
			}
			if last["status"] != tc.status {
				t.Fatalf("status %v, want %s (%v)", last["status"], tc.status, last["detail"])
			}
			events := lines[:len(lines)-1]
			if len(events) < tc.minEvents {
				t.Errorf("%d events", len(events))
			}
			for i, l := range events {
				var ev map[string]any
				if err := json.Unmarshal([]byte(l), &ev); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				for _, k := range []string{"event", "func", "lineno", "depth", "src", "locals"} {
					if _, ok := ev[k]; !ok {
						t.Errorf("event %d lacks %q: %s", i, k, l)
					}
				}
				if ev["event"] == "return" || ev["event"] == "exception" {
					if _, ok := ev["value"]; !ok {
						t.Errorf("event %d lacks value: %s", i, l)
					}
				}
				if i == 0 && tc.firstEvent != "" && ev["event"] != tc.firstEvent {
					t.Errorf("first event %v", ev["event"])
				}
			}
			if tc.lastValue != "" && last["value"] != tc.lastValue {
				t.Errorf("value %v, want %s", last["value"], tc.lastValue)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "trace") {
		t.Errorf("help: %d %q", code, stdout.String())
	}
	if code := run([]string{"bogus"}, &stdout, &stderr); code != 2 {
		t.Errorf("unknown command exit %d", code)
	}
}
