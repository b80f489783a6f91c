package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/chiffon-dev/chiffon/worktype"
)

// The checks a subprocess's rendered argv, dir and environment pass before
// anything runs: parameters must not become options, a templated dir must not
// leave its base, the dir must be there, path parameters must name something
// inside it, and only declared parameters reach the environment.

// argTemplate is one Command element.
type argTemplate struct {
	t *template.Template
	// guarded is true when a parameter may decide whether the rendered element
	// starts with '-': the element contains an action and its text does not begin
	// with a literal "-name=".
	guarded bool
	// params are the parameters the element reads, for error messages.
	params []string
	// optional, for an element of an optional group, are the parameters the
	// whole group reads: when one is absent, the group is left out.
	optional []string
	// at names the element in messages: "command[3]", "command[4][1]".
	at string
}

// newArgTemplate parses a Command element. Unless allowOptions, an element whose
// text starts an option that a parameter completes ("-{{.flag}}", "-v{{.x}}")
// is an error: it would render to an option chosen by the parameter every time.
func newArgTemplate(name, text string, allowOptions bool) (argTemplate, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return argTemplate{}, err
	}
	a := argTemplate{t: t, params: templateParams(t)}
	if templated(t) {
		lit, _, _ := strings.Cut(text, "{{")
		a.guarded = !(strings.HasPrefix(lit, "-") && strings.Contains(lit, "="))
		if a.guarded && strings.HasPrefix(lit, "-") && !allowOptions {
			return a, fmt.Errorf("%q lets a parameter choose an option: write the option "+
				`as "--name={{.x}}" or as its own element, or set allow_option_args: true`, text)
		}
	}
	return a, nil
}

// newOptionalGroup parses the templates of the optional group at; each
// carries the parameters of the whole group, which must read one.
func newOptionalGroup(name, at string, texts []string, allowOptions bool) ([]argTemplate, error) {
	if len(texts) == 0 {
		return nil, fmt.Errorf("%s: %w", at, errEmptyGroup)
	}
	var group []argTemplate
	var params []string
	for j, text := range texts {
		a, err := newArgTemplate(name, text, allowOptions)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", at, j, err)
		}
		a.at = fmt.Sprintf("%s[%d]", at, j)
		params = append(params, a.params...)
		group = append(group, a)
	}
	slices.Sort(params)
	params = slices.Compact(params)
	if len(params) == 0 {
		return nil, fmt.Errorf("%s: an optional group must read a parameter ({{.name}}): "+
			"its absence is what leaves the group out", at)
	}
	for i := range group {
		group[i].optional = params
	}
	return group, nil
}

// leftOut reports whether a is in an optional group one of whose parameters
// is absent (missing or null).
func (a argTemplate) leftOut(params map[string]any) bool {
	return slices.ContainsFunc(a.optional, func(name string) bool { return params[name] == nil })
}

// checkOptionArg refuses a rendered argument that would be an option of the
// command; what names the argument in the error.
func checkOptionArg(what, value string, params []string) error {
	if !strings.HasPrefix(value, "-") {
		return nil
	}
	return fmt.Errorf("%s %q%s starts with '-' and would be an option of the command;"+
		" set allow_option_args: true on the work type to allow that", what, value, fromParams(params))
}

// fromParams names the parameters a value came from, for error messages.
func fromParams(params []string) string {
	if len(params) == 0 {
		return ""
	}
	return " (from parameter " + strings.Join(params, ", ") + ")"
}

// templated reports whether t holds an action, not only text.
func templated(t *template.Template) bool {
	if t.Tree == nil {
		return false
	}
	for _, n := range t.Tree.Root.Nodes {
		if _, ok := n.(*parse.TextNode); !ok {
			return true
		}
	}
	return false
}

// templateParams lists, sorted, the parameters ({{.name}}, {{$.name}}) t reads.
func templateParams(t *template.Template) []string {
	var names []string
	if t.Tree == nil {
		return nil
	}
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.ChainNode:
			walk(n.Node)
		case *parse.FieldNode:
			names = append(names, n.Ident[0])
		case *parse.VariableNode:
			if len(n.Ident) > 1 && n.Ident[0] == "$" {
				names = append(names, n.Ident[1])
			}
		}
	}
	walk(t.Tree.Root)
	slices.Sort(names)
	return slices.Compact(names)
}

