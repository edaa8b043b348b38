// Package pyreq parses Python requirement specifiers (PEP 508) and requirement files, accepting
// only what names a package: its name, extras, version specifiers and an environment marker. What a
// hostile repository could use to choose where packages come from, or to run code, is refused with
// the reason: pip options (-e, -r, -c, --index-url, --find-links, any line starting with -), URLs,
// local paths and direct references (name @ url).
//
// A parsed Requirement renders itself again (String) in a canonical form built only from the parts
// that were checked, which is what is handed to the installer.
package pyreq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Limits of what is parsed.
const (
	// MaxLength is the longest requirement accepted, in bytes.
	MaxLength = 1000
	// MaxRequirements is the most requirements one set (a file, a declaration) may hold.
	MaxRequirements = 1000
	// MaxFileBytes is the largest requirement file read.
	MaxFileBytes = 1 << 20
)

// Requirement is one requirement: a distribution name with optional extras, version specifiers
// and an environment marker.
type Requirement struct {
	// Name is the distribution's name as written; Extras the extras, as written.
	Name   string
	Extras []string
	// Specifiers are the version clauses (">=1.0", "!=1.3.*"), without spaces.
	Specifiers []string
	// Marker is the environment marker (after ';'), re-rendered with single spaces.
	Marker string
}

// String renders the requirement canonically: name[extra,...]spec,spec; marker.
func (r Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Name)
	if len(r.Extras) > 0 {
		b.WriteString("[" + strings.Join(r.Extras, ",") + "]")
	}
	b.WriteString(strings.Join(r.Specifiers, ","))
	if r.Marker != "" {
		b.WriteString("; " + r.Marker)
	}
	return b.String()
}

// Normalize is the PEP 503 normalized form of a distribution name: lowercase, with every run of
// '-', '_' and '.' replaced by one '-'.
func Normalize(name string) string {
	return strings.ToLower(separators.ReplaceAllString(name, "-"))
}

var separators = regexp.MustCompile(`[-_.]+`)

// Error is a refused requirement: the text and why.
type Error struct {
	Text   string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("requirement %q: %s", e.Text, e.Reason) }

// Parse parses one requirement. Anything but a name, extras, version specifiers and a marker is
// refused with a *Error saying why.
func Parse(text string) (Requirement, error) {
	s := strings.TrimSpace(text)
	refuse := func(format string, args ...any) (Requirement, error) {
		shown := s
		if len(shown) > 200 {
			shown = shown[:200] + "..."
		}
		return Requirement{}, &Error{Text: shown, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case s == "":
		return refuse("empty")
	case len(s) > MaxLength:
		return refuse("longer than %d bytes", MaxLength)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r > 0x7e }):
		return refuse("control or non-ASCII characters")
	case strings.HasPrefix(s, "-"):
		return refuse("pip options are refused (only names, extras, versions and markers): the repository must not choose how or where packages are installed")
	case directRE.MatchString(s):
		return refuse("direct references (name @ url) are refused: the repository must not choose where packages come from")
	case strings.Contains(s, "://") || strings.HasPrefix(s, "git+") || strings.HasPrefix(s, "file:"):
		return refuse("URLs are refused: the repository must not choose where packages come from")
	case strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~"):
		return refuse("local paths are refused: only packages from the configured index are installed")
	}
	p := &parser{s: s}
	var r Requirement
	var err error
	if r.Name, err = p.name(); err != nil {
		return refuse("%v", err)
	}
	if archiveRE.MatchString(r.Name) {
		return refuse("archive files are refused: only packages from the configured index are installed")
	}
	p.space()
	if p.peek() == '[' {
		p.i++
		p.space()
		for p.peek() != ']' {
			e, err := p.name()
			if err != nil {
				return refuse("extras: %v", err)
			}
			r.Extras = append(r.Extras, e)
			p.space()
			if p.peek() == ',' {
				p.i++
				p.space()
			} else if p.peek() != ']' {
				return refuse("extras: expected , or ] at byte %d", p.i)
			}
		}
		p.i++
		p.space()
	}
	switch p.peek() {
	case '@':
		return refuse("direct references (name @ url) are refused: the repository must not choose where packages come from")
	case '(':
		p.i++
		if r.Specifiers, err = p.specifiers(); err != nil {
			return refuse("%v", err)
		}
		p.space()
		if p.peek() != ')' {
			return refuse("expected ) at byte %d", p.i)
		}
		p.i++
	case '<', '>', '=', '!', '~':
		if r.Specifiers, err = p.specifiers(); err != nil {
			return refuse("%v", err)
		}
	}
	p.space()
	switch p.peek() {
	case 0:
	case ';':
		p.i++
		if r.Marker, err = parseMarker(p.s[p.i:]); err != nil {
			return refuse("marker: %v", err)
		}
	case '/', '\\':
		return refuse("local paths are refused: only packages from the configured index are installed")
	default:
		return refuse("unexpected %q at byte %d (a requirement is name[extras] specifiers; marker)", p.s[p.i:p.i+1], p.i)
	}
	return r, nil
}

