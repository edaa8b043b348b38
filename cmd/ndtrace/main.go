// Command ndtrace produces training data for neural debuggers: it traces Python in a sandbox and
// turns the traces into debugger trajectories.
//
// Usage:
//
//	ndtrace <command> [flags]
//
// Run "ndtrace help" for the list of commands and "ndtrace <command> -h" for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/ndtrace/ndtrace/internal/termsafe"
	_ "github.com/ndtrace/ndtrace/store/drivers" // every storage URL scheme
)

// command is one subcommand of the CLI.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"trace":    {"trace one function call in the sandbox and print its events as JSON Lines", runTrace},
	"render":   {"trace a call and render one debugger trajectory (grammar text, JSON or CWM format)", runRender},
	"prompts":  {"build evaluation prompts (CruxEval input/output prediction, next-state sets)", runPrompts},
	"run":      {"produce a dataset end to end (embedded Temporal by default; built-in examples without --spec)", runRun},
	"worker":   {"run a worker for a Temporal cluster (scale out by starting more)", runWorker},
	"server":   {"run a persistent Temporal server for this machine (SQLite) with its Web UI; --worker also runs a worker", runServer},
	"submit":   {"start a dataset workflow on a cluster and print its ID", runSubmit},
	"status":   {"show a dataset workflow's progress or result (from its memo when no worker runs)", runStatus},
	"cancel":   {"cancel a dataset workflow and its batches in flight", runCancel},
	"retry":    {"re-run a dataset's spec into a new version: finished batches are reused, failed ones re-run", runRetry},
	"schedule": {"create, list or delete Temporal Schedules that re-run a spec periodically", runSchedule},
	"inspect":  {"print a dataset's rows decoded to text with the loss mask visible", runInspect},
	"validate": {"check a dataset: manifest, shard checksums, schema, counts, every row decodes to its text", runValidate},
	"verify":   {"certify a dataset: re-execute a sample of rows in the sandbox and check they rebuild identically", runVerify},

	"stats": {"print a dataset's statistics: counts, token/action/event distributions, rejects", runStats},

	"native-helper": {"build the sandbox's native helper ahead of time (for images without a C compiler)", runNativeHelper},
	"dashboard":     {"serve a web page of dataset statistics (histograms, actions, rejects) for one or more datasets", runDashboard},
}

// usageError is a mistake in how the command was called (bad flags, bad input); it exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI and returns its exit code: 0 success, 1 failure, 2 bad usage or input.
func run(args []string, stdout, stderr io.Writer) int {
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()})))
	if len(args) == 0 || isHelpArg(args[0]) || args[0] == "help" {
		if len(args) >= 2 && args[0] == "help" {
			if _, ok := commands[args[1]]; ok {
				// "ndtrace help run" is "ndtrace run -h", "ndtrace help schedule create" "ndtrace schedule create -h".
				return run(append(slices.Clone(args[1:]), "-h"), stdout, stderr)
			}
			fmt.Fprintf(stderr, "ndtrace help: unknown command %q (run 'ndtrace help' for the list)\n", args[1])
			return 2
		}
		if len(args) == 0 {
			printUsage(stderr) // no command is a mistake: the usage goes where errors go
			return 2
		}
		printUsage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		msg := fmt.Sprintf("ndtrace: unknown command %q", args[0])
		if s := suggest(args[0], commandNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		fmt.Fprintf(stderr, "%s; run 'ndtrace help' for the list\n", termsafe.String(msg))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.run(ctx, args[1:], stdout, stderr)
	var help helpRequest
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		help.usage(stdout)
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		err = explain(err)
		logChain(err)
		fmt.Fprintf(stderr, "ndtrace %s: %s\n", args[0], termsafe.String(oneLine(err.Error())))
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "ndtrace turns Python code into training data for neural debuggers.")
	fmt.Fprintln(w, "\nUsage: ndtrace <command> [flags]\n\nCommands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-13s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'ndtrace <command> -h' (or 'ndtrace help <command>') for a command's flags. NDTRACE_LOG=debug turns on debug logs.")
}

// commandNames lists the commands in order.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func logLevel() slog.Level {
	if strings.EqualFold(os.Getenv("NDTRACE_LOG"), "debug") {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// oneLine keeps error messages to one line, as scripts reading stderr expect. It does not make
// them safe for a terminal: termsafe.String does, where they are printed.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// newFlagSet returns a FlagSet that reports errors instead of exiting. Parse it with parseFlags
// or parseURLArg: -h and --help print its usage on stdout (exit 0), a bad flag is one line naming
// it (exit 2).
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ndtrace "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ndtrace %s %s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, turning flag errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseQuietly(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q; see %s -h", fs.Arg(0), fs.Name())
	}
	return nil
}
