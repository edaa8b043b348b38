package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/store"
)

// Key runs: the dedup keys of a page of items (or of a dataset, for dedup_against), sorted, so that
// deduplicating a whole run is one streaming merge of its pages' runs, whatever its size.
//
// A run is one object: the magic line, an index of 256 big-endian uint64 byte offsets (where the
// records whose key starts with each byte begin, so a merge can start at any prefix), then the
// records, sorted by (key, ordinal):
//
//	key     [32]byte  the dedup key: crawl.DedupKey for a function, the item's hash for a repository
//	ident   [16]byte  the item's own identity (the first half of its hash): the same item twice
//	ordinal uint64    the item's place in its phase (0 for a dataset's keys)
//	flags   uint8     flagRepo for a repository-level item
//	keylen  uint32    then keylen bytes of the item's key (for the reject's reason)
const (
	runMagic     = "NDKEYS1\n"
	runIndexSize = 256 * 8
	runHeader    = len(runMagic) + runIndexSize
	flagRepo     = 1
	maxItemKey   = 1 << 20
)

// keyRecord is one record of a key run.
type keyRecord struct {
	Key     [32]byte
	Ident   [16]byte
	Ordinal uint64
	Flags   uint8
	ItemKey string
}

func (r *keyRecord) less(o *keyRecord) bool {
	if c := bytes.Compare(r.Key[:], o.Key[:]); c != 0 {
		return c < 0
	}
	return r.Ordinal < o.Ordinal
}

// itemRecord is the key record of a planned item at ordinal o.
func itemRecord(it *crawl.Item, o uint64) keyRecord {
	r := keyRecord{Ordinal: o, ItemKey: it.Key}
	h, _ := hex.DecodeString(it.Hash())
	copy(r.Ident[:], h)
	if it.Kind() == crawl.RepositoryTests {
		// A repository is never deduplicated by content: only the same repository, at the same
		// commit, listed twice.
		r.Key = sha256.Sum256(append([]byte("repository\x00"), h...))
		r.Flags = flagRepo
	} else {
		k, _ := hex.DecodeString(it.DedupKey())
		copy(r.Key[:], k)
	}
	return r
}

// encodeRun sorts records and returns the run object.
func encodeRun(recs []keyRecord) []byte {
	sort.Slice(recs, func(i, j int) bool { return recs[i].less(&recs[j]) })
	var body bytes.Buffer
	var index [256]uint64
	next := 0
	for i := range recs {
		for next <= int(recs[i].Key[0]) {
			index[next] = uint64(runHeader + body.Len())
			next++
		}
		writeRecord(&body, &recs[i])
	}
	for ; next < 256; next++ {
		index[next] = uint64(runHeader + body.Len())
	}
	out := make([]byte, 0, runHeader+body.Len())
	out = append(out, runMagic...)
	for _, off := range index {
		out = binary.BigEndian.AppendUint64(out, off)
	}
	return append(out, body.Bytes()...)
}

func writeRecord(w *bytes.Buffer, r *keyRecord) {
	w.Write(r.Key[:])
	w.Write(r.Ident[:])
	var b [13]byte
	binary.BigEndian.PutUint64(b[:8], r.Ordinal)
	b[8] = r.Flags
	binary.BigEndian.PutUint32(b[9:], uint32(len(r.ItemKey)))
	w.Write(b[:])
	w.WriteString(r.ItemKey)
}

// recordStream is a sorted stream of key records: a run, or a dataset's key shards one after the
// other.
type recordStream interface {
	// next returns the next record, or io.EOF.
	next() (*keyRecord, error)
	close() error
}

// runReader streams one run object from a prefix on.
type runReader struct {
	body io.ReadCloser
	r    *bufio.Reader
	rec  keyRecord
	hdr  []byte
	// want, if set, is the sha256 the whole object must have (a run read from its start): checked
	// when the stream ends.
	want string
	hash hash.Hash
	key  string
}

