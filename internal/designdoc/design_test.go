// Package designdoc checks docs/design.md against the code: the import arrows
// it draws, the packages its table names and the files it cites. It needs no
// server, only the go command.
package designdoc

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is this module's path and directory, as `go list -m` says.
type module struct{ path, dir string }

// goList runs the go command with args in dir and returns its output.
func goList(t *testing.T, dir string, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func thisModule(t *testing.T) module {
	t.Helper()
	f := strings.Fields(goList(t, ".", "-m", "-f", "{{.Path}} {{.Dir}}"))
	if len(f) != 2 {
		t.Fatalf("go list -m: got %q", f)
	}
	return module{path: f[0], dir: f[1]}
}

// rel is p relative to the module ("" for a package outside it).
func (m module) rel(p string) string {
	if rest, ok := strings.CutPrefix(p, m.path+"/"); ok {
		return rest
	}
	return ""
}

// codeEdges returns every import edge between the module's packages, from their
// non-test files (the default build: no tag adds an edge today), as "from -> to",
// and the packages that have non-test files.
func codeEdges(t *testing.T, m module) (edges, pkgs []string) {
	t.Helper()
	out := goList(t, m.dir, "-f", "{{.ImportPath}} {{len .GoFiles}}{{range .Imports}} {{.}}{{end}}", "./...")
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		from := m.rel(f[0])
		if from == "" {
			t.Fatalf("go list: package %s outside the module", f[0])
		}
		if f[1] != "0" {
			pkgs = append(pkgs, from)
		}
		for _, imp := range f[2:] {
			if to := m.rel(imp); to != "" {
				edges = append(edges, from+" -> "+to)
			}
		}
	}
	slices.Sort(edges)
	slices.Sort(pkgs)
	return edges, pkgs
}

func readDesign(t *testing.T, m module) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(m.dir, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// docArrows parses the one ```arrows block of doc: a "from -> to" a line;
// blank lines and lines starting with # are skipped.
func docArrows(t *testing.T, doc string) []string {
	t.Helper()
	var arrows []string
	blocks, in := 0, false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "```arrows":
			in = true
			blocks++
		case in && line == "```":
			in = false
		case in && line != "" && !strings.HasPrefix(line, "#"):
			from, to, ok := strings.Cut(line, "->")
			from, to = strings.TrimSpace(from), strings.TrimSpace(to)
			if !ok || from == "" || to == "" || strings.ContainsAny(from+to, " \t>") {
				t.Errorf("docs/design.md:%d: %q is not \"from -> to\"", n, line)
				continue
			}
			a := from + " -> " + to
			if slices.Contains(arrows, a) {
				t.Errorf("docs/design.md:%d: %s twice", n, a)
			}
			arrows = append(arrows, a)
		}
	}
	if blocks != 1 || in {
		t.Fatalf("docs/design.md: want one closed ```arrows block, found %d (open at the end: %v)", blocks, in)
	}
	slices.Sort(arrows)
	return arrows
}

// TestDesignArrowsAreTheImports: the arrows block of docs/design.md lists
// exactly the import edges between the module's packages.
func TestDesignArrowsAreTheImports(t *testing.T) {
	m := thisModule(t)
	code, _ := codeEdges(t, m)
	doc := docArrows(t, readDesign(t, m))
	for _, e := range code {
		if !slices.Contains(doc, e) {
			t.Errorf("edge missing from docs/design.md: %s", e)
		}
	}
	for _, e := range doc {
		if !slices.Contains(code, e) {
			t.Errorf("docs/design.md claims an edge the code lacks: %s", e)
		}
	}
}

// packageHeader opens the package table; rowPackage is the package of a row.
const packageHeader = "| package | owns | imports |"

var rowPackage = regexp.MustCompile("^\\| `([a-z][a-z0-9_/]*)` \\|")

// tableRows returns the package of each row of doc's package table.
func tableRows(t *testing.T, doc string) []string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n"+packageHeader+"\n")
	if !ok {
		t.Fatalf("docs/design.md: no package table (a line %q)", packageHeader)
	}
	var rows []string
	for line := range strings.Lines(after) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		sm := rowPackage.FindStringSubmatch(line)
		if sm == nil {
			t.Errorf("docs/design.md: package table row %q names no package", strings.TrimSpace(line))
			continue
		}
		rows = append(rows, sm[1])
	}
	return rows
}

// TestDesignTableNamesEveryPackage: the package table has one row for each
// package with non-test files, and none for a package that does not exist.
func TestDesignTableNamesEveryPackage(t *testing.T) {
	m := thisModule(t)
	_, pkgs := codeEdges(t, m)
	rows := tableRows(t, readDesign(t, m))
	for _, p := range pkgs {
		if !slices.Contains(rows, p) {
			t.Errorf("package %s has no row in docs/design.md's package table", p)
		}
	}
	for i, r := range rows {
		if !slices.Contains(pkgs, r) {
			t.Errorf("docs/design.md's package table names %s, which is no package", r)
		}
		if slices.Contains(rows[:i], r) {
			t.Errorf("docs/design.md's package table names %s twice", r)
		}
	}
}

// cited is a path in backquotes: a word, then at least one /segment.
var cited = regexp.MustCompile("`([a-z][a-z0-9_]*(?:/[A-Za-z0-9_.-]+)+/?)`")

// TestDesignCitesFilesThatExist: every path of the repository that
// docs/design.md cites (in backquotes, starting with a top-level folder) exists.
func TestDesignCitesFilesThatExist(t *testing.T) {
	m := thisModule(t)
	for _, sm := range cited.FindAllStringSubmatch(readDesign(t, m), -1) {
		p := sm[1]
		top, _, _ := strings.Cut(p, "/")
		if fi, err := os.Stat(filepath.Join(m.dir, top)); err != nil || !fi.IsDir() {
			continue // not a path of this repository (a URL path, a config key)
		}
		if _, err := os.Stat(filepath.Join(m.dir, filepath.FromSlash(p))); err != nil {
			t.Errorf("docs/design.md cites %s, which does not exist", p)
		}
	}
}
