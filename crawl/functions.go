package crawl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"

	"gocloud.dev/blob"

	"github.com/ndtrace/ndtrace/schemas"
)

// Item is one function-level call to trace.
type Item struct {
	// Key identifies the item within its source ("corpus.jsonl#sample_0", "f.py#2").
	Key string `json:"key"`
	// Path is the source file; SourceID the corpus row id or call index.
	Path     string `json:"path"`
	SourceID string `json:"source_id"`
	// Code is the module source, Filename what it is compiled as, Call the traced expression.
	Code     string `json:"code"`
	Filename string `json:"filename"`
	Call     string `json:"call"`
	// QualName is the called function's name when known.
	QualName string `json:"qualname"`
}

// Hash is the item's content hash: it changes exactly when what is traced changes.
func (it Item) Hash() string {
	h := sha256.New()
	for _, f := range []string{it.Key, it.Filename, it.Code, it.Call} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Reject is an input that gives no item, and why.
type Reject struct {
	Source string `json:"source"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// Items reads one source of a spec. Malformed entries (a row that is not JSON, a row without code)
// become rejects; an unreadable source is an error.
func Items(ctx context.Context, src schemas.SourceSpec) ([]Item, []Reject, error) {
	var items []Item
	var rejects []Reject
	switch src.Kind {
	case "examples":
		for i, c := range exampleCalls {
			items = append(items, Item{Key: fmt.Sprintf("examples#%d", i), Path: "examples/functions.py",
				SourceID: fmt.Sprint(i), Code: examplesCode, Filename: "functions.py", Call: c, QualName: funcName(c)})
		}
	case "python":
		data, err := ReadFile(ctx, src.Path)
		if err != nil {
			return nil, nil, err
		}
		for i, c := range src.Calls {
			items = append(items, Item{Key: fmt.Sprintf("%s#%d", src.Path, i), Path: src.Path, SourceID: fmt.Sprint(i),
				Code: string(data), Filename: path.Base(src.Path), Call: c, QualName: funcName(c)})
		}
	case "jsonl":
		data, err := ReadFile(ctx, src.Path)
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		line := 0
		for sc.Scan() {
			line++
			text := strings.TrimSpace(sc.Text())
			if text == "" {
				continue
			}
			key := fmt.Sprintf("%s:%d", src.Path, line)
			var row struct {
				ID, Code, Input string
			}
			if err := json.Unmarshal([]byte(text), &row); err != nil {
				rejects = append(rejects, Reject{Source: src.Path, Key: key, Reason: "malformed JSON: " + err.Error()})
				continue
			}
			if row.ID != "" {
				key = src.Path + "#" + row.ID
			}
			if strings.TrimSpace(row.Code) == "" {
				rejects = append(rejects, Reject{Source: src.Path, Key: key, Reason: "missing code"})
				continue
			}
			id := row.ID
			if id == "" {
				id = fmt.Sprintf("line-%d", line)
			}
			items = append(items, Item{Key: key, Path: src.Path, SourceID: id, Code: row.Code, Filename: "main.py",
				Call: fmt.Sprintf("%s(%s)", src.Func, row.Input), QualName: src.Func})
		}
		if err := sc.Err(); err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", src.Path, err)
		}
	default:
		return nil, nil, fmt.Errorf("crawl: unsupported source kind %q", src.Kind)
	}
	if src.Limit > 0 && len(items) > src.Limit {
		items = items[:src.Limit]
	}
	return items, rejects, nil
}

// funcName is the function a call expression calls, if it is a plain name.
func funcName(call string) string {
	if i := strings.IndexByte(call, '('); i > 0 {
		return strings.TrimSpace(call[:i])
	}
	return ""
}

// ReadFile reads a local path or a bucket URL (s3://bucket/key?…, gs://…, azblob://…, file:///…).
func ReadFile(ctx context.Context, p string) ([]byte, error) {
	u, err := url.Parse(p)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 { // no scheme (or a Windows drive letter)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("crawl: %w", err)
		}
		return b, nil
	}
	key := strings.TrimPrefix(u.Path, "/")
	bucketURL := *u
	if u.Scheme == "file" {
		bucketURL.Path = path.Dir(u.Path)
		key = path.Base(u.Path)
	} else {
		bucketURL.Path = ""
	}
	b, err := blob.OpenBucket(ctx, bucketURL.String())
	if err != nil {
		return nil, fmt.Errorf("crawl: open %s: %w", p, err)
	}
	defer b.Close()
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, fmt.Errorf("crawl: read %s: %w", p, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("crawl: read %s: %w", p, err)
	}
	return data, nil
}
