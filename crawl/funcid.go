package crawl

import (
	"crypto/sha256"
	"encoding/hex"
)

// FunctionID is the stable id of a function: the hex of the first 16 bytes of the SHA-256 of its
// normalized source (NormalizeSource, as SourceKey: SourceKey's first 32 hex digits). Two sources
// that differ only in formatting or comments have the same id, at any level (a repository's function
// and the function-level item made of it), in any run. It fills the rows' function_id column,
// from which their split is drawn.
func FunctionID(src string) string {
	sum := sha256.Sum256([]byte(NormalizeSource(src)))
	return hex.EncodeToString(sum[:16])
}