// parser walks a requirement.
type parser struct {
	s string
	i int
}

func (p *parser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) space() {
	for p.peek() == ' ' || p.peek() == '\t' {
		p.i++
	}
}

// name reads a PEP 508 identifier: letters and digits, with '-', '_' and '.' inside.
func (p *parser) name() (string, error) {
	m := nameRE.FindString(p.s[p.i:])
	if m == "" {
		return "", fmt.Errorf("expected a name at byte %d", p.i)
	}
	p.i += len(m)
	return m, nil
}

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?`)
	opRE      = regexp.MustCompile(`^(===|~=|==|!=|<=|>=|<|>)`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9_.*+!-]+`)
	// directRE matches the start of a direct reference: name[extras] @.
	directRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*@`)
	// archiveRE matches the names pip would take for an archive file to install.
	archiveRE = regexp.MustCompile(`(?i)\.(whl|zip|tar|tgz|tbz|txz|tlz|egg|tar\.(gz|bz2|xz|lz|lzma))$`)
)

// specifiers reads version clauses separated by commas.
func (p *parser) specifiers() ([]string, error) {
	var out []string
	for {
		p.space()
		op := opRE.FindString(p.s[p.i:])
		if op == "" {
			return nil, fmt.Errorf("expected a version operator at byte %d", p.i)
		}
		p.i += len(op)
		p.space()
		v := versionRE.FindString(p.s[p.i:])
		if v == "" {
			return nil, fmt.Errorf("expected a version at byte %d", p.i)
		}
		p.i += len(v)
		out = append(out, op+v)
		p.space()
		if p.peek() != ',' {
			return out, nil
		}
		p.i++
	}
}

// markerVars are the variables an environment marker may name (PEP 508).
var markerVars = map[string]bool{
	"python_version": true, "python_full_version": true, "os_name": true, "sys_platform": true,
	"platform_release": true, "platform_system": true, "platform_version": true,
	"platform_machine": true, "platform_python_implementation": true, "implementation_name": true,
	"implementation_version": true, "extra": true,
	// Legacy spellings pip still accepts.
	"os.name": true, "sys.platform": true, "platform.version": true, "platform.machine": true,
	"platform.python_implementation": true, "python_implementation": true,
}

var errMarker = errors.New("not a marker expression")

// parseMarker checks a marker expression (or/and of comparisons between variables and quoted
// strings, with parentheses) and returns it re-rendered with single spaces.
func parseMarker(s string) (string, error) {
	toks, err := markerTokens(s)
	if err != nil {
		return "", err
	}
	if len(toks) == 0 {
		return "", errors.New("empty")
	}
	m := &markerParser{toks: toks}
	if err := m.or(0); err != nil {
		return "", err
	}
	if m.i != len(toks) {
		return "", fmt.Errorf("unexpected %s", toks[m.i])
	}
	return strings.Join(toks, " "), nil
}

var markerTokenRE = regexp.MustCompile(`^(?:\(|\)|===|~=|==|!=|<=|>=|<|>|'[^'"\\]*'|"[^'"\\]*"|[A-Za-z_][A-Za-z0-9_.]*)`)

func markerTokens(s string) ([]string, error) {
	var toks []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return toks, nil
		}
		t := markerTokenRE.FindString(s)
		if t == "" {
			return nil, fmt.Errorf("unexpected %q", s[:1])
		}
		toks = append(toks, t)
		s = s[len(t):]
	}
}

type markerParser struct {
	toks []string
	i    int
}

