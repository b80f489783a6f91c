// Package worktype is what an agent says about the work types it offers: a
// description, the JSON Schema of the parameters and whether a task of it needs an
// operator's approval. Agents send their catalogue in their registration; the
// orchestrator keeps it, checks submissions against it and serves it; the CLI and
// the dashboard read a schema's top-level fields to build typed parameters.
package worktype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/envelope"
)

// Extension is the key of a registration's x_custom_fields that holds the
// agent's Catalog. It is an extension: an orchestrator that does not know it
// ignores it, and a registration without it is still valid.
const Extension = "work_type_catalog"

// ApprovalRequired is a Spec's Approval for work that waits for an operator's yes.
const ApprovalRequired = "required"

// MaxDescription bounds a Spec's description, in bytes.
const MaxDescription = 1024

// Spec describes one work type.
type Spec struct {
	// Description says what the work type does, for operators.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema the task's parameters must satisfy; nil when
	// the work type declares none.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Approval is ApprovalRequired when every task of it waits for an operator's
	// yes before it is sent, or "".
	Approval string `json:"approval,omitempty"`
	// StopGraceMS is how long the agent gives a task's processes to stop, after
	// SIGTERM, once it is cancelled or its deadline passes (the work type's
	// cancel_grace), in milliseconds: the orchestrator waits that much more for
	// the result past a deadline. At most MaxStopGrace. It travels beside the
	// catalogue (StopGraceExtension), not in the spec.
	StopGraceMS int64 `json:"-"`
}

// MaxStopGrace bounds Spec.StopGraceMS.
const MaxStopGrace = 10 * time.Minute

// Catalog is an agent's work types by name.
type Catalog map[string]Spec

// Compile checks s and compiles its parameter schema: nil when it declares
// none. The error names the field at fault: a description over MaxDescription
// or not UTF-8, an approval other than ApprovalRequired, a schema that does not
// compile.
func (s Spec) Compile() (*Schema, error) {
	if len(s.Description) > MaxDescription || !utf8.ValidString(s.Description) {
		return nil, fmt.Errorf("description: must be UTF-8 of at most %d bytes", MaxDescription)
	}
	if s.Approval != "" && s.Approval != ApprovalRequired {
		return nil, fmt.Errorf("approval: must be %q or empty, got %q", ApprovalRequired, s.Approval)
	}
	if s.StopGraceMS < 0 || s.StopGraceMS > MaxStopGrace.Milliseconds() {
		return nil, fmt.Errorf("stop_grace_ms: must be from 0 to %d, got %d", MaxStopGrace.Milliseconds(), s.StopGraceMS)
	}
	if s.Parameters == nil {
		return nil, nil
	}
	schema, err := Compile(s.Parameters)
	if err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	return schema, nil
}

// Put stores c in x, the x_custom_fields of a registration, and returns x (made
// when nil). An empty c leaves x as it is.
func Put(x map[string]any, c Catalog) map[string]any {
	if len(c) == 0 {
		return x
	}
	if x == nil {
		x = map[string]any{}
	}
	x[Extension] = c
	putStopGraces(x, c)
	return x
}

// Declared is a spec as an agent declared it, with its schema compiled (nil
// when it declares none).
type Declared struct {
	Spec
	Schema *Schema
}

// FromRegistration reads the catalogue a registration carries in its
// x_custom_fields: nil, without error, when it carries none (an agent older
// than the catalogue). Every name must be one of offered, the work types the
// registration lists, and every spec must compile (Spec.Compile); an error names the field,
// as "x_custom_fields.work_type_catalog.echo.parameters".
func FromRegistration(x map[string]any, offered []string) (map[string]Declared, error) {
	raw, ok := x[Extension]
	if !ok {
		return nil, nil
	}
	field := "x_custom_fields." + Extension
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(b, &byName); err != nil || byName == nil {
		return nil, fmt.Errorf("%s: must be an object of work types", field)
	}
	c := make(map[string]Declared, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		at := field + "." + name
		if msg := envelope.CheckWorkType(name); msg != "" {
			return nil, fmt.Errorf("%s: %s", at, msg)
		}
		if !slices.Contains(offered, name) {
			return nil, fmt.Errorf("%s: not one of the registration's work_types", at)
		}
		s, err := decodeSpec(byName[name])
		if err != nil {
			return nil, fmt.Errorf("%s%s", at, err)
		}
		schema, err := s.Compile()
		if err != nil {
			return nil, fmt.Errorf("%s.%w", at, err)
		}
		c[name] = Declared{Spec: s, Schema: schema}
	}
	if err := readStopGraces(x, c); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeSpec decodes one spec strictly; its error begins with ": " or ".field: ".
func decodeSpec(b []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf(": must be an object of description, parameters and approval: %v", err)
	}
	return s, nil
}
