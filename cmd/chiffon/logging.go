package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type logFlags struct {
	level  string
	format string
}

var _ pflag.Value = (*levelValue)(nil)

type levelValue struct{ s *string }

func (v *levelValue) String() string { return *v.s }
func (v *levelValue) Set(s string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("log level must be debug, info, warn or error")
	}
	*v.s = s
	return nil
}
func (v *levelValue) Type() string { return "level" }

var rootLog = logFlags{level: "info", format: "text"}

func addLogFlags(root *cobra.Command) {
	if env := os.Getenv("CHIFFON_LOG_LEVEL"); env != "" {
		rootLog.level = env
	}
	root.PersistentFlags().Var(&levelValue{&rootLog.level}, "log-level", "log level: debug, info, warn, error (env CHIFFON_LOG_LEVEL)")
	root.PersistentFlags().StringVar(&rootLog.format, "log-format", rootLog.format, "log format: text or json")
}

// newLogger builds the daemon logger from the global flags, writing to w.
func newLogger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(rootLog.level))
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(rootLog.format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
