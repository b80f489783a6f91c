package jsonw_test

import (
	"bytes"
	"testing"

	"github.com/chiffon-dev/chiffon/internal/jsonw"
	"github.com/chiffon-dev/chiffon/internal/jsonw/jsonwtest"
)

// prefix is what the tests put in dst first: the helpers append, they do not
// overwrite.
const prefix = `{"k":`

func assertStringLikeReference(t *testing.T, s string) {
	t.Helper()
	want, err := jsonwtest.Reference(s)
	if err != nil {
		t.Fatal(err)
	}
	got := jsonw.AppendString([]byte(prefix), s)
	if !bytes.Equal(got, append([]byte(prefix), want...)) {
		t.Fatalf("AppendString(%q)\ngot  %q\nwant %q", s, got[len(prefix):], want)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonwtest.AwkwardTexts() {
		assertStringLikeReference(t, s)
	}
}

// FuzzAppendString checks that any text comes out as encoding/json writes it.
func FuzzAppendString(f *testing.F) {
	for _, p := range jsonwtest.AwkwardPieces {
		f.Add("0123456789" + p + "abc")
	}
	f.Fuzz(assertStringLikeReference)
}

func TestAppendStringAllocatesNothingWithRoom(t *testing.T) {
	buf := make([]byte, 0, 256)
	s := "a line of output with \"quotes\", a tab\t and é\n"
	if n := testing.AllocsPerRun(100, func() { _ = jsonw.AppendString(buf, s) }); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
