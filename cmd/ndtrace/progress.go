package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/internal/progress"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/workflows"
)

// progressView shows a run's progress as it goes: update with every progress polled, finish once
// with the last (ok: the run committed).
type progressView interface {
	update(p workflows.Progress)
	finish(p workflows.Progress, ok bool)
}

// snapshotOf is the progress model's view of a dataset workflow's progress.
func snapshotOf(p workflows.Progress) progress.Snapshot {
	return progress.Snapshot{Phase: p.Phase, Items: p.Items, ItemsDone: p.ItemsDone, Trajectories: p.Rows,
		Tokens: p.Tokens, Rejects: p.Rejected, Batches: p.Batches, BatchesDone: p.BatchesDone,
		BatchesFailed: p.BatchesFailed, InFlight: len(p.InFlight), Started: p.Started, GenUnits: p.GenUnits, GenWall: p.GenWall}
}

// canRedraw reports whether w is a terminal that can redraw in place (not TERM=dumb).
func canRedraw(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

// newProgressView picks how progress shows on w: a status block redrawn in place when w is a
// terminal and the logs are text; otherwise a line at most every `every` (progress.Throttle), as
// text, or as slog records when the logs are JSON. logs is the writer the text logs go to; a live
// block routes it above itself while it is on the screen.
func newProgressView(w io.Writer, jsonLogs bool, every time.Duration, logs *logSwitch) progressView {
	if !jsonLogs && canRedraw(w) {
		return &liveView{out: w, logs: logs, meter: progress.NewMeter(nil, 0)}
	}
	return &lineView{out: w, json: jsonLogs, meter: progress.NewMeter(nil, 0), throttle: progress.NewThrottle(nil, every, 0)}
}

// lineView prints progress lines (or slog records) to an output that is not a terminal: the
// first, then at most one a period, and the final one.
type lineView struct {
	out      io.Writer
	json     bool
	meter    *progress.Meter
	throttle *progress.Throttle
}

func (v *lineView) update(p workflows.Progress) {
	s := snapshotOf(p)
	st := v.meter.Update(s)
	if v.throttle.Allow(s) {
		v.print(st, false)
	}
}

func (v *lineView) finish(p workflows.Progress, ok bool) {
	if p.Phase == "" {
		return // the run ended before any progress came: nothing to tell
	}
	v.print(v.meter.Update(snapshotOf(p)), true)
}

func (v *lineView) print(st progress.Status, final bool) {
	if !v.json {
		fmt.Fprintln(v.out, progressLine(st))
		return
	}
	attrs := []any{"phase", st.Phase, "items_done", st.ItemsDone, "items", st.Items,
		"trajectories", st.Trajectories, "tokens", st.Tokens, "rejects", st.Rejects,
		"batches_done", st.BatchesDone, "batches", st.Batches, "batches_failed", st.BatchesFailed,
		"in_flight", st.InFlight, "items_per_second", round1(st.Rate), "elapsed_seconds", int64(st.Elapsed.Seconds())}
	if st.GenUnits > 0 {
		attrs = append(attrs, "generated_functions", st.GenUnits, "generation_ms_per_function", genCost(st).Milliseconds())
	}
	if st.ETAKnown {
		attrs = append(attrs, "eta_seconds", int64(st.ETA.Seconds()))
	}
	if final {
		attrs = append(attrs, "final", true)
	}
	slog.Info("progress", attrs...)
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// genCost is the mean time generating one function's inputs took (st.GenUnits > 0).
func genCost(st progress.Status) time.Duration {
	return (st.GenWall / time.Duration(st.GenUnits)).Round(time.Millisecond)
}

// progressLine formats a status on one line (ndtrace status, and run's output when it is not a
// terminal), its text escaped for a terminal.
func progressLine(st progress.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d/%d items traced, %d trajectories, %d tokens, %d rejects, %d/%d batches",
		termsafe.String(st.Phase), st.ItemsDone, st.Items, st.Trajectories, st.Tokens, st.Rejects, st.BatchesDone, st.Batches)
	if st.InFlight > 0 {
		fmt.Fprintf(&b, " (%d in flight)", st.InFlight)
	}
	if st.BatchesFailed > 0 {
		fmt.Fprintf(&b, ", %d batches failed", st.BatchesFailed)
	}
	if st.GenUnits > 0 {
		fmt.Fprintf(&b, ", inputs generated for %d functions", st.GenUnits)
		if st.GenWall > 0 {
			fmt.Fprintf(&b, " (%s per function)", genCost(st))
		}
	}
	if st.Rate > 0 {
		fmt.Fprintf(&b, ", %.1f items/s", st.Rate)
	}
	if st.ETAKnown {
		fmt.Fprintf(&b, ", ETA %s", st.ETA)
	}
	if st.Elapsed > 0 {
		fmt.Fprintf(&b, ", elapsed %s", st.Elapsed.Round(time.Second))
	}
	return b.String()
}

// liveView is a status block on a terminal, redrawn in place (mpb) until the run ends:
//
//	tracing     [=========>--------------]  12,345/50,000 items  24%
//	            312.4 items/s · ETA 2m1s · elapsed 40s
//	            24,690 trajectories · 8,123,456 tokens · 17 rejects
//	            batches 123/500 · 4 in flight · 0 failed
type liveView struct {
	out   io.Writer
	logs  *logSwitch
	meter *progress.Meter

	mu sync.Mutex
	st progress.Status

	p     *mpb.Progress
	items *mpb.Bar
	lines []*mpb.Bar
}

// liveIndent lines the block's later lines up under the bar.
const liveIndent = "            "

func (v *liveView) status() progress.Status {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.st
}

// start puts the block on the screen; the logs print above it from now on.
func (v *liveView) start() {
	v.p = mpb.New(mpb.WithOutput(v.out), mpb.WithConsoleWriter(sizedWriter{cupwriter.New(v.out, false)}),
		mpb.WithRefreshRate(200*time.Millisecond))
	text := func(f func(progress.Status) string) decor.Decorator {
		return decor.Any(func(decor.Statistics) string { return f(v.status()) })
	}
	v.items = v.p.New(0, mpb.BarStyle(),
		mpb.PrependDecorators(text(func(st progress.Status) string { return fmt.Sprintf("%-11s", termsafe.String(st.Phase)) })),
		mpb.AppendDecorators(text(func(st progress.Status) string {
			s := fmt.Sprintf("%s/%s items", numfmt.Thousands(int64(st.ItemsDone)), numfmt.Thousands(int64(st.Items)))
			if st.Items > 0 {
				s += fmt.Sprintf("  %d%%", 100*st.ItemsDone/st.Items)
			}
			return s
		})))
	for _, f := range []func(progress.Status) string{
		func(st progress.Status) string {
			rate, eta := "- items/s", "ETA -"
			if st.Rate > 0 {
				rate = fmt.Sprintf("%.1f items/s", st.Rate)
			}
			if st.ETAKnown {
				eta = "ETA " + st.ETA.String()
			}
			return liveIndent + rate + " · " + eta + " · elapsed " + st.Elapsed.Round(time.Second).String()
		},
		func(st progress.Status) string {
			s := fmt.Sprintf("%s%s trajectories · %s tokens · %s rejects", liveIndent,
				numfmt.Thousands(int64(st.Trajectories)), numfmt.Thousands(st.Tokens), numfmt.Thousands(int64(st.Rejects)))
			if st.GenUnits > 0 {
				// Generating inputs (issue 30): how many functions, and what one costs.
				s += fmt.Sprintf(" · inputs for %s functions", numfmt.Thousands(st.GenUnits))
				if st.GenWall > 0 {
					s += fmt.Sprintf(" (%s each)", genCost(st))
				}
			}
			return s
		},
		func(st progress.Status) string {
			return fmt.Sprintf("%sbatches %s/%s · %d in flight · %d failed", liveIndent,
				numfmt.Thousands(int64(st.BatchesDone)), numfmt.Thousands(int64(st.Batches)), st.InFlight, st.BatchesFailed)
		},
	} {
		v.lines = append(v.lines, v.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(text(f))))
	}
	v.logs.set(v.p)
}

