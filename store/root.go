package store

import (
	"context"
	"errors"
	"fmt"
	"os"

	"gocloud.dev/gcerrors"
)

// ErrNoRoot is wrapped by CheckRoot's error when the store's bucket (an Azure container), or its
// local folder, does not exist.
var ErrNoRoot = errors.New("does not exist")

// CheckRoot checks that the store's root can be read: the local folder exists, or the bucket exists
// and these credentials can list it (one listing of at most one key under the store's prefix). It
// returns nil if so; an error wrapping ErrNoRoot if the folder or bucket does not exist; else the
// error the listing gave (access denied, an endpoint that does not answer, ...). Readers call it to
// tell a missing bucket from a missing object, for which the services give the same "not found".
func (s *Store) CheckRoot(ctx context.Context) error {
	if s.local() {
		fi, err := os.Stat(s.dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("store: folder %s: %w", s.dir, ErrNoRoot)
		case err != nil:
			return fmt.Errorf("store: folder %s: %w", s.dir, err)
		case !fi.IsDir():
			return fmt.Errorf("store: %s is not a folder", s.dir)
		}
		return nil
	}
	ok, err := s.bucket.IsAccessible(ctx)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", s.url, err)
	}
	if !ok {
		return fmt.Errorf("store: bucket of %s: %w", s.url, ErrNoRoot)
	}
	return nil
}

// IsPermissionDenied reports whether err means that the credentials may not do what was asked.
func IsPermissionDenied(err error) bool { return gcerrors.Code(err) == gcerrors.PermissionDenied }
