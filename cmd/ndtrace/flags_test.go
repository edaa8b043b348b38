package main

import (
	"strings"
	"testing"
)

// TestHelpEveryCommand asks every command and subcommand for help in each way a user would: the
// usage goes to stdout, nothing to stderr, exit 0.
func TestHelpEveryCommand(t *testing.T) {
	var cases [][]string
	for _, name := range commandNames() {
		for _, h := range []string{"-h", "--help", "-help"} {
			cases = append(cases, []string{name, h})
		}
		cases = append(cases, []string{"help", name})
	}
	for _, c := range scheduleCommands {
		cases = append(cases, []string{"schedule", c.name, "-h"}, []string{"schedule", c.name, "--help"},
			[]string{"schedule", "help", c.name}, []string{"help", "schedule", c.name})
	}
	cases = append(cases, []string{"schedule", "help"}, []string{"status", "ID", "-h"}, []string{"validate", "./x", "--help"})
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runCmd(args...)
			// The command's words, without "help" and the help flags, start its usage.
			var words []string
			for _, a := range args {
				if a != "help" && !isHelpArg(a) && a != "ID" && a != "./x" {
					words = append(words, a)
				}
			}
			want := "Usage: ndtrace " + strings.Join(words, " ") + " "
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, want) {
				t.Errorf("exit %d, want 0; stderr %q; stdout does not start with %q:\n%s", code, stderr, want, stdout)
			}
		})
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		if stdout, stderr, code := runCmd(args...); code != 0 || stderr != "" || !strings.Contains(stdout, "  schedule ") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, stderr, stdout)
		}
	}
}

// TestBadFlagIsOneLine checks that a mistake on the command line is one line on stderr that names
// the mistake and how to get help (never the whole usage), with exit 2.
func TestBadFlagIsOneLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "-spce", "x.yaml"}, "ndtrace run: unknown flag -spce (did you mean -spec?); see ndtrace run -h"},
		{[]string{"run", "--temporl", "x:1"}, "ndtrace run: unknown flag -temporl (did you mean -temporal?); see ndtrace run -h"},
		{[]string{"run", "--timeout", "soon"}, `ndtrace run: invalid value "soon" for flag -timeout: parse error; see ndtrace run -h`},
		{[]string{"run", "--spec"}, "ndtrace run: flag needs an argument: -spec; see ndtrace run -h"},
		{[]string{"trace", "--cal", "f()"}, "ndtrace trace: unknown flag -cal (did you mean -call?); see ndtrace trace -h"},
		{[]string{"stats", "--bogus", "x"}, "ndtrace stats: unknown flag -bogus; see ndtrace stats -h"},
		{[]string{"validate", "./x", "--al"}, "ndtrace validate: unknown flag -al (did you mean -all?); see ndtrace validate -h"},
		{[]string{"status", "ID", "--temp", "x:1"}, "ndtrace status: unknown flag -temp (did you mean -temporal?); see ndtrace status -h"},
		{[]string{"schedule", "create", "--evry", "1h"}, "ndtrace schedule: unknown flag -evry (did you mean -every?); see ndtrace schedule create -h"},
		{[]string{"schedule", "crate"}, `ndtrace schedule: unknown schedule subcommand "crate" (did you mean create?); see ndtrace schedule -h`},
		{[]string{"schedule"}, "ndtrace schedule: schedule needs a subcommand: create, list or delete; see ndtrace schedule -h"},
		{[]string{"dashboard", "--dataset", "x", "extra"}, `ndtrace dashboard: unexpected argument "extra"; see ndtrace dashboard -h`},
		{[]string{"rn"}, `ndtrace: unknown command "rn" (did you mean run?); run 'ndtrace help' for the list`},
		{[]string{"help", "rn"}, `ndtrace help: unknown command "rn" (run 'ndtrace help' for the list)`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runCmd(tc.args...)
			if code != 2 || stdout != "" || stderr != tc.want+"\n" {
				t.Errorf("exit %d, want 2; stdout %q\nstderr %q\nwant   %q", code, stdout, stderr, tc.want+"\n")
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"spec", "out", "temporal", "timeout", "namespace", "o", "all", "max-problems"}
	tests := []struct{ in, want string }{
		{"spce", "spec"},  // swap
		{"sepc", "spec"},  // swap
		{"spe", "spec"},   // deletion
		{"specs", "spec"}, // insertion
		{"SPEC", "spec"},  // case
		{"tmeout", "timeout"},
		{"ou", "out"},
		{"x", ""},            // one letter: anything would be a guess
		{"bogus", ""},        // nothing near
		{"temp", "temporal"}, // prefix of one name
		{"ma", ""},           // too short for a prefix
		{"max", "max-problems"},
		{"namesapce", "namespace"},
	}
	for _, tc := range tests {
		if got := suggest(tc.in, names); got != tc.want {
			t.Errorf("suggest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
