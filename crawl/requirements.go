package crawl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/ndtrace/ndtrace/crawl/pyreq"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestGroups are the optional-dependency groups (extras) read besides a project's dependencies:
// those its tests are likely to need.
var TestGroups = []string{"test", "tests", "testing", "dev"}

// requirementFiles matches the requirement files read at the top of a checkout, and
// requirementDirFiles those in its requirements/ folder.
var (
	requirementFiles    = regexp.MustCompile(`^(requirements|(requirements[-_](test|tests|testing|dev))|((test|tests|testing|dev)[-_]requirements))\.txt$`)
	requirementDirFiles = regexp.MustCompile(`^(base|test|tests|testing|dev)\.txt$`)
)

// CheckRequirements checks with pyreq the requirements listed in the env of s's repository
// sources, which schemas.Spec.Validate leaves to it (package schemas imports nothing of ndtrace):
// a pip option, a URL, a path or a direct reference is an error naming the field, "spec:
// sources[0].env[1]: requirement ...", as Validate's errors do. Call it where a spec is loaded,
// after schemas.ParseSpec.
func CheckRequirements(s schemas.Spec) error {
	for i, src := range s.Sources {
		if src.Kind != "repository" || src.Env == nil || src.Env.FromRepository {
			continue
		}
		if _, err := pyreq.ParseAll(fmt.Sprintf("sources[%d].env", i), src.Env.Requirements); err != nil {
			return fmt.Errorf("spec: %w", err)
		}
	}
	return nil
}

