package jsonw_test

import (
	"bytes"
	"math/rand/v2"
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
	// Each piece alone and amid text long enough for the eight-byte scan; every byte
	// value at every place in a word; and random strings of the bytes at the edges of
	// what needs escaping.
	var texts []string
	for _, p := range jsonwtest.AwkwardPieces {
		texts = append(texts, p, "0123456789abcdef"+p+"0123456789abcdef", p+"0123456789", "0123456"+p)
	}
	for c := range 256 {
		for at := range 9 {
			s := []byte("abcdefghijklmnopq")
			s[at] = byte(c)
			texts = append(texts, string([]byte{byte(c)}), string(s), string(s[:at+1]))
		}
	}
	edges := []byte{0x00, 0x01, 0x08, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5d, 0x7f, 0x80, 0xa8, 0xa9, 0xbf, 0xc2, 0xe2, 0xed, 0xf0, 0xff, 'a', '<', '&'}
	r := rand.New(rand.NewPCG(8, 8))
	for range 5000 {
		s := make([]byte, r.IntN(40))
		for i := range s {
			s[i] = edges[r.IntN(len(edges))]
		}
		texts = append(texts, string(s))
	}
	for _, s := range texts {
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
