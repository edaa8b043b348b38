package schemas

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends e as one JSON Lines record, newline included, to dst and returns the
// result. The bytes are those of encoding/json's Encoder with SetEscapeHTML(false) encoding e
// (as ndtrace trace has always printed events): the event's own strings keep <, > and & as
// they are, while Locals, which marshal through [Locals.MarshalJSON], have them escaped
// (\u003c, \u003e, \u0026); invalid UTF-8 becomes \ufffd and U+2028 and U+2029 are escaped
// everywhere. It allocates nothing beyond dst's growth.
func (e *Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"event":`...)
	dst = AppendJSONString(dst, e.Event, false)
	dst = append(dst, `,"frame":`...)
	dst = strconv.AppendInt(dst, int64(e.Frame), 10)
	dst = append(dst, `,"func":`...)
	dst = AppendJSONString(dst, e.Func, false)
	dst = append(dst, `,"file":`...)
	dst = AppendJSONString(dst, e.File, false)
	dst = append(dst, `,"lineno":`...)
	dst = strconv.AppendInt(dst, int64(e.Lineno), 10)
	dst = append(dst, `,"depth":`...)
	dst = strconv.AppendInt(dst, int64(e.Depth), 10)
	dst = append(dst, `,"src":`...)
	dst = AppendJSONString(dst, e.Src, false)
	dst = append(dst, `,"locals":{`...)
	for i, v := range e.Locals {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, v.Name, true)
		dst = append(dst, ':')
		dst = AppendJSONString(dst, v.Value, true)
	}
	dst = append(dst, '}')
	if e.Value != nil {
		dst = append(dst, `,"value":`...)
		dst = AppendJSONString(dst, *e.Value, false)
	}
	if e.ExcType != "" {
		dst = append(dst, `,"exc_type":`...)
		dst = AppendJSONString(dst, e.ExcType, false)
	}
	if e.Unwind {
		dst = append(dst, `,"unwind":true`...)
	}
	return append(dst, '}', '\n')
}

// jsonPlain[c] is set for the ASCII bytes a JSON string holds as they are (escapeHTML off):
// everything from 0x20 but '"' and '\\'. jsonPlainHTML also excludes '<', '>' and '&'.
var jsonPlain, jsonPlainHTML = func() (p, h [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		p[c] = c != '"' && c != '\\'
		h[c] = p[c] && c != '<' && c != '>' && c != '&'
	}
	return p, h
}()

const lowerHex = "0123456789abcdef"

// AppendJSONString appends s as a JSON string, exactly as encoding/json writes it (escapeHTML:
// as json.Marshal, which escapes <, > and &; off: as an Encoder with SetEscapeHTML(false)).
func AppendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	plain := &jsonPlain
	if escapeHTML {
		plain = &jsonPlainHTML
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
