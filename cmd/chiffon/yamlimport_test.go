package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoGoFileImportsTheArchivedYAMLModule: gopkg.in/yaml.v3 is archived and
// go.yaml.in/yaml/v3 is its maintained drop-in; two YAML packages in one binary would
// also decode configs two ways. Other modules may still need the old one (indirect).
func TestNoGoFileImportsTheArchivedYAMLModule(t *testing.T) {
	const archived = "gopkg.in/yaml.v3"
	root := repoRoot
	fset := token.NewFileSet()
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		scanned++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == archived || strings.HasPrefix(p, archived+"/") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s: use go.yaml.in/yaml/v3", rel, archived)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("scanned only %d Go files under %s", scanned, root)
	}
}
