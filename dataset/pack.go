package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/ndtrace/ndtrace/schemas"
)

// Pack lays rows end to end into sequences of exactly seqLen tokens, in order: a row goes into the
// current sequence if it fits, otherwise it starts a new one; the rest of each sequence is padID with
// a false mask. A row is never split; a row longer than seqLen is returned in tooLong, not packed. The
// same rows always give the same sequences.
func Pack(rows []schemas.Row, seqLen int, padID int32) (packed []schemas.PackedRow, tooLong []schemas.Row, err error) {
	if seqLen <= 0 {
		return nil, nil, fmt.Errorf("dataset: packing length %d", seqLen)
	}
	var cur *schemas.PackedRow
	flush := func() {
		if cur == nil {
			return
		}
		cur.NumTokens = int32(len(cur.InputIDs))
		cur.NumPadding = int32(seqLen - len(cur.InputIDs))
		for len(cur.InputIDs) < seqLen {
			cur.InputIDs = append(cur.InputIDs, padID)
			cur.LossMask = append(cur.LossMask, false)
		}
		h := sha256.New()
		for _, id := range cur.RowIDs {
			h.Write([]byte(id))
			h.Write([]byte{0})
		}
		cur.ID = hex.EncodeToString(h.Sum(nil))
		packed = append(packed, *cur)
		cur = nil
	}
	for _, r := range rows {
		if len(r.InputIDs) != len(r.LossMask) {
			return nil, nil, fmt.Errorf("dataset: row %s has %d ids and %d mask entries", r.ID, len(r.InputIDs), len(r.LossMask))
		}
		if len(r.InputIDs) > seqLen {
			tooLong = append(tooLong, r)
			continue
		}
		if cur != nil && (len(cur.InputIDs)+len(r.InputIDs) > seqLen || cur.Tokenizer != r.Tokenizer) {
			flush()
		}
		if cur == nil {
			cur = &schemas.PackedRow{InputIDs: make([]int32, 0, seqLen), LossMask: make([]bool, 0, seqLen), Tokenizer: r.Tokenizer}
		}
		cur.SegmentStarts = append(cur.SegmentStarts, int32(len(cur.InputIDs)))
		cur.RowIDs = append(cur.RowIDs, r.ID)
		cur.InputIDs = append(cur.InputIDs, r.InputIDs...)
		cur.LossMask = append(cur.LossMask, r.LossMask...)
	}
	flush()
	return packed, tooLong, nil
}
