package verify

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// The sample of `ndtrace verify` (docs/verify.md, "Sampling").
//
// A stratum is the rows of one shard with one level and one direction. The sample's size n is
// split over the strata before any row is drawn:
//
//   - with at least as many rows to draw as there are strata, every stratum gets one row, and the
//     remaining rows go to the strata in proportion to their other rows (largest remainder, ties
//     to the stratum first in (shard, level, direction) order): every shard, level and direction
//     of the dataset is checked, and a large stratum is checked in proportion to its size;
//   - with fewer, the n strata of smallest priority (a hash of the seed and the stratum) get one
//     row each.
//
// Within a stratum, the rows of smallest priority, a hash of the seed and the row's id, are drawn:
// the sample depends on the seed and on the rows, never on the order the shards are read in, and
// the same seed over the same dataset always draws the same rows. Reading takes two passes over
// the shards, one shard at a time: the first counts the strata (reading three columns), the second
// reads only the shards drawn from and keeps at most a stratum's allocation of rows, so memory is
// bounded by a shard and the sample, never by the dataset.

// stratum is one stratum of a dataset's rows and the rows drawn from it.
type stratum struct {
	Shard     string
	Level     string
	Direction string
	Rows      int64
	// Take is how many rows the sample draws from it.
	Take int
}

// key orders strata: by shard, level, direction.
func (s stratum) key() string { return s.Shard + "\x00" + s.Level + "\x00" + s.Direction }

func compareStrata(a, b stratum) int {
	return cmp.Or(cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.Level, b.Level), cmp.Compare(a.Direction, b.Direction))
}

// priority is the hash of the seed and s that orders rows (and strata) in the sample.
func priority(seed uint64, s string) uint64 {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(s))
	return binary.LittleEndian.Uint64(h.Sum(nil)[:8])
}

// sampleSize is the number of rows a sample of total rows draws: fraction of them (rounded up)
// when fraction is positive, else n; never more than total.
func sampleSize(total int64, n int, fraction float64) int {
	if fraction > 0 {
		return int(min(int64(math.Ceil(fraction*float64(total))), total))
	}
	return int(min(int64(n), total))
}

// allocate sets Take of every stratum (sorted by compareStrata) so that they sum to n (at most
// the strata's rows), as the package comment on sampling says.
func allocate(strata []stratum, n int, seed uint64) {
	var total int64
	for i := range strata {
		strata[i].Take = 0
		total += strata[i].Rows
	}
	n = int(min(int64(n), total))
	if n <= 0 {
		return
	}
	if n < len(strata) {
		idx := make([]int, len(strata))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(priority(seed, strata[a].key()), priority(seed, strata[b].key())), a-b)
		})
		for _, i := range idx[:n] {
			strata[i].Take = 1
		}
		return
	}
	rest := int64(n - len(strata))
	others := total - int64(len(strata))
	type remainder struct {
		i    int
		frac float64
	}
	var rems []remainder
	given := int64(0)
	for i := range strata {
		strata[i].Take = 1
		if others == 0 {
			continue
		}
		exact := float64(rest) * float64(strata[i].Rows-1) / float64(others)
		whole := int64(math.Floor(exact))
		strata[i].Take += int(whole)
		given += whole
		rems = append(rems, remainder{i, exact - float64(whole)})
	}
	slices.SortStableFunc(rems, func(a, b remainder) int { return cmp.Compare(b.frac, a.frac) })
	for k := 0; given < rest && k < len(rems); k++ {
		if s := &strata[rems[k].i]; int64(s.Take) < s.Rows {
			s.Take++
			given++
		}
	}
}

// drawn is a row drawn into the sample and its priority in its stratum.
type drawn struct {
	prio uint64
	row  schemas.Row
}

// reservoir keeps the take rows of smallest priority offered to it.
type reservoir struct {
	take int
	rows []drawn // sorted by priority, then id
}

func (r *reservoir) offer(prio uint64, row *schemas.Row) {
	less := func(a drawn) int { return cmp.Or(cmp.Compare(a.prio, prio), cmp.Compare(a.row.ID, row.ID)) }
	if len(r.rows) == r.take && less(r.rows[len(r.rows)-1]) <= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(r.rows, 0, func(a drawn, _ int) int { return less(a) })
	r.rows = slices.Insert(r.rows, i, drawn{prio, *row})
	if len(r.rows) > r.take {
		r.rows = r.rows[:r.take]
	}
}

// countStrata reads the level and direction of every row of the version whose manifest is m and
// returns its strata, sorted.
func countStrata(ctx context.Context, s *store.Store, m *dataset.Manifest) ([]stratum, error) {
	var out []stratum
	err := m.EachShard(ctx, s, func(sh dataset.ShardInfo) error {
		counts := map[[2]string]int64{}
		if err := dataset.EachRowKey(ctx, s, sh.Path, func(_ int64, k *dataset.RowKey) error {
			counts[[2]string{k.Level, k.Direction}]++
			return nil
		}); err != nil {
			return err
		}
		for k, n := range counts {
			out = append(out, stratum{Shard: sh.Path, Level: k[0], Direction: k[1], Rows: n})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count the strata: %w", err)
	}
	slices.SortFunc(out, compareStrata)
	return out, nil
}

// drawRows reads the shards the allocated strata draw from and returns the rows drawn, in strata
// order and, within a stratum, by priority.
func drawRows(ctx context.Context, s *store.Store, strata []stratum, seed uint64) ([]schemas.Row, error) {
	var out []schemas.Row
	for i := 0; i < len(strata); {
		shard := strata[i].Shard
		j := i
		res := map[[2]string]*reservoir{}
		for ; j < len(strata) && strata[j].Shard == shard; j++ {
			if strata[j].Take > 0 {
				res[[2]string{strata[j].Level, strata[j].Direction}] = &reservoir{take: strata[j].Take}
			}
		}
		if len(res) > 0 {
			err := dataset.EachRow(ctx, s, shard, func(_ int64, r *schemas.Row) error {
				if rv := res[[2]string{r.Level, r.Direction}]; rv != nil {
					rv.offer(priority(seed, r.ID), r)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("draw the sample: %w", err)
			}
			for k := i; k < j; k++ {
				if rv := res[[2]string{strata[k].Level, strata[k].Direction}]; rv != nil {
					for _, d := range rv.rows {
						out = append(out, d.row)
					}
				}
			}
		}
		i = j
	}
	return out, nil
}
