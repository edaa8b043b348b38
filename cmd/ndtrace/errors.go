package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/ndtrace/ndtrace/internal/userdirs"
)

// hintError is a failure told to a person: msg says what failed and what to do, in one line; err
// is the whole chain, printed only with debug logging.
type hintError struct {
	msg string
	err error
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Unwrap() error { return e.err }

// folderError explains a folder this process cannot use (what: "scratch"), naming the flag and
// the environment variable that choose another.
func folderError(what, flag, env string, err error) error {
	var de *userdirs.DirError
	if !errors.As(err, &de) {
		return fmt.Errorf("%s folder: %w", what, err)
	}
	state := "is not writable"
	if de.Op != "write in" {
		state = "cannot be used"
	}
	return &hintError{
		msg: fmt.Sprintf("%s folder %s %s by uid %d (%s); set %s or %s to a folder you own",
			what, de.Path, state, os.Getuid(), de.Describe(), env, flag),
		err: err,
	}
}

// logChain logs err's whole chain at debug level when err was shortened for a person.
func logChain(err error) {
	var he *hintError
	if errors.As(err, &he) {
		slog.Debug("error chain", "error", oneLine(he.err.Error()))
	}
}
