package crawl

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/costbound"
)

// TestGitOutputCap runs a (fake) git whose ls-remote prints more than maxGitOutput bytes of refs, as
// a hostile remote may advertise: the repository is a reject naming the cap, and no more than the
// cap is kept.
func TestGitOutputCap(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "git")
	// 5 MB of "<oid>\trefs/x/N/HEAD" lines.
	script := "#!/bin/sh\ni=0\nwhile :; do printf '0123456789012345678901234567890123456789\\trefs/x/%s/HEAD\\n' $i; i=$((i+1)); done | head -c 5000000\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := (&Fetcher{Git: fake}).Resolve(context.Background(), Repo{URL: "https://example.invalid/a/b"})
	checkRepoError(t, err, "ls-remote failed: git's output is larger than 4194304 bytes")
}

// TestReadEntry reads ls-tree -z entries as bufio.Reader.ReadString(0) does, refusing one longer
// than its cap without holding more of it.
func TestReadEntry(t *testing.T) {
	long := strings.Repeat("p", 10000)
	tests := []struct {
		name  string
		in    string
		max   int
		want  []string // the entries read before the end
		error error    // the error that ends the reading
	}{
		{"entries", "a\x00bb\x00", 100, []string{"a\x00", "bb\x00"}, nil},
		{"partial last entry", "a\x00b", 100, []string{"a\x00"}, nil},
		{"longer than the buffer", long + "\x00", 20000, []string{long + "\x00"}, nil},
		{"at the cap", "abc\x00", 4, []string{"abc\x00"}, nil},
		{"over the cap", "abcd\x00", 4, nil, errEntryTooLong},
		{"over the cap, past the buffer", long + "\x00", 5000, nil, errEntryTooLong},
		{"over the cap, no NUL", long, 5000, nil, errEntryTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 4096)
			var got []string
			var err error
			for {
				var e string
				if e, err = readEntry(br, tc.max); err != nil {
					break
				}
				got = append(got, e)
			}
			want := tc.error
			if want == nil {
				want = errEntryTooLong
				if !errors.Is(err, errEntryTooLong) {
					want = err // io.EOF
				}
			}
			if !errors.Is(err, want) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, %v; want %q, %v", got, err, tc.want, tc.error)
			}
			if tc.error == nil && errors.Is(err, errEntryTooLong) {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// FuzzReadEntry reads arbitrary ls-tree -z output with a small cap: no entry it returns is longer
// than the cap, the entries it returns are the input's, and it allocates at most a few bytes per
// input byte.
func FuzzReadEntry(f *testing.F) {
	f.Add([]byte("100644 blob 0123 12\tpath\x00"), uint16(100))
	f.Add([]byte(strings.Repeat("p", 9000)+"\x00a\x00"), uint16(5000))
	f.Fuzz(func(t *testing.T, data []byte, maxBytes uint16) {
		br := bufio.NewReaderSize(strings.NewReader(string(data)), 16)
		var got []string
		costbound.Check(t, "readEntry", len(data), costbound.Bound{PerByte: 8, Fixed: 4 << 10}, func() {
			for {
				e, err := readEntry(br, int(maxBytes))
				if err != nil {
					return
				}
				got = append(got, e)
			}
		})
		if s := strings.Join(got, ""); !strings.HasPrefix(string(data), s) {
			t.Fatalf("entries %q are not the input's start", got)
		}
		for _, e := range got {
			if len(e) > int(maxBytes) {
				t.Fatalf("an entry of %d bytes, cap %d", len(e), maxBytes)
			}
		}
	})
}
