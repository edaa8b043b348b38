package execute

import (
	"path/filepath"
	"strings"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// funcPlace is where the functions found in a repository's tests live: the checkout and its
// import roots (absolute), as the tests had them on sys.path.
type funcPlace struct {
	dir     string
	imports []string
}

// placeOf is the funcPlace of a checkout dir and its import roots (absolute, below dir) as the
// sandbox shows them: the checkout is bound at CheckoutPath (sandbox.Config.Binds), so the module's
// file, the dir and the roots are named there, and events name the file as the request does.
func placeOf(dir string, imports []string) funcPlace {
	in := make([]string, 0, len(imports))
	for _, p := range imports {
		if r, ok := strings.CutPrefix(p, dir+"/"); ok {
			p = CheckoutPath + "/" + r
		} else if p == dir {
			p = CheckoutPath
		}
		in = append(in, p)
	}
	return funcPlace{dir: CheckoutPath, imports: in}
}

// request is the sandbox request that traces c, a function found in the repository's tests,
// with limits lim and its events given to events. A function whose module has a dotted name
// (crawl.Item.Module) runs where it lives: its module imported from the checkout as part of its
// package (relative imports work, __spec__ is set), the module's file in the checkout traced.
// Its events and blocks then name the file as c.Filename, as a module run on its own names it,
// so that rows show the module's text (c.Code, the file's) and lines just the same. Any other
// function runs as before: c.Code as a standalone file named c.Filename.
func (p funcPlace) request(c crawl.Item, lim sandbox.Limits, events func(*schemas.Event)) sandbox.Request {
	req := sandbox.Request{Code: c.Code, Filename: c.Filename, Call: c.Call, Limits: lim, Events: events}
	if c.Module == "" || p.dir == "" || c.Path == "" || filepath.IsAbs(c.Path) {
		return req
	}
	file := filepath.Join(p.dir, filepath.FromSlash(c.Path))
	req.Module, req.Dir, req.Paths, req.Filename = c.Module, p.dir, p.imports, file
	req.Events = func(ev *schemas.Event) {
		if ev.File == file {
			e := *ev
			e.File = c.Filename
			ev = &e
		}
		events(ev)
	}
	return req
}

// result makes what a run of req (made by request) reports of c's file name it c.Filename: its
// blocks (res may be nil).
func (p funcPlace) result(c crawl.Item, req sandbox.Request, res *sandbox.Result) {
	if res == nil || req.Module == "" {
		return
	}
	for i := range res.Blocks {
		if res.Blocks[i].File == req.Filename {
			res.Blocks[i].File = c.Filename
		}
	}
	for i := range res.Events {
		if res.Events[i].File == req.Filename {
			res.Events[i].File = c.Filename
		}
	}
}

// replay makes req, the replay of a row of c, replay c where it lives when its traced run did
// (request): its module imported from the checkout, its file the one replayed.
func (p funcPlace) replay(c crawl.Item, req *sandbox.ReplayRequest) {
	if c.Module == "" || p.dir == "" || c.Path == "" || filepath.IsAbs(c.Path) {
		return
	}
	req.Module, req.Dir, req.Paths = c.Module, p.dir, p.imports
	req.Filename = filepath.Join(p.dir, filepath.FromSlash(c.Path))
}
