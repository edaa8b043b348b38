package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// EachReject calls fn with every reject of the version whose manifest is m, in order: the objects
// its manifest references (each checked against its sha256), or rejects.jsonl for an older
// version (RejectsKey). ok is false when an older version has no rejects.jsonl. Memory is bounded by one
// rejects object (a page's).
func EachReject(ctx context.Context, st *store.Store, m *Manifest, fn func(schemas.Reject) error) (ok bool, err error) {
	each := func(key string, data []byte) error {
		return eachJSONLine(data, key, st.URL(), maxRejectLine, func(r schemas.Reject) error {
			if r.Class == "" {
				r.Class = schemas.RejectClass(ReasonClass(r.Reason))
			}
			return fn(r)
		})
	}
	if m.Version != "" {
		for _, ref := range m.Rejects {
			data, err := ReadObject(ctx, st, ref)
			if err != nil {
				return false, err
			}
			if err := each(ref.Key, data); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	data, err := st.ReadAll(ctx, RejectsKey)
	if store.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, each(RejectsKey, data)
}

// eachJSONLine decodes the JSON Lines of the object key of the store at url (data), skipping
// blank lines, and calls fn with each record; lines are at most maxLine bytes.
func eachJSONLine[T any](data []byte, key, url string, maxLine int, fn func(T) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return fmt.Errorf("dataset: %s line %d in %s: %w", key, line, url, err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("dataset: %s: %w", key, err)
	}
	return nil
}
