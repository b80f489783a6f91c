package agent

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Arg is one element of a work type's Command. In YAML a string is one
// argument, a text/template over the parameters; a list of strings is an
// optional group, such as ["--limit", "{{.limit}}"]: left out whole when a
// parameter it reads is absent (or null) once the schema's defaults are filled
// in, else each of its strings is one argument.
type Arg struct {
	// Text is the template of a single argument.
	Text string
	// Optional holds the templates of an optional group; nil for a single
	// argument.
	Optional []string
}

// Args makes a Command of single arguments.
func Args(texts ...string) []Arg {
	out := make([]Arg, len(texts))
	for i, t := range texts {
		out[i] = Arg{Text: t}
	}
	return out
}

// Optional makes an optional group of arguments.
func Optional(texts ...string) Arg { return Arg{Optional: texts} }

// UnmarshalYAML reads a string as a single argument and a list of strings as
// an optional group.
func (a *Arg) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var group []string
		if err := n.Decode(&group); err != nil {
			return err
		}
		if len(group) == 0 {
			return fmt.Errorf("line %d: %w", n.Line, errEmptyGroup)
		}
		*a = Arg{Optional: group}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a command element is a string, or a list of strings for an optional group", n.Line)
	}
	*a = Arg{}
	return n.Decode(&a.Text)
}

// MarshalYAML writes a single argument as a string and a group as a list.
func (a Arg) MarshalYAML() (any, error) {
	if a.Optional != nil {
		return a.Optional, nil
	}
	return a.Text, nil
}

// errEmptyGroup is an optional group without arguments.
var errEmptyGroup = errors.New("an optional group of arguments is empty")