// openRun opens the run at key, positioned at the first record whose key starts with prefix or a
// later byte. A missing run is an error.
func openRun(ctx context.Context, s *store.Store, key string, prefix int) (*runReader, error) {
	head, err := s.NewRangeReader(ctx, key, 0, int64(runHeader))
	if err != nil {
		return nil, err
	}
	hdr, err := io.ReadAll(head)
	head.Close()
	if err != nil {
		return nil, fmt.Errorf("key run %s: %w", key, err)
	}
	if len(hdr) != runHeader || string(hdr[:len(runMagic)]) != runMagic {
		return nil, fmt.Errorf("key run %s: not a key run", key)
	}
	off := int64(binary.BigEndian.Uint64(hdr[len(runMagic)+8*prefix:]))
	body, err := s.NewRangeReader(ctx, key, off, -1)
	if err != nil {
		return nil, err
	}
	return &runReader{body: body, r: bufio.NewReaderSize(body, 16<<10), key: key, hdr: hdr}, nil
}

// verifyAgainst makes rr check, when it ends, that the object it read from its first record (with
// prefix 0) has the sha256 want.
func (rr *runReader) verifyAgainst(want string) {
	rr.want = want
	rr.hash = sha256.New()
	rr.hash.Write(rr.hdr)
	rr.r = bufio.NewReaderSize(io.TeeReader(rr.body, rr.hash), 16<<10)
}

func (rr *runReader) next() (*keyRecord, error) {
	var fixed [32 + 16 + 13]byte
	if _, err := io.ReadFull(rr.r, fixed[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, errors.New("key run: truncated record")
		}
		if err == io.EOF && rr.want != "" && hex.EncodeToString(rr.hash.Sum(nil)) != rr.want {
			return nil, fmt.Errorf("key run %s: not the object its manifest names (sha256 differs)", rr.key)
		}
		return nil, err
	}
	copy(rr.rec.Key[:], fixed[:32])
	copy(rr.rec.Ident[:], fixed[32:48])
	rr.rec.Ordinal = binary.BigEndian.Uint64(fixed[48:56])
	rr.rec.Flags = fixed[56]
	n := binary.BigEndian.Uint32(fixed[57:61])
	if n > maxItemKey {
		return nil, errors.New("key run: item key too long")
	}
	k := make([]byte, n)
	if _, err := io.ReadFull(rr.r, k); err != nil {
		return nil, errors.New("key run: truncated record")
	}
	rr.rec.ItemKey = string(k)
	return &rr.rec, nil
}

func (rr *runReader) close() error { return rr.body.Close() }

// shardStream streams a dataset's 256 key shards in order (each shard a run holding one first
// byte), from a prefix on. Missing shards are empty.
type shardStream struct {
	ctx    context.Context
	s      *store.Store
	keyOf  func(k int) string
	prefix int
	cur    *runReader
	// sha256Of, if set, gives the sha256 each shard must have ("" for none).
	sha256Of func(k int) string
}

func (ss *shardStream) next() (*keyRecord, error) {
	for {
		if ss.cur == nil {
			if ss.prefix > 255 {
				return nil, io.EOF
			}
			rr, err := openRun(ss.ctx, ss.s, ss.keyOf(ss.prefix), 0)
			k := ss.prefix
			ss.prefix++
			if store.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if ss.sha256Of != nil {
				if want := ss.sha256Of(k); want != "" {
					rr.verifyAgainst(want)
				}
			}
			ss.cur = rr
		}
		rec, err := ss.cur.next()
		if err == io.EOF {
			ss.cur.close()
			ss.cur = nil
			continue
		}
		return rec, err
	}
}

func (ss *shardStream) close() error {
	if ss.cur != nil {
		return ss.cur.close()
	}
	return nil
}

// memStream streams records held in memory (a dataset's keys in the old single-object format).
type memStream struct {
	recs []keyRecord
	i    int
}

func (m *memStream) next() (*keyRecord, error) {
	if m.i >= len(m.recs) {
		return nil, io.EOF
	}
	m.i++
	return &m.recs[m.i-1], nil
}
func (m *memStream) close() error { return nil }

// fromPrefix skips the records of a stream that start with a byte below prefix.
type fromPrefix struct {
	recordStream
	prefix  int
	started bool
}

func (f *fromPrefix) next() (*keyRecord, error) {
	for {
		r, err := f.recordStream.next()
		if err != nil || f.started || int(r.Key[0]) >= f.prefix {
			f.started = err == nil
			return r, err
		}
	}
}
