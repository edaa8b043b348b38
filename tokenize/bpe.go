package tokenize

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// BPE is a byte-level BPE tokenizer: a pre-tokenizer cuts text into pieces, and each piece's bytes
// are merged by rank into vocabulary ids. The tiktoken encodings (Tiktoken), Hugging Face
// tokenizer.json files (ReadHF) and Llama 3 vocabularies (ReadLlama3) are all BPEs; they differ in
// their vocabulary, merge ranks, split pattern and special-token ids.
//
// A BPE is immutable after construction, apart from a bounded cache of piece → ids that it shares
// between goroutines; it is safe for concurrent use.
type BPE struct {
	name string
	// normalize is the tokenizer.json normalizer (nil: none).
	normalize func(string) string
	// next is the hand-written pre-tokenizer, if the split pattern has one; else split is used.
	next  func(tab []uint8, s string, i int) int
	split splitter
	model bpeModel
	// special maps the grammar's special tokens to their ids.
	special map[string]int32
	// text holds the bytes of every id ("" for an unused id): ordinary tokens, the vocabulary's own
	// special or added tokens, and the grammar's special tokens.
	text  []string
	cache pieceCache
	// sp, when set, is a SentencePiece-style pipeline (sentencepiece.go) that replaces normalize,
	// next, split and model.
	sp *sentencePiece
}

// maxCachedPiece is the longest piece, in bytes, whose ids are cached.
const maxCachedPiece = 256

// Name returns the tokenizer's name: "cl100k_base", "o200k_base", "hf:LABEL@SHA8" or
// "llama3:LABEL@SHA8" (see Get).
func (t *BPE) Name() string { return t.name }

// VocabSize is one more than the largest id: the vocabulary, its own special tokens and the
// grammar's special tokens.
func (t *BPE) VocabSize() int { return len(t.text) }

// SpecialID returns the id of a special token of the grammar (SpecialTokens).
func (t *BPE) SpecialID(token string) (int32, bool) {
	id, ok := t.special[token]
	return id, ok
}

// Normalize returns text as the tokenizer sees it before splitting: its tokenizer.json normalizer
// applied (Qwen's NFC, for example), or text itself. Decode(EncodeOrdinary(x)) == Normalize(x).
func (t *BPE) Normalize(text string) string {
	if t.sp != nil {
		return t.sp.normalizeText(text)
	}
	if t.normalize == nil {
		return text
	}
	return t.normalize(text)
}

// EncodeOrdinary returns the ids of text, treating every character as ordinary text: spellings of
// special or added tokens are split like any other text.
func (t *BPE) EncodeOrdinary(text string) []int32 {
	return t.AppendOrdinary(make([]int32, 0, len(text)/3+1), text)
}

// AppendOrdinary appends the ids of text to dst, as EncodeOrdinary, and returns the extended slice.
func (t *BPE) AppendOrdinary(dst []int32, text string) []int32 {
	if t.sp != nil {
		return t.appendSentencePiece(dst, text, true)
	}
	if t.normalize != nil {
		text = t.normalize(text)
	}
	if t.next != nil {
		tab := classes()
		for i := 0; i < len(text); {
			j := t.next(tab, text, i)
			dst = t.appendPiece(dst, text[i:j])
			i = j
		}
		return dst
	}
	ends := t.split.split(make([]int, 0, len(text)/4+1), text)
	prev := 0
	for _, e := range ends {
		dst = t.appendPiece(dst, text[prev:e])
		prev = e
	}
	return dst
}

// appendPiece appends the ids of one piece: a single byte, a whole vocabulary entry (when the model
// allows), a cached piece, or the result of merging.
func (t *BPE) appendPiece(dst []int32, piece string) []int32 {
	if len(piece) == 1 {
		return append(dst, t.model.byteID[piece[0]])
	}
	if t.model.whole != nil {
		if id, ok := t.model.whole[piece]; ok {
			return append(dst, id)
		}
	}
	if len(piece) > maxCachedPiece {
		return t.model.merge(dst, piece)
	}
	h := t.cache.hash(piece)
	if ids, ok := t.cache.get(h, piece); ok {
		return append(dst, ids...)
	}
	n := len(dst)
	dst = t.model.merge(dst, piece)
	t.cache.put(h, piece, dst[n:])
	return dst
}

