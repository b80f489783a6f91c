package worktype

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled parameter schema.
type Schema struct {
	s *jsonschema.Schema
	// digest tells schemas apart: equal for equal JSON, whatever the key order.
	digest [sha256.Size]byte
}

// ParamError is a parameter the schema refuses.
type ParamError struct {
	// Pointer is the JSON pointer of the failing value within the parameters,
	// such as "/n"; "" for the parameters object itself.
	Pointer string
	// Message says what the schema wanted, such as "got string, want integer".
	Message string
}

func (e *ParamError) Error() string {
	if e.Pointer == "" {
		return "parameters: " + e.Message
	}
	return "parameter " + e.Pointer + ": " + e.Message
}

// noLoader refuses every $ref outside the schema: a schema comes from an agent,
// and following it must not read the orchestrator's files or reach the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %s: only references within the schema are allowed", url)
}

// Compile compiles a JSON Schema for a work type's parameters. References may
// only point within the schema. The schema may use PathKeyword.
func Compile(schema map[string]any) (*Schema, error) {
	b, err := json.Marshal(schema) // map keys sorted: the digest is canonical
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.RegisterVocabulary(pathVocabulary())
	c.AssertVocabs()
	const url = "chiffon:///parameters.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), url, "schema"))
	}
	return &Schema{s: s, digest: sha256.Sum256(b)}, nil
}

// Same reports whether s and o were compiled from the same JSON.
func (s *Schema) Same(o *Schema) bool { return s.digest == o.digest }

var printer = message.NewPrinter(language.English)

// Check validates params (nil is the empty object) and returns the first value
// the schema refuses as a *ParamError, or nil.
func (s *Schema) Check(params map[string]any) error {
	if params == nil {
		params = map[string]any{}
	}
	b, err := json.Marshal(params)
	if err != nil {
		return &ParamError{Message: err.Error()}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return &ParamError{Message: err.Error()}
	}
	err = s.s.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	return &ParamError{Pointer: pointer(leaf.InstanceLocation), Message: leaf.ErrorKind.LocalizedString(printer)}
}

// pointer is the JSON pointer (RFC 6901) of path.
func pointer(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}
