package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/ndtrace/ndtrace/store"
)

// readJSON decodes the JSON object stored at key. A missing key gives an error for which
// store.IsNotExist is true; a malformed object an error naming what it is.
func readJSON[T any](ctx context.Context, s *store.Store, key, what string) (*T, error) {
	data, err := s.ReadAll(ctx, key)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// readDone returns the result a stage recorded at key when it finished (its done marker), or nil
// if it has not.
func readDone[T any](ctx context.Context, s *store.Store, key, what string) (*T, error) {
	v, err := readJSON[T](ctx, s, key, what)
	if store.IsNotExist(err) {
		return nil, nil
	}
	return v, err
}

// readJSONL decodes every non-empty line of the JSON Lines object stored at key. A missing key
// gives an error for which store.IsNotExist is true.
func readJSONL[T any](ctx context.Context, s *store.Store, key string) ([]T, error) {
	data, err := s.ReadAll(ctx, key)
	if err != nil {
		return nil, err
	}
	var out []T
	err = eachJSONLine(data, func(line []byte) error {
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return out, nil
}

// eachJSONLine calls fn with every non-empty line of data.
func eachJSONLine(data []byte, fn func([]byte) error) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line := data
		if i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	return nil
}
