package orchestrator

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// webhookConsts reads the string constants of package webhook, by name.
func webhookConsts(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("webhook", "webhook.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// sentEvents finds every call of hooks.Send in the non-test files of the
// package and of package fleet (the batches' events) and returns the events
// they can send: a webhook constant, a variable given webhook constants, or
// any taskEvent gives.
func sentEvents(t *testing.T) []string {
	t.Helper()
	consts := webhookConsts(t)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fleetFiles, err := filepath.Glob(filepath.Join("fleet", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, fleetFiles...)
	fset := token.NewFileSet()
	var sent []string
	add := func(ev string) {
		if !slices.Contains(sent, ev) {
			sent = append(sent, ev)
		}
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		assigned := webhookAssignments(f, consts)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Send" || len(call.Args) == 0 {
				return true
			}
			if name := receiverName(sel.X); name != "hooks" {
				return true
			}
			switch arg := call.Args[0].(type) {
			case *ast.SelectorExpr:
				if pkg, ok := arg.X.(*ast.Ident); ok && pkg.Name == "webhook" && consts[arg.Sel.Name] != "" {
					add(consts[arg.Sel.Name])
					return true
				}
			case *ast.Ident:
				if evs := assigned[arg.Name]; len(evs) > 0 {
					for _, ev := range evs {
						add(ev)
					}
					return true
				}
			case *ast.CallExpr:
				if fn, ok := arg.Fun.(*ast.Ident); ok && fn.Name == "taskEvent" {
					for _, s := range task.States {
						if s.Final() {
							add(taskEvent(s))
						}
					}
					return true
				}
			}
			t.Errorf("%s: hooks.Send with an event this test cannot name: teach it", fset.Position(call.Pos()))
			return true
		})
	}
	slices.Sort(sent)
	return sent
}

// webhookAssignments maps each variable of f that is given a webhook
// constant (event := webhook.X, event = webhook.Y) to the events it is given.
func webhookAssignments(f *ast.File, consts map[string]string) map[string][]string {
	out := map[string][]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, lhs := range as.Lhs {
			id, ok := lhs.(*ast.Ident)
			sel, isSel := as.Rhs[i].(*ast.SelectorExpr)
			if !ok || !isSel {
				continue
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "webhook" && consts[sel.Sel.Name] != "" {
				out[id.Name] = append(out[id.Name], consts[sel.Sel.Name])
			}
		}
		return true
	})
	return out
}

// receiverName is the name of x, a variable or a field.
func receiverName(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

// TestOpenAPIDeliveryEventIsEveryEventSent: the OpenAPI document's
// Delivery.event lists exactly the events the orchestrator sends to webhook
// receivers (task.finished is only a name a receiver may list: it is never sent).
func TestOpenAPIDeliveryEventIsEveryEventSent(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("httpapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	enum := slices.Sorted(slices.Values(doc.Components.Schemas["Delivery"].Properties["event"].Enum))
	sent := sentEvents(t)
	if !slices.Equal(enum, sent) {
		t.Errorf("httpapi/openapi.json Delivery.event enum = %v, the orchestrator sends %v", enum, sent)
	}
	for _, ev := range sent {
		if !slices.Contains(webhook.Events, ev) {
			t.Errorf("the orchestrator sends %s, which no receiver can list (webhook.Events)", ev)
		}
	}
	if slices.Contains(sent, webhook.TaskFinished) {
		t.Errorf("%s is sent: it should only be a name for the three task events", webhook.TaskFinished)
	}
}
