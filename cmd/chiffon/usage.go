package main

import (
	"errors"
	"strings"
)

// usageError marks a mistake in how a command was called; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(msg string) error { return &usageError{msg: msg} }

// isUsageError reports whether err is a usage mistake, ours or cobra's flag parsing.
func isUsageError(err error) bool {
	var ue *usageError
	if errors.As(err, &ue) {
		return true
	}
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.HasPrefix(s, "unknown flag") ||
		strings.HasPrefix(s, "unknown shorthand flag") || strings.Contains(s, "flag needs an argument") ||
		strings.HasPrefix(s, "invalid argument") || strings.HasPrefix(s, "accepts ") ||
		strings.HasPrefix(s, "required flag")
}
