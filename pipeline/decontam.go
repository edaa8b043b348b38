package pipeline

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
)

// evalSetCache keeps the evaluation sets a process has indexed, by their spec entry and the
// hash of their file, so that building every batch's rows does not index them again.
var evalSetCache = struct {
	sync.Mutex
	sets map[string]*crawl.EvalSet
}{sets: map[string]*crawl.EvalSet{}}

// maxCachedEvalSets bounds evalSetCache.
const maxCachedEvalSets = 16

// cachedEvalSets reads the evaluation sets of a spec, indexing each file once per process.
func cachedEvalSets(ctx context.Context, spec schemas.Spec) ([]*crawl.EvalSet, error) {
	var sets []*crawl.EvalSet
	for i, e := range spec.Decontaminate {
		data, err := crawl.ReadEvalFile(ctx, e.Path)
		if err != nil {
			return nil, execute.BadInput("decontaminate[%d]: evaluation set %s: %v", i, e.Name, err)
		}
		key := fmt.Sprintf("%s\x00%s\x00%d\x00%g\x00%x", e.Name, e.Path, e.Ngram, e.Threshold, sha256.Sum256(data))
		evalSetCache.Lock()
		set := evalSetCache.sets[key]
		evalSetCache.Unlock()
		if set == nil {
			if set, err = crawl.ParseEvalSet(e.Name, e.Path, data, e.Ngram, e.Threshold); err != nil {
				return nil, execute.BadInput("decontaminate[%d]: %v", i, err)
			}
			evalSetCache.Lock()
			if len(evalSetCache.sets) >= maxCachedEvalSets {
				clear(evalSetCache.sets)
			}
			evalSetCache.sets[key] = set
			evalSetCache.Unlock()
		}
		sets = append(sets, set)
	}
	return sets, nil
}

// Decontaminator is the check rows.Options.Decontaminate of a spec's evaluation sets: the first
// set (in spec order) one of whose items code holds, and that item. Results are kept per code
// text's hash for the batch (repository rows of one test often share their CODE context); it is
// not safe for concurrent use.
func Decontaminator(sets []*crawl.EvalSet) func(code string) (set, item string, hit bool) {
	if len(sets) == 0 {
		return nil
	}
	type result struct {
		set, item string
		hit       bool
	}
	seen := map[[32]byte]result{}
	return func(code string) (string, string, bool) {
		key := sha256.Sum256([]byte(code))
		if r, ok := seen[key]; ok {
			return r.set, r.item, r.hit
		}
		var r result
		for _, s := range sets {
			if item, hit := s.Match(code); hit {
				r = result{s.Name, item, true}
				break
			}
		}
		if len(seen) >= 4096 {
			clear(seen)
		}
		seen[key] = r
		return r.set, r.item, r.hit
	}
}
