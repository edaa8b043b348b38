package sandbox

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/gencorpus"
	"github.com/ndtrace/ndtrace/schemas"
)

// recordedWorkloads are the programs whose real events streams BenchmarkDecodeRecorded decodes.
var recordedWorkloads = []struct{ name, code, call string }{
	// The CPU-bound call: a long trace of one frame with four small locals.
	{"loop", gencorpus.LoopWorkload, "f(60000)"},
	// Many short calls, strings, a growing list kept small, an exception per call.
	{"calls", `def helper(s, k):
    out = s.upper() + "<" + str(k) + ">"
    try:
        if k % 7 == 0:
            raise ValueError(k)
    except ValueError as e:
        out = repr(e)
    return out

def f(n):
    acc = []
    last = ''
    for i in range(n):
        last = helper("ab\tc", i)
        if len(acc) < 5:
            acc.append(last)
    return len(acc), last
`, "f(15000)"},
}

type recorded struct {
	key    []byte
	stream []byte
	events int
}

var (
	recordOnce sync.Once
	recordings map[string]recorded
	recordErr  error
)

// recordStreams runs each recorded workload once in a real sandbox and keeps its events stream,
// as the tracer wrote it, with its key.
func recordStreams(b *testing.B) map[string]recorded {
	recordOnce.Do(func() {
		sb, err := New(context.Background(), Config{})
		if err != nil {
			recordErr = err
			return
		}
		defer sb.Close()
		recordings = map[string]recorded{}
		for _, w := range recordedWorkloads {
			var buf bytes.Buffer
			var key []byte
			recordEvents = func(k []byte, r io.Reader) io.Reader {
				key = append([]byte(nil), k...)
				return io.TeeReader(r, &buf)
			}
			res, err := sb.Run(context.Background(), Request{Code: w.code, Call: w.call,
				Limits: Limits{TraceEvents: 1 << 22, TraceBytes: 1 << 31, WallTime: time.Minute, CPUTime: time.Minute}})
			recordEvents = nil
			if err != nil || res.Status != schemas.StatusOK {
				recordErr = err
				if err == nil {
					recordErr = io.ErrUnexpectedEOF
				}
				return
			}
			recordings[w.name] = recorded{key: key, stream: buf.Bytes(), events: len(res.Events)}
		}
	})
	if recordErr != nil {
		b.Skipf("no sandbox to record a stream: %v", recordErr)
	}
	return recordings
}

// BenchmarkDecodeRecorded decodes real events streams, recorded from the tracer in a sandbox
// (recordedWorkloads), and reports MB/s of stream: /new is the decoder, /old the original decoder
// (a map per frame rebuilt at every event) on the same bytes, the baseline of the same run.
func BenchmarkDecodeRecorded(b *testing.B) {
	recs := recordStreams(b)
	lim := decodeLimits{MaxEvents: 1 << 22, MaxBytes: 1 << 32}
	for _, w := range recordedWorkloads {
		rec := recs[w.name]
		b.Run(w.name+"/old", func(b *testing.B) { benchDecode(b, rec.stream, true, lim, outcomeOK) })
		b.Run(w.name+"/new", func(b *testing.B) {
			benchDecodeKey(b, rec.key, rec.stream, lim, rec.events)
		})
	}
}

// benchDecodeKey is benchDecode's new decoder on a stream sealed with key; it checks the events.
func benchDecodeKey(b *testing.B, key, stream []byte, lim decodeLimits, events int) {
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		d := newDecoder(key, lim)
		if o, why := d.read(context.Background(), bytes.NewReader(stream)); o != outcomeOK {
			b.Fatalf("%v %s", o, why)
		}
		if len(d.events) != events {
			b.Fatalf("%d events, want %d", len(d.events), events)
		}
	}
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
