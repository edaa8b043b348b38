package crawl

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxThriftElements bounds the list, set and map elements a Parquet file's footer (or page index)
// may hold in all, and maxThriftDepth its nesting. parquet-go allocates a list whole at the size
// its header claims (reflect.MakeSlice) before reading an element: a 22-byte footer claiming 2^31
// schema elements asked for a 206 GB block, a fatal out of memory no recover catches.
const (
	maxThriftElements = 1 << 22
	maxThriftDepth    = 64
)

// checkThriftCompact walks b, one struct in Thrift's compact protocol (a Parquet footer, a column
// or offset index), without decoding it: every list, set and map claims at most as many elements
// as bytes are left (each takes one at least), at most maxThriftElements in all, and every binary
// value fits in what is left. It is linear in len(b).
func checkThriftCompact(b []byte) error {
	w := thriftWalker{b: b}
	if err := w.structure(0); err != nil {
		return fmt.Errorf("thrift at byte %d: %w", w.i, err)
	}
	return nil
}

type thriftWalker struct {
	b     []byte
	i     int
	elems int
}

var errThriftShort = errors.New("ends early")

func (w *thriftWalker) byte1() (byte, error) {
	if w.i >= len(w.b) {
		return 0, errThriftShort
	}
	w.i++
	return w.b[w.i-1], nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.i:])
	if n <= 0 {
		return 0, errors.New("bad varint")
	}
	w.i += n
	return v, nil
}

// count takes n elements of at least minBytes bytes each.
func (w *thriftWalker) count(n uint64, minBytes int) error {
	if n > uint64(len(w.b)-w.i)/uint64(minBytes) {
		return fmt.Errorf("a collection of %d elements in %d bytes", n, len(w.b)-w.i)
	}
	if w.elems += int(n); w.elems > maxThriftElements {
		return fmt.Errorf("more than %d elements", maxThriftElements)
	}
	return nil
}

func (w *thriftWalker) structure(depth int) error {
	if depth > maxThriftDepth {
		return errors.New("nested too deep")
	}
	for {
		h, err := w.byte1()
		if err != nil {
			return err
		}
		if h == 0 {
			return nil
		}
		if h>>4 == 0 { // a field id of its own
			if _, err := w.uvarint(); err != nil {
				return err
			}
		}
		if t := h & 0x0f; t != 1 && t != 2 { // booleans are in the header
			if err := w.value(t, depth); err != nil {
				return err
			}
		}
	}
}

func (w *thriftWalker) value(t byte, depth int) error {
	switch t {
	case 1, 2, 3: // a boolean in a collection, a byte
		_, err := w.byte1()
		return err
	case 4, 5, 6:
		_, err := w.uvarint()
		return err
	case 7:
		if len(w.b)-w.i < 8 {
			return errThriftShort
		}
		w.i += 8
		return nil
	case 8:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		if n > uint64(len(w.b)-w.i) {
			return fmt.Errorf("a binary of %d bytes in %d", n, len(w.b)-w.i)
		}
		w.i += int(n)
		return nil
	case 9, 10:
		h, err := w.byte1()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = w.uvarint(); err != nil {
				return err
			}
		}
		if err := w.count(n, 1); err != nil {
			return err
		}
		for range n {
			if err := w.value(h&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 11:
		n, err := w.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := w.byte1()
		if err != nil {
			return err
		}
		if err := w.count(n, 2); err != nil {
			return err
		}
		for range n {
			if err := w.value(kv>>4, depth+1); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 12:
		return w.structure(depth + 1)
	}
	return fmt.Errorf("unknown type %d", t)
}
