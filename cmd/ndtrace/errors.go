package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/sandbox"
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

// explain turns a failure with a known remedy into one line that names it (the chain is kept for
// debug logging).
func explain(err error) error {
	var he *hintError
	if errors.As(err, &he) {
		return err
	}
	var ne *sandbox.NamespaceError
	if errors.As(err, &ne) {
		return &hintError{
			msg: fmt.Sprintf("the sandbox cannot start: the kernel refused to create its namespaces (%v). "+
				"ndtrace runs code only in a sandbox built of user namespaces: run it on a machine or VM that allows them, "+
				"or in a container that does (deploy/compose.yaml: seccomp and AppArmor unconfined); a chroot never does", ne.Err),
			err: err,
		}
	}
	return err
}
