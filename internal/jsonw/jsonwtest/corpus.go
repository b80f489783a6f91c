package jsonwtest

import (
	"math/rand/v2"
	"testing"
)

// AwkwardTexts returns strings that exercise a JSON string writer: each awkward piece
// alone and amid text long enough for an eight-byte scan, every byte value at every
// place in a word, and random strings of the bytes at the edges of what needs
// escaping.
func AwkwardTexts() []string {
	var texts []string
	for _, p := range AwkwardPieces {
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
	return texts
}

// MostByHand fails t unless at least half of n generated values, of which hand took
// the hand-written path, did: otherwise an equivalence test would mostly compare
// encoding/json with itself.
func MostByHand(t testing.TB, hand, n int) {
	t.Helper()
	t.Logf("%d of %d written by hand", hand, n)
	if hand < n/2 {
		t.Errorf("only %d of %d values written by hand", hand, n)
	}
}