// encodeSection appends the ids of text, a section of a larger input: first is set for the
// section at its start, false for one after a special token (see Encode). Only SentencePiece-style
// files with Metaspace prepend_scheme first encode the two differently.
func (t *BPE) encodeSection(dst []int32, text string, first bool) []int32 {
	if t.sp != nil {
		return t.appendSentencePiece(dst, text, first)
	}
	return t.AppendOrdinary(dst, text)
}

// Decode returns the text of ids. Special and added tokens decode to their spelling. It fails on an
// id outside the vocabulary (or in one of its gaps) and when the bytes are not valid UTF-8.
func (t *BPE) Decode(ids []int32) (string, error) {
	n := 0
	for i, id := range ids {
		if id < 0 || int(id) >= len(t.text) || t.text[id] == "" {
			return "", fmt.Errorf("tokenize: %s: id %d at %d is outside the vocabulary", t.name, id, i)
		}
		n += len(t.text[id])
	}
	var b strings.Builder
	b.Grow(n)
	// strip: drop a leading space of the next token (see sentencePiece.stripLead).
	strip := t.sp != nil && t.sp.stripLead
	for _, id := range ids {
		s := t.text[id]
		if t.sp != nil {
			special := t.sp.segStart[id]
			if strip && !special {
				s = strings.TrimPrefix(s, " ")
			}
			strip = special && t.sp.stripSection
		}
		b.WriteString(s)
	}
	s := b.String()
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("tokenize: %s: the ids do not decode to valid UTF-8", t.name)
	}
	return s, nil
}

// bpeModel is the merge part of a byte-level BPE.
type bpeModel struct {
	// byteID is the id of each single byte.
	byteID [256]int32
	// pairs maps two adjacent ids to the rank of their merge and the id it makes.
	pairs pairTable
	// whole maps every token's bytes to its id when a piece that is a whole token is that token
	// without merging (tiktoken; Hugging Face's ignore_merges). nil otherwise.
	whole map[string]int32
}

// noRank marks a pair that does not merge.
const noRank = math.MaxInt32

// smallPiece is the longest piece merged with the quadratic scan; longer ones use a heap.
const smallPiece = 64

// merge appends the ids of piece (at least 2 bytes): starting from single bytes, it repeatedly
// merges the adjacent pair of lowest rank, the leftmost one on ties, until no pair merges. This is
// the merge order of both tiktoken and Hugging Face tokenizers.
func (m *bpeModel) merge(dst []int32, piece string) []int32 {
	if len(piece) > smallPiece {
		return m.mergeHeap(dst, piece)
	}
	var ids, ranks, made [smallPiece]int32
	n := len(piece)
	for i := 0; i < n; i++ {
		ids[i] = m.byteID[piece[i]]
	}
	for i := 0; i+1 < n; i++ {
		ranks[i], made[i] = m.pairs.get(ids[i], ids[i+1])
	}
	for n > 1 {
		best, bi := int32(noRank), -1
		for i := 0; i+1 < n; i++ {
			if ranks[i] < best {
				best, bi = ranks[i], i
			}
		}
		if bi < 0 {
			break
		}
		ids[bi] = made[bi]
		copy(ids[bi+1:n-1], ids[bi+2:n])
		copy(ranks[bi+1:n-1], ranks[bi+2:n])
		copy(made[bi+1:n-1], made[bi+2:n])
		n--
		if bi+1 < n {
			ranks[bi], made[bi] = m.pairs.get(ids[bi], ids[bi+1])
		} else {
			ranks[bi] = noRank
		}
		if bi > 0 {
			ranks[bi-1], made[bi-1] = m.pairs.get(ids[bi-1], ids[bi])
		}
	}
	return append(dst, ids[:n]...)
}

// mergeHeap is merge for long pieces (see heapMerge).
func (m *bpeModel) mergeHeap(dst []int32, piece string) []int32 {
	ids := make([]int32, len(piece))
	for i := range ids {
		ids[i] = m.byteID[piece[i]]
	}
	next := heapMerge(&m.pairs, ids)
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, ids[i])
	}
	return dst
}

