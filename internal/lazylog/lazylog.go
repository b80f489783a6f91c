// Package lazylog gives a logger its attributes without formatting them until a
// record is written.
//
// slog.Logger.With formats its attributes into the handler at once (about 1 KiB and
// nine allocations with a TextHandler). A daemon that makes a logger per task, most
// of whose lines are at debug level and dropped, pays that on every task for lines
// it rarely writes. With here defers the work to the records that are written.
package lazylog

import (
	"context"
	"log/slog"
)

// With returns a logger that writes attrs with every record, before the record's own
// attributes, as l.With(attrs) would, but formats them only for records that l's
// handler is enabled for.
func With(l *slog.Logger, attrs ...slog.Attr) *slog.Logger {
	return slog.New(&handler{parent: l.Handler(), attrs: attrs})
}

type handler struct {
	parent slog.Handler
	attrs  []slog.Attr
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.parent.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.parent.Handle(ctx, out)
}

// WithAttrs and WithGroup are rare on a task's logger: they give up on laziness.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.parent.WithAttrs(h.attrs).WithAttrs(attrs)
}

func (h *handler) WithGroup(name string) slog.Handler {
	return h.parent.WithAttrs(h.attrs).WithGroup(name)
}
