package execute

import (
	"context"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// maxCollectionExclusions bounds how many files one repository's collection may leave out
// because they ended it tampered: each costs a collection, and a repository whose every module
// tampers is not worth more.
const maxCollectionExclusions = 8

// collectionBudget bounds the time all of a repository's collections may take together before
// no more files are left out: a repository whose modules each stall collection for most of
// collectTimeout and then tamper would otherwise hold its worker for maxCollectionExclusions+1
// collections of up to three runs (usage error, other runner) each.
const collectionBudget = 3 * collectTimeout

// collectExcluding collects req's tests; a collection that ends tampered while one of the
// checkout's files was running (Collection.TamperedFiles) is made again without that file, at most
// maxCollectionExclusions times and while all collections took less than collectionBudget (issue 29: a verdict costs only its unit; a test module that calls
// gc.get_objects() at import time loses its own tests, not the repository's). excluded lists the
// files left out, each with the reason ("path: detail"). The watchdog's step is begun for each
// collection.
func collectExcluding(ctx context.Context, sb *sandbox.Sandbox, wd *watchdog, req sandbox.CollectRequest) (*sandbox.Collection, []string, error) {
	var excluded []string
	began := time.Now()
	for {
		// A second collection follows a usage error, and the other runner's one(s) a runner that
		// finds no test.
		wd.begin("collecting tests", 3*collectTimeout)
		col, err := sb.CollectTests(ctx, req)
		if err != nil || col.Status != schemas.StatusTampered || len(excluded) >= maxCollectionExclusions ||
			time.Since(began) >= collectionBudget {
			return col, excluded, err
		}
		leave := toExclude(col.TamperedFiles, req.Ignore)
		if leave == "" {
			return col, excluded, nil
		}
		req.Ignore = append(slices.Clip(req.Ignore), leave)
		excluded = append(excluded, leave+": "+col.Detail)
	}
}

// toExclude is what of the checkout a collection that ended tampered leaves out next: the
// outermost of the files that were running (the module the collector imported, not what it
// imported in turn, which other modules may import too) that is not left out already; a package's
// __init__.py stands for its folder (its import comes with any of its modules'). A conftest.py is
// never left out (pytest loads it whatever is ignored): "" when nothing is left to leave out.
func toExclude(files, ignored []string) string {
	for _, f := range files {
		if path.Base(f) == "conftest.py" {
			continue
		}
		if path.Base(f) == "__init__.py" {
			if f = path.Dir(f); f == "." {
				continue
			}
		}
		if slices.ContainsFunc(ignored, func(ig string) bool { return f == ig || strings.HasPrefix(f, ig+"/") }) {
			continue
		}
		return f
	}
	return ""
}