func (m *markerParser) tok() string {
	if m.i < len(m.toks) {
		return m.toks[m.i]
	}
	return ""
}

// depth bounds nested parentheses.
const maxMarkerDepth = 32

func (m *markerParser) or(depth int) error {
	if err := m.and(depth); err != nil {
		return err
	}
	for m.tok() == "or" {
		m.i++
		if err := m.and(depth); err != nil {
			return err
		}
	}
	return nil
}

func (m *markerParser) and(depth int) error {
	if err := m.atom(depth); err != nil {
		return err
	}
	for m.tok() == "and" {
		m.i++
		if err := m.atom(depth); err != nil {
			return err
		}
	}
	return nil
}

func (m *markerParser) atom(depth int) error {
	if m.tok() == "(" {
		if depth >= maxMarkerDepth {
			return errors.New("too deeply nested")
		}
		m.i++
		if err := m.or(depth + 1); err != nil {
			return err
		}
		if m.tok() != ")" {
			return errors.New("expected )")
		}
		m.i++
		return nil
	}
	if err := m.value(); err != nil {
		return err
	}
	switch t := m.tok(); {
	case t == "in":
		m.i++
	case t == "not" && m.i+1 < len(m.toks) && m.toks[m.i+1] == "in":
		m.i += 2
	case opRE.MatchString(t) && opRE.FindString(t) == t:
		m.i++
	default:
		return fmt.Errorf("expected a comparison, got %q", t)
	}
	return m.value()
}

func (m *markerParser) value() error {
	t := m.tok()
	switch {
	case t == "":
		return fmt.Errorf("%w: ends early", errMarker)
	case t[0] == '\'' || t[0] == '"':
	case markerVars[t]:
	default:
		return fmt.Errorf("unknown marker variable %q", t)
	}
	m.i++
	return nil
}

// ParseFile parses a requirements file (requirements.txt format): one requirement a line, with
// comments (# at the start of a line or after whitespace), blank lines and lines continued with a
// trailing backslash. Every requirement is checked as Parse does; the first refused line is an error
// naming the file (name) and the line. Data larger than MaxFileBytes is an error naming the file
// and the cap. The work is linear in len(data) (continued lines are joined in one growing
// buffer); ctx is checked every cancelCheck lines.
func ParseFile(ctx context.Context, name string, data []byte) ([]Requirement, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes, the cap on this file", name, MaxFileBytes)
	}
	var out []Requirement
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	var joined []byte // a line and its continuations
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := lines[i]
		if strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			joined = append(joined[:0], line...)
			for bytes.HasSuffix(joined, []byte("\\")) && i+1 < len(lines) {
				if i%cancelCheck == 0 {
					if err := ctx.Err(); err != nil {
						return nil, fmt.Errorf("%s line %d: %w", name, i+1, err)
					}
				}
				i++
				joined = append(joined[:len(joined)-1], lines[i]...)
			}
			line = string(joined)
		}
		if i%cancelCheck == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", name, i+1, err)
			}
		}
		line = stripComment(line)
		if strings.TrimSpace(line) == "" {
			continue
		}
		r, err := Parse(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, lineNo, err)
		}
		if out = append(out, r); len(out) > MaxRequirements {
			return nil, fmt.Errorf("%s: more than %d requirements", name, MaxRequirements)
		}
	}
	return out, nil
}

// cancelCheck is how many lines ParseFile reads between two checks of its context.
const cancelCheck = 1024

// stripComment cuts a requirement line's comment: from a # at the start or after whitespace.
func stripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return line[:i]
		}
	}
	return line
}

// ParseAll parses a list of requirements (a spec's env list, a pyproject.toml's dependencies);
// where names them in errors.
func ParseAll(where string, texts []string) ([]Requirement, error) {
	if len(texts) > MaxRequirements {
		return nil, fmt.Errorf("%s: more than %d requirements", where, MaxRequirements)
	}
	out := make([]Requirement, 0, len(texts))
	for i, t := range texts {
		r, err := Parse(t)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", where, i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ValidName reports whether s is a distribution name (PEP 508).
func ValidName(s string) bool { return nameRE.FindString(s) == s && s != "" }

// ValidVersion reports whether s is a version as a specifier may hold it (letters, digits and
// . * + ! _ -).
func ValidVersion(s string) bool { return versionRE.FindString(s) == s && s != "" }
