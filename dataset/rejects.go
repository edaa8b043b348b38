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
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), maxRejectLine)
		line := 0
		for sc.Scan() {
			line++
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var r schemas.Reject
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return fmt.Errorf("dataset: %s line %d in %s: %w", key, line, st.URL(), err)
			}
			if r.Class == "" {
				r.Class = schemas.RejectClass(ReasonClass(r.Reason))
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("dataset: %s: %w", key, err)
		}
		return nil
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
