package worktype

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/message"
)

// PathKeyword marks a string parameter that names a file or directory inside the
// work type's directory, as "x-chiffon-path: true" in its property's schema.
// Every schema check (the orchestrator's at submit, the agent's before a run)
// refuses a value that CheckRelPath refuses; an agent also resolves the value's
// symlinks within the work type's dir before it runs anything (agent docs).
const PathKeyword = "x-chiffon-path"

// CheckRelPath reports why p, by its text alone, cannot name a path inside a
// directory: it is empty, absolute, or leaves the directory through "..". nil
// when it can. Symlinks are for whoever holds the directory to resolve.
func CheckRelPath(p string) error {
	clean := path.Clean(p)
	switch {
	case p == "":
		return errors.New("is empty: want a path relative to the work type's directory")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q is an absolute path: want a path relative to the work type's directory", p)
	case clean == ".." || strings.HasPrefix(clean, "../"):
		return fmt.Errorf("%q leaves the work type's directory", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q holds a NUL byte", p)
	}
	return nil
}

// PathParams lists, sorted, the top-level properties of schema that PathKeyword
// marks. The keyword anywhere else is an error: only a top-level parameter is
// checked against the work type's directory.
func PathParams(schema map[string]any) ([]string, error) {
	props, _ := schema["properties"].(map[string]any)
	var names []string
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if p, ok := props[name].(map[string]any); ok && p[PathKeyword] == true {
			names = append(names, name)
		}
	}
	var stray []string
	var walk func(v any, at []string)
	walk = func(v any, at []string) {
		switch v := v.(type) {
		case map[string]any:
			nameMap := len(at) > 0 && nameMaps[at[len(at)-1]] // its keys are names, not keywords
			if _, ok := v[PathKeyword]; ok && !nameMap && !(len(at) == 2 && at[0] == "properties") {
				stray = append(stray, "#"+pointer(at))
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if nameMap || !dataKeywords[k] {
					walk(v[k], append(slices.Clip(at), k))
				}
			}
		case []any:
			for i, e := range v {
				walk(e, append(slices.Clip(at), fmt.Sprint(i)))
			}
		}
	}
	walk(schema, nil)
	if len(stray) > 0 {
		return nil, fmt.Errorf("%s at schema %s: it applies to top-level properties only", PathKeyword, strings.Join(stray, ", "))
	}
	return names, nil
}

// nameMaps are the keywords whose value maps names to schemas.
var nameMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true,
	"definitions": true, "dependentSchemas": true}

// dataKeywords are the keywords whose value is data, not schemas.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// pathVocabulary compiles PathKeyword: its value must be a boolean, and true
// makes a string value pass CheckRelPath.
func pathVocabulary() *jsonschema.Vocabulary {
	const url = "chiffon:///vocab/path.json"
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"properties": {"` + PathKeyword + `": {"type": "boolean"}}}`))
	if err != nil {
		panic(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, meta); err != nil {
		panic(err)
	}
	return &jsonschema.Vocabulary{URL: url, Schema: c.MustCompile(url),
		Compile: func(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
			if obj[PathKeyword] != true {
				return nil, nil
			}
			return relPath{}, nil
		}}
}

// relPath is a compiled "x-chiffon-path: true".
type relPath struct{}

func (relPath) Validate(ctx *jsonschema.ValidatorContext, v any) {
	if s, ok := v.(string); ok {
		if err := CheckRelPath(s); err != nil {
			ctx.AddError(&relPathError{err})
		}
	}
}

// relPathError is the schema error of a value CheckRelPath refuses.
type relPathError struct{ err error }

func (*relPathError) KeywordPath() []string { return []string{PathKeyword} }

func (e *relPathError) LocalizedString(*message.Printer) string { return e.err.Error() }
