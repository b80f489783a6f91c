package envelope_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// FuzzDecode checks that Decode never panics, that it fails only with a 5003 or a 5006,
// and that whatever it accepts encodes to bytes it accepts again as the same envelope.
// The seed corpus is in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, typ := range allTypes {
		f.Add(envJSON(typ))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		input := bytes.Clone(data)
		e, err := envelope.Decode(data)
		if err != nil {
			var pe *errcodes.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Decode failed with %T, not *errcodes.Error: %v", err, err)
			}
			if pe.Code != errcodes.InvalidMessage && pe.Code != errcodes.UnsupportedWorkType {
				t.Fatalf("Decode failed with code %d: %v", pe.Code, err)
			}
			return
		}
		b, err := envelope.Encode(e)
		if err != nil {
			t.Fatalf("Encode of an accepted envelope: %v\ninput %q", err, input)
		}
		// The envelope must not share memory with the input buffer.
		for i := range data {
			data[i] = 'x'
		}
		if again, err := envelope.Encode(e); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("envelope changed when its input buffer was overwritten\nbefore %s\nafter  %s", b, again)
		}
		if len(b) > envelope.MaxEnvelopeSize {
			// Normalizing can lengthen an envelope near the limit (U+2028 written as an
			// escape, zero resources written out); such output is rightly rejected.
			return
		}
		e2, err := envelope.Decode(b)
		if err != nil {
			t.Fatalf("Decode of re-encoded envelope: %v\ninput   %q\nencoded %s", err, input, b)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("re-decoded envelope differs\ninput  %q\nfirst  %s\nsecond %s", input, dump(e), dump(e2))
		}
		if b2, err := envelope.Encode(e2); err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("encoding is not stable\nfirst  %s\nsecond %s", b, b2)
		}
	})
}