// heapMerge merges the adjacent ids (at least one) in place by rank, the lowest first and the
// leftmost on ties, and returns the links of the ids left: from index 0, next[i] is the index of the
// one after i, -1 after the last. A negative id (a symbol outside the vocabulary) never merges.
// It keeps a linked list of symbols and a min-heap of (rank, position) candidates, O(n log n). An
// entry is stale when its left symbol was merged away or the pair at its position changed; a pair's
// span only grows, so the same rank at the same position is the same pair.
func heapMerge(table *pairTable, ids []int32) (next []int32) {
	get := func(a, b int32) (rank, id int32) {
		// The table's empty key is the pair (-1, -1).
		if a < 0 || b < 0 {
			return noRank, 0
		}
		return table.get(a, b)
	}
	n := len(ids)
	next = make([]int32, n)  // -1: last
	prev := make([]int32, n) // -1: first
	alive := make([]bool, n)
	for i := 0; i < n; i++ {
		next[i], prev[i], alive[i] = int32(i+1), int32(i-1), true
	}
	next[n-1] = -1
	h := make(mergeHeap, 0, n)
	for i := 0; i+1 < n; i++ {
		if r, _ := get(ids[i], ids[i+1]); r != noRank {
			h.push(uint64(r)<<32 | uint64(i))
		}
	}
	for len(h) > 0 {
		top := h.pop()
		rank, pos := int32(top>>32), int32(uint32(top))
		nx := next[pos]
		if !alive[pos] || nx < 0 {
			continue
		}
		r, id := get(ids[pos], ids[nx])
		if r != rank {
			continue
		}
		ids[pos] = id
		alive[nx] = false
		next[pos] = next[nx]
		if next[nx] >= 0 {
			prev[next[nx]] = pos
			if r2, _ := get(ids[pos], ids[next[pos]]); r2 != noRank {
				h.push(uint64(r2)<<32 | uint64(pos))
			}
		}
		if p := prev[pos]; p >= 0 {
			if r2, _ := get(ids[p], ids[pos]); r2 != noRank {
				h.push(uint64(r2)<<32 | uint64(p))
			}
		}
	}
	return next
}

// mergeHeap is a binary min-heap of rank<<32 | position.
type mergeHeap []uint64

func (h *mergeHeap) push(x uint64) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *mergeHeap) pop() uint64 {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(s) && s[l] < s[small] {
			small = l
		}
		if r := l + 1; r < len(s) && s[r] < s[small] {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// pairTable is an open-addressing hash table from a pair of ids to (rank, merged id).
type pairTable struct {
	keys []uint64 // left<<32 | right; emptyPair when free
	vals []uint64 // rank<<32 | id
	mask uint64
	n    int
}

const emptyPair = ^uint64(0)

func newPairTable(capacity int) pairTable {
	size := 16
	for size < 2*capacity {
		size *= 2
	}
	t := pairTable{keys: make([]uint64, size), vals: make([]uint64, size), mask: uint64(size - 1)}
	for i := range t.keys {
		t.keys[i] = emptyPair
	}
	return t
}

func pairHash(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	return k
}

// put sets the merge of (a, b), replacing an earlier one.
func (t *pairTable) put(a, b, rank, id int32) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	k := uint64(uint32(a))<<32 | uint64(uint32(b))
	for i := pairHash(k) & t.mask; ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case emptyPair:
			t.keys[i], t.vals[i] = k, uint64(uint32(rank))<<32|uint64(uint32(id))
			t.n++
			return
		case k:
			t.vals[i] = uint64(uint32(rank))<<32 | uint64(uint32(id))
			return
		}
	}
}

func (t *pairTable) grow() {
	old := *t
	*t = newPairTable(max(16, 2*old.n+2))
	for i, k := range old.keys {
		if k != emptyPair {
			t.put(int32(k>>32), int32(uint32(k)), int32(old.vals[i]>>32), int32(uint32(old.vals[i])))
		}
	}
}

// get returns the rank and merged id of (a, b), or noRank.
func (t *pairTable) get(a, b int32) (rank, id int32) {
	if len(t.keys) == 0 {
		return noRank, 0
	}
	k := uint64(uint32(a))<<32 | uint64(uint32(b))
	for i := pairHash(k) & t.mask; ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case k:
			v := t.vals[i]
			return int32(v >> 32), int32(uint32(v))
		case emptyPair:
			return noRank, 0
		}
	}
}
