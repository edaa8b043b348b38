package termsafe

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps h so that what it writes is safe for a terminal: each record's message, every
// attribute key, group name and string value, and each error's text pass through [String] before
// h sees them. Another value (a number, a time, a struct h marshals) is passed on as it is when
// its text (fmt's %+v) is safe, and as its escaped text otherwise. Records still reach h one by one
// and in order; only their text changes.
//
// slog's JSON handler needs it: JSON escapes C0 controls but writes C1 and bidi controls raw.
// slog's text handler quotes every value holding a non-printing rune (strconv.Quote) already;
// wrapping it would only double the backslashes of escaped text.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ h slog.Handler }

// Enabled reports whether the wrapped handler handles records of level l.
func (x handler) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

// Handle passes r on with its text escaped.
func (x handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(safeAttr(a))
		return true
	})
	return x.h.Handle(ctx, out)
}

// WithAttrs returns the wrapper of h.WithAttrs with the attributes escaped.
func (x handler) WithAttrs(as []slog.Attr) slog.Handler {
	safe := make([]slog.Attr, len(as))
	for i, a := range as {
		safe[i] = safeAttr(a)
	}
	return handler{x.h.WithAttrs(safe)}
}

// WithGroup returns the wrapper of h.WithGroup with the group's name escaped.
func (x handler) WithGroup(name string) slog.Handler { return handler{x.h.WithGroup(String(name))} }

// safeAttr returns a with its key and value escaped (a group's members, recursively).
func safeAttr(a slog.Attr) slog.Attr {
	a.Key = String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		v = slog.StringValue(String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		safe := make([]slog.Attr, len(g))
		for i, m := range g {
			safe[i] = safeAttr(m)
		}
		v = slog.GroupValue(safe...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			v = slog.StringValue(String(err.Error()))
		} else if text := fmt.Sprintf("%+v", v.Any()); !Safe(text) {
			v = slog.StringValue(String(text))
		}
	}
	a.Value = v
	return a
}
