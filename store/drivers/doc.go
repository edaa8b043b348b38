// Package drivers links in the gocloud.dev/blob drivers of every storage URL store.Open accepts:
// file (also used for plain local paths), mem, s3, gs and azblob. It has no API: binaries and tests
// that open stores import it for its side effects,
//
//	import _ "github.com/ndtrace/ndtrace/store/drivers"
//
// so that package store itself, and the packages that only pass stores around, pull in no cloud SDK.
package drivers

import (
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file:// and plain paths
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/memblob"   // mem://
	_ "gocloud.dev/blob/s3blob"    // s3://
)
