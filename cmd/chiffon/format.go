package main

import (
	"encoding/json"
	"io"
	"time"
)

// printJSON writes v as indented JSON, as the client commands' --json prints it.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// dash stands for an empty table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age formats how long ago t was, to the second.
func age(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}