func (v *liveView) update(p workflows.Progress) {
	st := v.meter.Update(snapshotOf(p))
	v.mu.Lock()
	v.st = st
	v.mu.Unlock()
	if v.p == nil {
		v.start()
	}
	v.items.SetTotal(int64(st.Items), false)
	v.items.SetCurrent(int64(st.ItemsDone))
}

// finish draws the block a last time, leaves it on the screen and gives the terminal back to the
// logs.
func (v *liveView) finish(p workflows.Progress, ok bool) {
	if p.Phase == "" && v.p == nil {
		return // the run ended before any progress came: no block to leave
	}
	v.update(p)
	for _, b := range append([]*mpb.Bar{v.items}, v.lines...) {
		if ok {
			b.SetTotal(-1, true)
		} else {
			b.Abort(false)
		}
	}
	v.p.Wait()
	v.logs.set(nil)
}

// sizedWriter is mpb's terminal writer for a terminal that reports no size (a serial console, a
// fresh pseudo-terminal): 80 columns by 24 lines then, where mpb would draw nothing.
type sizedWriter struct{ *cupwriter.Writer }

func (w sizedWriter) GetTermSize() (width, height int, err error) {
	width, height, err = w.Writer.GetTermSize()
	if err == nil && (width <= 0 || height <= 0) {
		return 80, 24, nil
	}
	return width, height, err
}

// logSwitch is the writer text logs go to: the terminal, or while a live block is on it, the
// block's container, which prints them above the block.
type logSwitch struct {
	mu    sync.Mutex
	out   io.Writer
	above io.Writer
}

func (l *logSwitch) set(above io.Writer) {
	l.mu.Lock()
	l.above = above
	l.mu.Unlock()
}

func (l *logSwitch) Write(b []byte) (int, error) {
	l.mu.Lock()
	above := l.above
	l.mu.Unlock()
	if above != nil {
		if n, err := above.Write(b); err == nil {
			return n, nil
		}
	}
	return l.out.Write(b)
}

// setLogs sets the default logger of a command with --log-format: JSON records (info and up) to
// stderr, or text (warnings and up, unless NDTRACE_LOG=debug) to logs; text with no logs leaves
// the logger as it is.
func setLogs(format string, stderr io.Writer, logs io.Writer) error {
	switch format {
	case "json":
		// For log collectors: info and up (debug with NDTRACE_LOG=debug), one JSON object a line.
		level := slog.LevelInfo
		if logLevel() == slog.LevelDebug {
			level = slog.LevelDebug
		}
		// JSON escapes C0 controls but not C1 or bidi ones: termsafe.Handler escapes the records'
		// text (slog's text handler quotes it itself).
		slog.SetDefault(slog.New(termsafe.Handler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))))
	case "text":
		if logs != nil {
			slog.SetDefault(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: logLevel()})))
		}
	default:
		return usagef("--log-format %q: want text or json", format)
	}
	return nil
}