// DeclaredRequirements returns the requirements a checkout declares for its tests, in a fixed order
// without repeats, reading (never running) its declarations:
//
//   - pyproject.toml: [project] dependencies, and the optional-dependencies groups in TestGroups;
//   - setup.cfg: [options] install_requires, and [options.extras_require] groups in TestGroups;
//   - requirements.txt, requirements-test.txt, test-requirements.txt and the like (see
//     requirementFiles, "-" or "_"), and requirements/{base,test,tests,testing,dev}.txt.
//
// Requirements naming the project itself (its own extras) are left out: the checkout is on the
// path already. Every requirement is checked by pyreq: an option, a URL, a path or a direct
// reference is an error naming the file and why (the repository must not choose where packages
// come from). Files are read inside dir only (a link out of it is an error), at most
// MaxConfigBytes (pyproject.toml, setup.cfg) or pyreq.MaxFileBytes (requirement files) each: a
// larger one is an error naming the file and its cap. The work is linear in the files' sizes;
// ctx stops it.
func DeclaredRequirements(ctx context.Context, dir string) ([]pyreq.Requirement, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	defer root.Close()
	var out []pyreq.Requirement
	seen := map[string]bool{}
	self := ""
	add := func(where string, rs []pyreq.Requirement) error {
		for _, r := range rs {
			if self != "" && pyreq.Normalize(r.Name) == self {
				continue
			}
			if s := r.String(); !seen[s] {
				seen[s] = true
				out = append(out, r)
			}
		}
		if len(out) > pyreq.MaxRequirements {
			return fmt.Errorf("crawl: %s: more than %d requirements", where, pyreq.MaxRequirements)
		}
		return nil
	}
	// pyproject.toml
	if data, err := readIn(ctx, root, "pyproject.toml", MaxConfigBytes); err != nil {
		return nil, err
	} else if data != nil {
		var doc struct {
			Project struct {
				Name                 string              `toml:"name"`
				Dependencies         []string            `toml:"dependencies"`
				OptionalDependencies map[string][]string `toml:"optional-dependencies"`
			} `toml:"project"`
		}
		if err := toml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("crawl: pyproject.toml: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("crawl: pyproject.toml: %w", err)
		}
		self = pyreq.Normalize(doc.Project.Name)
		texts := doc.Project.Dependencies
		for _, g := range TestGroups {
			texts = append(texts, doc.Project.OptionalDependencies[g]...)
		}
		rs, err := pyreq.ParseAll("pyproject.toml: [project] dependencies", texts)
		if err != nil {
			return nil, err
		}
		if err := add("pyproject.toml", rs); err != nil {
			return nil, err
		}
	}
	// setup.cfg
	if data, err := readIn(ctx, root, "setup.cfg", MaxConfigBytes); err != nil {
		return nil, err
	} else if data != nil {
		values, err := parseSetupCfg(ctx, data)
		if err != nil {
			return nil, err
		}
		if self == "" {
			self = pyreq.Normalize(values["metadata.name"])
		}
		keys := []string{"options.install_requires"}
		for _, g := range TestGroups {
			keys = append(keys, "options.extras_require."+g)
		}
		for _, k := range keys {
			v := strings.TrimSpace(values[k])
			if strings.HasPrefix(v, "file:") {
				return nil, fmt.Errorf("crawl: setup.cfg: %s: %q directives are not read (list the requirements, or use a requirements file)", k, "file:")
			}
			rs, err := pyreq.ParseFile(ctx, "setup.cfg: "+k, []byte(v))
			if err != nil {
				return nil, err
			}
			if err := add("setup.cfg", rs); err != nil {
				return nil, err
			}
		}
	}
	// Requirement files.
	var files []string
	for _, sub := range []string{".", "requirements"} {
		entries, err := fs.ReadDir(root.FS(), sub)
		if err != nil {
			continue // no such folder
		}
		for _, e := range entries {
			switch {
			case sub == "." && requirementFiles.MatchString(e.Name()):
				files = append(files, e.Name())
			case sub != "." && requirementDirFiles.MatchString(e.Name()):
				files = append(files, sub+"/"+e.Name())
			}
		}
	}
	slices.Sort(files)
	read := map[string]bool{}
	for _, f := range files {
		err := eachRequirementFile(ctx, root, f, 0, read, func(name string, data []byte) error {
			rs, err := pyreq.ParseFile(ctx, name, data)
			if err != nil {
				return err
			}
			return add(name, rs)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxIncludeDepth bounds the chain of requirement files included with -r, and
// maxRequirementFiles the requirement files read in all (each at most pyreq.MaxFileBytes): more is
// an error naming the file that includes one too many.
const (
	maxIncludeDepth     = 4
	maxRequirementFiles = 64
	// maxIncludeName bounds the name an include line gives (it appears in errors).
	maxIncludeName = 1024
)

// includeRE matches a line that includes another requirement file (-r FILE, --requirement FILE),
// and selfRE one that installs the project itself (., .[extras], -e ., --editable .[extras]).
var (
	includeRE = regexp.MustCompile(`^(?:-r|--requirement)(?:\s*=\s*|\s+|)(\S+)$`)
	selfRE    = regexp.MustCompile(`^(?:(?:-e|--editable)(?:\s*=\s*|\s+))?\.(?:/)?(?:\[[A-Za-z0-9_,.\- ]*\])?$`)
)

// eachRequirementFile calls fn with requirement file name (relative to root) and then with every
// file it includes with -r, depth first, each file once: an included file is named relative to
// the including file's folder and read inside the checkout only. Lines that install the project
// itself are left out (the checkout is on the path already); include lines are replaced by the
// included file. Any other option stays, for pyreq to refuse. ctx is checked every cancelEvery
// lines.
func eachRequirementFile(ctx context.Context, root *os.Root, name string, depth int, read map[string]bool, fn func(string, []byte) error) error {
	if read[name] {
		return nil
	}
	if len(read) >= maxRequirementFiles {
		return fmt.Errorf("crawl: %s: more than %d requirement files read (includes with -r)", name, maxRequirementFiles)
	}
	read[name] = true
	data, err := readIn(ctx, root, name, pyreq.MaxFileBytes)
	if err != nil {
		return err
	}
	if data == nil {
		return fmt.Errorf("crawl: %s: no such file", name)
	}
	lines := strings.Split(string(data), "\n")
	var includes []string
	for i, l := range lines {
		if i%cancelEvery == cancelEvery-1 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("crawl: %s line %d: %w", name, i+1, err)
			}
		}
		t := strings.TrimSpace(stripHash(l))
		if selfRE.MatchString(t) {
			lines[i] = ""
		} else if m := includeRE.FindStringSubmatch(t); m != nil {
			lines[i] = ""
			if len(m[1]) > maxIncludeName {
				return fmt.Errorf("crawl: %s line %d: includes a file named by more than %d bytes", name, i+1, maxIncludeName)
			}
			inc := path.Clean(path.Join(path.Dir(name), m[1]))
			if depth >= maxIncludeDepth {
				return fmt.Errorf("crawl: %s line %d: requirement files include each other more than %d deep", name, i+1, maxIncludeDepth)
			}
			if strings.HasPrefix(inc, "../") || inc == ".." || path.IsAbs(m[1]) {
				return fmt.Errorf("crawl: %s line %d: includes %s, outside the checkout", name, i+1, m[1])
			}
			includes = append(includes, inc)
		}
	}
	if err := fn(name, []byte(strings.Join(lines, "\n"))); err != nil {
		return err
	}
	for _, inc := range includes {
		if err := eachRequirementFile(ctx, root, inc, depth+1, read, fn); err != nil {
			return err
		}
	}
	return nil
}

// stripHash removes a requirement line's comment: from a # at the start or after a space.
func stripHash(line string) string {
	if strings.HasPrefix(line, "#") {
		return ""
	}
	if i := strings.Index(line, " #"); i >= 0 {
		return line[:i]
	}
	return line
}

// readIn reads name inside root (nil if it does not exist), refusing what is not a regular file
// and, before reading it, a file larger than maxBytes: the error names the file and the cap. It
// never reads more than maxBytes+1 bytes, whatever the file's size says.
func readIn(ctx context.Context, root *os.Root, name string, maxBytes int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("crawl: %s: %w", name, err)
	}
	// Stat before opening: opening a FIFO would wait for a writer.
	info, err := root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("crawl: %s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("crawl: %s: not a regular file", name)
	}
	tooLarge := fmt.Errorf("crawl: %s: larger than %d bytes, the cap on this file", name, maxBytes)
	if info.Size() > maxBytes {
		return nil, tooLarge
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("crawl: %s: %w", name, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("crawl: %s: %w", name, err)
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("crawl: %s: not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("crawl: %s: %w", name, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, tooLarge
	}
	return data, nil
}
