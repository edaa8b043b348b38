package crawl

import (
	"bufio"
	"bytes"
	"io"
)

// MaxLine is the longest line EachLine and Scan read (a JSONL row of a corpus, a repository list
// line).
const MaxLine = 64 << 20

// EachLine calls fn with the 1-based number and the space-trimmed text of every non-blank line of r
// (JSON Lines: a corpus, an evaluation set), in order, stopping at the first error fn returns. Lines
// longer than MaxLine are an error.
func EachLine(r io.Reader, fn func(line int, text []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), MaxLine)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		if err := fn(line, text); err != nil {
			return err
		}
	}
	return sc.Err()
}
