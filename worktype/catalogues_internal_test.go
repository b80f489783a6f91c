package worktype

import (
	"fmt"
	"reflect"
	"testing"
)

// TestCataloguesReadEachDistinctOneOnce: a registration saying what one read
// before said gets the same catalogue, with nothing compiled again; one that
// differs in its catalogue, its stop graces or its work types is read anew;
// one read with an error is not kept; no more than MaxCatalogues are kept.
func TestCataloguesReadEachDistinctOneOnce(t *testing.T) {
	spec := func(required string) map[string]any {
		return map[string]any{"echo": map[string]any{"description": "d",
			"parameters": map[string]any{"type": "object", "required": []any{required}}}}
	}
	reg := func(required string, grace any) map[string]any {
		x := map[string]any{Extension: spec(required)}
		if grace != nil {
			x[StopGraceExtension] = map[string]any{"echo": grace}
		}
		return x
	}
	offered := []string{"echo", "sleep"}
	var c Catalogues
	first, err := c.FromRegistration(reg("m", nil), offered)
	if err != nil || first["echo"].Schema == nil {
		t.Fatalf("read %v, %v", first, err)
	}
	same := func(a, b map[string]Declared) bool {
		return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
	}
	cases := []struct {
		name    string
		x       map[string]any
		offered []string
		// shared: the first read's map comes back; err: the read fails.
		shared, err bool
	}{
		{"the same again, in new values", reg("m", nil), []string{"echo", "sleep"}, true, false},
		{"another schema", reg("n", nil), offered, false, false},
		{"a stop grace", reg("m", 1000), offered, false, false},
		{"other work types", reg("m", nil), []string{"echo"}, false, false},
		{"a catalogue naming a work type not offered", reg("m", nil), []string{"sleep"}, false, true},
		{"the same failing one again", reg("m", nil), []string{"sleep"}, false, true},
	}
	for _, tc := range cases {
		got, err := c.FromRegistration(tc.x, tc.offered)
		want, wantErr := FromRegistration(tc.x, tc.offered)
		if (err != nil) != tc.err || (wantErr != nil) != tc.err {
			t.Errorf("%s: error %v (uncached %v), want one: %v", tc.name, err, wantErr, tc.err)
			continue
		}
		if same(got, first) != tc.shared {
			t.Errorf("%s: shares the first read's catalogue: %v, want %v", tc.name, same(got, first), tc.shared)
		}
		if !sameCatalogue(got, want) {
			t.Errorf("%s: read %v, uncached %v", tc.name, got, want)
		}
	}
	if n := len(c.read); n != 4 {
		t.Errorf("%d catalogues kept, want the 4 read without error", n)
	}
	if got, err := c.FromRegistration(map[string]any{}, offered); got != nil || err != nil {
		t.Errorf("a registration without a catalogue: %v, %v", got, err)
	}
	for i := range MaxCatalogues + 10 {
		if _, err := c.FromRegistration(reg(fmt.Sprintf("p%d", i), nil), offered); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.read); n > MaxCatalogues {
		t.Errorf("%d catalogues kept, over %d", n, MaxCatalogues)
	}
}

// sameCatalogue compares two catalogues read, schemas by their JSON.
func sameCatalogue(a, b map[string]Declared) bool {
	if len(a) != len(b) {
		return false
	}
	for name, d := range a {
		e, ok := b[name]
		if !ok || !reflect.DeepEqual(d.Spec, e.Spec) || (d.Schema == nil) != (e.Schema == nil) ||
			d.Schema != nil && !d.Schema.Same(e.Schema) {
			return false
		}
	}
	return true
}
