package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"gocloud.dev/gcerrors"
)

// apiError is the error of a cloud API that names its cause with a code (the AWS SDK's
// smithy.APIError), matched by its methods so that package store needs no cloud SDK.
type apiError interface {
	ErrorCode() string
	ErrorMessage() string
}

// Unusable reports whether err says that the store itself cannot be used, which no retry fixes: the
// bucket does not exist, its name is invalid, access is denied, the folder is read-only or a file
// stands where it should be. reason says so in a user's terms, with what to do, in one line
// ("the bucket does not exist (create it, or fix the bucket's name in the URL)"). A missing object
// is not the store's fault (see IsNotExist); neither is a server that cannot be reached, which may
// be an outage. Only the errors of a store's own operations are read.
func Unusable(err error) (reason string, ok bool) {
	var oe *opError
	if !errors.As(err, &oe) {
		return "", false
	}
	err = oe.err
	var ae apiError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return "the bucket does not exist (create it, or fix the bucket's name in the URL)", true
		case "InvalidBucketName":
			return "the bucket's name is invalid (S3 names: 3 to 63 lowercase letters, digits, '.' and '-')", true
		case "AccessDenied", "Forbidden", "AllAccessDisabled", "AccountProblem":
			return "access denied (check the credentials and the bucket's permissions for reading, writing and deleting)", true
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidClientTokenId":
			// (not ExpiredToken or InvalidToken: a session's credentials that one refresh
			// failed to renew, which the next attempt may have)
			return fmt.Sprintf("the credentials are refused (%s: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or the profile)", ae.ErrorCode()), true
		}
	}
	switch {
	case errors.Is(err, syscall.EROFS):
		return "the folder is on a read-only file system (choose a writable folder)", true
	case errors.Is(err, syscall.ENOTDIR):
		return "a file stands where a folder is expected (choose another path, or move the file)", true
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("permission denied (the folder is not writable by uid %d: choose a folder you own, or fix its permissions)", os.Getuid()), true
	}
	if gcerrors.Code(err) == gcerrors.PermissionDenied {
		return "access denied (check the credentials and the bucket's permissions for reading, writing and deleting)", true
	}
	return "", false
}
