package testcalls

import (
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// Methods called by a repository's tests give items too (Finder.add):
//   - a static method (@staticmethod) or class method (@classmethod) of a module-level class, with
//     literal arguments: Cls.meth(args);
//   - an instance method of a module-level class whose instance can be rebuilt from a constructor
//     call the same trace observed: a Cls.__init__ call with literal arguments, whose self
//     renders at its return as self renders at the method's call (its state did not change in
//     between, as far as the rendering shows): Cls(init args).meth(args). Otherwise the method is
//     left out, counted as functions_skipped:method_instance.
//
// Methods with other decorators (a property's getter, a cached or wrapped method) are left out,
// counted as functions_skipped:method_decorated; dunder methods (called by Python itself, never
// named by a call) and methods of nested classes are left out uncounted.

// methodState is what a trace's scan keeps for its methods: the constructor calls still running
// and the instances they built.
type methodState struct {
	inits map[int]initCall     // by frame: a Cls.__init__ call with literal arguments, running
	built map[[3]string]string // (file, class, self's rendering at __init__'s return): init args
}

// initCall is a constructor call: its file, class, self's name and its literal arguments.
type initCall struct {
	file, class, self, args string
}

func newMethodState() *methodState {
	return &methodState{inits: map[int]initCall{}, built: map[[3]string]string{}}
}

// pending handles event i, a return event: when it ends a constructor call being followed, the
// instance it built is noted. It reports whether it did.
func (m *methodState) pending(i int, kind func(int) string, event func(int) schemas.Event) bool {
	if len(m.inits) == 0 {
		return false
	}
	ev := event(i)
	c, ok := m.inits[ev.Frame]
	if !ok {
		return false
	}
	delete(m.inits, ev.Frame)
	if ev.Unwind || ev.ExcType != "" {
		return true // the constructor raised: no instance
	}
	if self, ok := ev.Locals.Get(c.self); ok && self != "" {
		k := [3]string{c.file, c.class, self}
		if _, seen := m.built[k]; !seen {
			m.built[k] = c.args
		}
	}
	return true
}

// method is the call expression of an item of ev, a call event of a method (a qualname with a
// dot), with its source, or false. A constructor's call is noted (methodState) and gives no item
// of its own.
func (f *Finder) method(m *methodState, ev schemas.Event, sources map[[2]string]schemas.FuncSource) (string, schemas.FuncSource, bool) {
	class, name, ok := strings.Cut(ev.Func, ".")
	if !ok || !isIdentifier(class) || !isIdentifier(name) {
		return "", schemas.FuncSource{}, false // a nested function or class, a lambda, a comprehension
	}
	k := [2]string{ev.File, ev.Func}
	src, ok := sources[k]
	if !ok {
		return "", src, false
	}
	if name != "__init__" && (f.perFunc[k] >= MaxInputsPerFunction || len(f.items) >= MaxItems) {
		return "", src, false
	}
	d, ok := parseDef(src.Source, name)
	deco := decorators(src.Source, name)
	if name == "__init__" {
		if ok && len(d.params) > 0 && len(deco) == 0 {
			if args, ok := paramArgs(d.params[1:], ev.Locals); ok {
				m.inits[ev.Frame] = initCall{file: ev.File, class: class, self: d.params[0], args: args}
			}
		}
		return "", src, false
	}
	if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") {
		return "", src, false
	}
	switch {
	case !ok:
		f.skip("params")
		return "", src, false
	case d.async:
		f.skip("async")
		return "", src, false
	case d.contextManager:
		f.skip("context_manager")
		return "", src, false
	}
	kind := ""
	for _, dc := range deco {
		switch dc {
		case "staticmethod", "classmethod":
			if kind != "" {
				f.skip("method_decorated")
				return "", src, false
			}
			kind = dc
		default:
			f.skip("method_decorated")
			return "", src, false
		}
	}
	params := d.params
	if kind != "staticmethod" {
		if len(params) == 0 {
			f.skip("params")
			return "", src, false
		}
		params = params[1:] // self or cls
	}
	args, ok := paramArgs(params, ev.Locals)
	if !ok {
		f.skip("arguments")
		return "", src, false
	}
	if kind != "" {
		return class + "." + name + "(" + args + ")", src, true
	}
	self, ok := ev.Locals.Get(d.params[0])
	init, built := m.built[[3]string{ev.File, class, self}]
	if !ok || !built {
		f.skip("method_instance")
		return "", src, false
	}
	return class + "(" + init + ")." + name + "(" + args + ")", src, true
}

// decorators lists the names of the decorators of def name in src (its source, decorators
// first): "staticmethod" for @staticmethod, "functools.cache" for @functools.cache, the
// decorator's text up to its arguments otherwise.
func decorators(src, name string) []string {
	i := strings.Index(src, "def "+name+"(")
	if i < 0 {
		return nil
	}
	var out []string
	for _, l := range strings.Split(src[:i], "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "@") {
			d := strings.TrimSpace(l[1:])
			if j := strings.IndexAny(d, "( #"); j >= 0 {
				d = d[:j]
			}
			out = append(out, d)
		}
	}
	return out
}
