package crawl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ndtrace/ndtrace/internal/pylex"
)

// NormalizeSource returns Python source in a canonical form for exact deduplication and
// decontamination: comments, blank lines and trailing whitespace are removed, line continuations
// joined (as are lines inside brackets), runs of spaces and tabs outside string literals become one
// space, and leading whitespace becomes one tab per indentation level. String literals are kept byte
// for byte.
// Two functions that differ only in formatting or comments normalize to the same text; renaming an
// identifier or changing a literal does not.
func NormalizeSource(src string) string {
	src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n")
	var out []string
	var indents []int // the stack of indentation widths seen
	var cur strings.Builder
	i := 0
	depth := 0 // open brackets: newlines inside them do not end a logical line
	atLineStart := true
	flush := func() {
		line := strings.TrimRight(cur.String(), " ")
		cur.Reset()
		if strings.TrimSpace(line) != "" {
			out = append(out, line)
		}
	}
	for i < len(src) {
		c := src[i]
		if atLineStart {
			// Measure the indentation of a new logical line.
			w := 0
			j := i
			for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
				if src[j] == '\t' {
					w += 8 - w%8
				} else {
					w++
				}
				j++
			}
			if j < len(src) && (src[j] == '\n' || src[j] == '#') {
				// Blank or comment-only line: skip to its end.
				for j < len(src) && src[j] != '\n' {
					j++
				}
				i = j + 1
				continue
			}
			for len(indents) > 0 && indents[len(indents)-1] > w {
				indents = indents[:len(indents)-1]
			}
			if w > 0 && (len(indents) == 0 || indents[len(indents)-1] < w) {
				indents = append(indents, w)
			}
			cur.WriteString(strings.Repeat("\t", len(indents)))
			i = j
			atLineStart = false
			continue
		}
		switch {
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			i += 2
			writeSpace(&cur)
		case c == '\n':
			i++
			if depth > 0 {
				writeSpace(&cur)
				continue
			}
			flush()
			atLineStart = true
		case c == ' ' || c == '\t':
			for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
				i++
			}
			writeSpace(&cur)
		case c == '\'' || c == '"':
			n := pylex.StringEnd(src[i:], true) // a line ends at "\n" only, as the keys always read it
			cur.WriteString(src[i : i+n])
			i += n
		default:
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				if depth > 0 {
					depth--
				}
			}
			cur.WriteByte(c)
			i++
		}
	}
	flush()
	return strings.Join(out, "\n")
}

// writeSpace writes one space unless the text ends in a space, a tab (indentation) or is empty.
func writeSpace(b *strings.Builder) {
	s := b.String()
	if s == "" || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return
	}
	b.WriteByte(' ')
}

// DedupKey is the key of exact deduplication of a function-level item: the hex SHA-256 of its
// normalized source and its call (whitespace outside string literals removed from the call).
func DedupKey(code, call string) string {
	h := sha256.New()
	h.Write([]byte(NormalizeSource(code)))
	h.Write([]byte{0})
	h.Write([]byte(NormalizeSource(call)))
	return hex.EncodeToString(h.Sum(nil))
}

// dedupKeyDeps is the dedup key of a function-level item found in a repository: the hex SHA-256
// of its normalized source and call, as DedupKey's, followed by a NUL, "deps:" and deps (the hex
// hash of the repository code its module runs, Item.Deps). Two items have the same key only when
// their function, call and that code are the same.
func dedupKeyDeps(code, call, deps string) string {
	h := sha256.New()
	h.Write([]byte(NormalizeSource(code)))
	h.Write([]byte{0})
	h.Write([]byte(NormalizeSource(call)))
	h.Write([]byte("\x00deps:"))
	h.Write([]byte(deps))
	return hex.EncodeToString(h.Sum(nil))
}

// SourceKey is the key of decontamination: the hex SHA-256 of the normalized source alone.
func SourceKey(code string) string {
	sum := sha256.Sum256([]byte(NormalizeSource(code)))
	return hex.EncodeToString(sum[:])
}

