package schemas

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkFields walks a spec's YAML document beside the Go type it decodes into and returns the first
// field it cannot take, named by its path in the spec (sources[0].limit) rather than by Go type:
// an unknown key, with the nearest known one suggested ("unknown field \"limt\" (did you mean
// \"limit\"?)"), or a value of the wrong kind ("\"ten\" is not a whole number"), or a document
// that is empty or not a mapping.
func checkFields(doc *yaml.Node, t reflect.Type) error {
	if doc == nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return errors.New("the spec is empty (docs/spec.md lists its fields)")
	}
	root := doc.Content[0]
	if root.Kind == yaml.AliasNode && root.Alias != nil {
		root = root.Alias
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("the spec is %s, not a mapping of fields (docs/spec.md lists them)", describe(root))
	}
	return checkNode(root, t, "")
}

var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// checkNode checks node n against type t at field path p ("" for the document).
func checkNode(n *yaml.Node, t reflect.Type, p string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty value leaves the field at its default
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) || t.Implements(yamlUnmarshaler) {
		return leaf(n, t, p)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkNode(n, t.Elem(), p)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fieldError(p, "%s is not a mapping of fields", describe(n))
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			if key.Tag == "!!merge" {
				// <<: *anchor (or a list of them) merges the anchored mappings' fields in.
				merged := []*yaml.Node{val}
				if val.Kind == yaml.SequenceNode {
					merged = val.Content
				}
				for _, m := range merged {
					if err := checkNode(m, t, p); err != nil {
						return err
					}
				}
				continue
			}
			f, ok := fields[key.Value]
			if !ok {
				return fieldError(p, "unknown field %q%s", key.Value, suggest(key.Value, fields))
			}
			if err := checkNode(val, f.Type, join(p, key.Value)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fieldError(p, "%s is not a mapping", describe(n))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := leaf(n.Content[i], t.Key(), p); err != nil {
				return err
			}
			if err := checkNode(n.Content[i+1], t.Elem(), join(p, n.Content[i].Value)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fieldError(p, "%s is not a list", describe(n))
		}
		for i, c := range n.Content {
			if err := checkNode(c, t.Elem(), fmt.Sprintf("%s[%d]", p, i)); err != nil {
				return err
			}
		}
		return nil
	}
	return leaf(n, t, p)
}

// leaf decodes n into a new value of type t, explaining a failure in a spec's terms.
func leaf(n *yaml.Node, t reflect.Type, p string) error {
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	if _, ok := err.(*yaml.TypeError); !ok {
		// A type's own UnmarshalYAML explains itself, often naming its field already.
		msg := err.Error()
		if i := strings.LastIndexAny(p, ".]"); i >= 0 {
			msg = strings.TrimPrefix(msg, p[i+1:]+": ")
		}
		return fieldError(p, "%s", msg)
	}
	want := map[reflect.Kind]string{
		reflect.Bool: "true or false", reflect.String: "a string",
		reflect.Int: "a whole number", reflect.Int64: "a whole number", reflect.Uint64: "a whole number (0 or more)",
		reflect.Float64: "a number", reflect.Map: "a mapping",
	}[t.Kind()]
	if want == "" {
		want = "a " + t.Kind().String()
	}
	return fieldError(p, "%s is not %s", describe(n), want)
}

// describe names a node's value for a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 60 {
		v = v[:60] + "…"
	}
	return fmt.Sprintf("%q", v)
}

// fieldError is an error naming the field at path p (nothing for the document itself).
func fieldError(p, format string, args ...any) error {
	if p == "" {
		return fmt.Errorf(format, args...)
	}
	return fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...))
}

func join(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

// yamlFields maps the YAML names of t's fields to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f
	}
	return m
}

// suggest returns ` (did you mean "x"?)` for the known name nearest to key (Nearest), when one is
// near enough to be a typo, and otherwise a pointer to the spec's documentation.
func suggest(key string, fields map[string]reflect.StructField) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	if best := Nearest(key, names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (docs/spec.md lists the fields)"
}

// Nearest returns the candidate nearest to name (ignoring case) when it is close enough to be a
// typo of it (an edit distance of at most 2 and at most half of name's length), else the one
// candidate that name begins (at least 3 characters), else "". Ties go to the first candidate.
// The CLI suggests flags and commands with it, the spec its fields.
func Nearest(name string, candidates []string) string {
	best, bestDist := "", 3
	var prefixOf []string
	lower := strings.ToLower(name)
	for _, c := range candidates {
		d := editDistance(lower, strings.ToLower(c))
		if d < bestDist && 2*d <= len(name) {
			best, bestDist = c, d
		}
		if len(name) >= 3 && strings.HasPrefix(strings.ToLower(c), lower) {
			prefixOf = append(prefixOf, c)
		}
	}
	if best == "" && len(prefixOf) == 1 {
		best = prefixOf[0]
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (optimal string alignment) of a and b in bytes:
// insertions, deletions, substitutions and swaps of two neighbours each count one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