// dirBaseOf returns the directory a rendered dir must stay in, cleaned; ""
// means the dir is not confined (it is literal and dir_base is not set).
func dirBaseOf(cfg WorkTypeConfig, dir *template.Template) (string, error) {
	if cfg.DirBase != "" {
		if !filepath.IsAbs(cfg.DirBase) {
			return "", fmt.Errorf("dir_base: %q is not an absolute path", cfg.DirBase)
		}
		if cfg.Dir == "" {
			return "", errors.New("dir_base: set without dir")
		}
		return filepath.Clean(cfg.DirBase), nil
	}
	if !templated(dir) {
		return "", nil
	}
	lit, _, _ := strings.Cut(cfg.Dir, "{{")
	i := strings.LastIndexByte(lit, '/')
	if i < 0 || !filepath.IsAbs(lit[:i+1]) {
		return "", fmt.Errorf("dir: a templated dir needs an absolute literal base "+
			"(such as /srv/repos/{{.repo}}) or dir_base, got %q", cfg.Dir)
	}
	return filepath.Clean(lit[:i+1]), nil
}

// confineDir returns the rendered dir cleaned, or with its symlinks resolved when
// it exists, or an error when either is not base or below it. The child is
// started in the returned path, so a symlink swapped in after the check is not
// followed at the last component.
func confineDir(base, dir string, params []string) (string, error) {
	from := fromParams(params)
	clean := filepath.Clean(dir)
	if !filepath.IsAbs(clean) || !within(base, clean) {
		return "", fmt.Errorf("dir %q%s is not under %s", dir, from, base)
	}
	real, err := filepath.EvalSymlinks(clean)
	if errors.Is(err, fs.ErrNotExist) {
		return clean, nil // nothing to follow: starting in it fails
	}
	if err != nil {
		return "", fmt.Errorf("dir %q%s: %v", dir, from, err)
	}
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", fmt.Errorf("dir %q%s: base %s: %v", dir, from, base, err)
	}
	if !within(realBase, real) {
		return "", fmt.Errorf("dir %q%s resolves to %s, which is not under %s", dir, from, real, realBase)
	}
	return real, nil
}

// checkDir reports a dir that is not a directory here; from names the
// parameters it came from, for the message.
func checkDir(dir, from string) error {
	info, err := os.Stat(dir)
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("dir %s%s does not exist", dir, from)
	case errors.As(err, &pe):
		return fmt.Errorf("dir %s%s: %v", dir, from, pe.Err)
	case err != nil:
		return fmt.Errorf("dir %s%s: %v", dir, from, err)
	case !info.IsDir():
		return fmt.Errorf("dir %s%s is not a directory", dir, from)
	}
	return nil
}

// checkPaths refuses, as a *worktype.ParamError, a parameter of names (the
// work type's path parameters) that, once its symlinks are resolved, names
// nothing inside dir: absolute, climbing out with "..", through a symlink that
// leads outside, or not there. The program gets the value as given: whoever
// could swap a symlink in dir after this check may change the dir's files
// anyway.
func checkPaths(dir string, names []string, params map[string]any) error {
	if len(names) == 0 {
		return nil
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("dir %s: %v", dir, err)
	}
	for _, name := range names {
		v, ok := params[name].(string)
		if !ok {
			continue // absent, or not a string: the schema's business
		}
		if err := confinePath(realDir, v); err != nil {
			pointer := "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
			return &worktype.ParamError{Pointer: pointer, Message: err.Error()}
		}
	}
	return nil
}

// confinePath reports why p does not name something inside realDir, a
// directory whose symlinks are resolved.
func confinePath(realDir, p string) error {
	if err := worktype.CheckRelPath(p); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(realDir, p))
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q: no such file or directory in %s", p, realDir)
	case errors.As(err, &pe):
		return fmt.Errorf("%q: %v", p, pe.Err)
	case err != nil:
		return fmt.Errorf("%q: %v", p, err)
	case !within(realDir, real):
		return fmt.Errorf("%q resolves to %s, outside %s", p, real, realDir)
	}
	return nil
}

// within reports whether the clean path p is base or below it.
func within(base, p string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envParams returns the parameters a shell work type passes as
// CHIFFON_PARAM_<NAME>: the top-level properties of its schema, sorted. A name
// that is no valid variable name, or two that differ only in case, are errors.
func envParams(schema map[string]any) ([]string, error) {
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	byVar := map[string]string{}
	for _, name := range names {
		if !envNamePattern.MatchString(name) {
			return nil, fmt.Errorf("schema: property %q cannot be passed as CHIFFON_PARAM_<NAME>: "+
				"a shell work type's parameter names are letters, digits and '_', not starting with a digit", name)
		}
		v := "CHIFFON_PARAM_" + strings.ToUpper(name)
		if other, dup := byVar[v]; dup {
			return nil, fmt.Errorf("schema: properties %q and %q would both be %s", other, name, v)
		}
		byVar[v] = name
	}
	return names, nil
}