// EvalSet is an evaluation set items are decontaminated against: the normalized sources of its
// items (exact matches) and the token n-grams of their functions (near matches, see decontam.go).
type EvalSet struct {
	// Name names the set in counts ("decontaminated:<name>").
	Name string
	// Keys holds the SourceKey of every item of the set.
	Keys map[string]bool
	// Items names the set's items in file order: their "id" field, or "line N".
	Items []string
	// byKey maps a SourceKey to the first item with it.
	byKey map[string]int
	// index holds the n-grams of the items' functions (nil: exact matches only).
	index *ngramIndex
}

// Contains reports whether code normalizes to the source of an item of the set.
func (e *EvalSet) Contains(code string) bool { return e.Keys[SourceKey(code)] }

// ReadEvalSet reads an evaluation set from a JSONL file (a local path or bucket URL) whose rows have
// a "code" field (the CruxEval format) and optionally an "id"; rows without code are an error
// naming the line. Its n-gram index uses DefaultNgram and DefaultThreshold.
func ReadEvalSet(ctx context.Context, name, path string) (*EvalSet, error) {
	return ReadEvalSetNgram(ctx, name, path, DefaultNgram, DefaultThreshold)
}

// ReadEvalSetNgram is ReadEvalSet with the n-gram length and match threshold of the set's near
// matches (Match); 0 takes the default.
func ReadEvalSetNgram(ctx context.Context, name, path string, n int, threshold float64) (*EvalSet, error) {
	data, err := ReadEvalFile(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("evaluation set %s: %w", name, err)
	}
	return ParseEvalSet(name, path, data, n, threshold)
}

// MaxEvalSetBytes bounds an evaluation set's file, and MaxEvalGrams the n-grams its index holds
// (some 70 bytes of memory each): CruxEval's 800 items are 187 KB and 20,000 n-grams. A larger
// set is an error, never read in part (an item left out would leak into the rows).
const (
	MaxEvalSetBytes = 256 << 20
	MaxEvalGrams    = 1 << 22
)

// evalGramLimit and evalFileLimit are MaxEvalGrams and MaxEvalSetBytes (lowered in tests).
var evalGramLimit, evalFileLimit = MaxEvalGrams, MaxEvalSetBytes

// ReadEvalFile reads an evaluation set's file (a local path or bucket URL), at most
// MaxEvalSetBytes: a longer one is an error.
func ReadEvalFile(ctx context.Context, path string) ([]byte, error) {
	r, err := OpenAt(ctx, path, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, int64(evalFileLimit)+1))
	if err != nil {
		return nil, fmt.Errorf("crawl: read %s: %w", path, err)
	}
	if len(data) > evalFileLimit {
		return nil, fmt.Errorf("crawl: %s is larger than %d bytes", path, evalFileLimit)
	}
	return data, nil
}

// ParseEvalSet is ReadEvalSetNgram for the file's content data (path names it in errors).
func ParseEvalSet(name, path string, data []byte, n int, threshold float64) (*EvalSet, error) {
	set := &EvalSet{Name: name, Keys: map[string]bool{}, byKey: map[string]int{}, index: newNgramIndex(n, threshold)}
	err := EachLine(bytes.NewReader(data), func(line int, text []byte) error {
		var row struct {
			Code *string         `json:"code"`
			ID   json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(text, &row); err != nil {
			return fmt.Errorf("evaluation set %s: %s line %d: %w", name, path, line, err)
		}
		if row.Code == nil {
			return fmt.Errorf("evaluation set %s: %s line %d: no \"code\" field", name, path, line)
		}
		key := SourceKey(*row.Code)
		if !set.Keys[key] {
			set.Keys[key] = true
			set.byKey[key] = len(set.Items)
		}
		set.index.addItem(len(set.Items), *row.Code)
		if set.index.postings > evalGramLimit {
			return fmt.Errorf("evaluation set %s: %s line %d: more than %d n-grams (the most a set may hold)", name, path, line, evalGramLimit)
		}
		set.Items = append(set.Items, itemLabel(row.ID, line))
		return nil
	})
	if err != nil {
		return nil, err
	}
	set.index.finish()
	return set, nil
}

// itemLabel names an evaluation item: its id (a string as it is, another JSON value as its text),
// or "line N" without one.
func itemLabel(id json.RawMessage, line int) string {
	var s string
	if json.Unmarshal(id, &s) == nil && s != "" {
		return s
	}
	if t := strings.TrimSpace(string(id)); t != "" && t != "null" {
		return t
	}
	return fmt.Sprintf("line %d", line)
}
