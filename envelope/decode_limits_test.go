package envelope_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
)

// padTo returns a work_request of exactly size bytes, padded in x_custom_fields.
func padTo(t *testing.T, size int) []byte {
	t.Helper()
	base := len(envJSON(wr, set("x_custom_fields.pad", "")))
	if size < base {
		t.Fatalf("cannot pad to %d bytes: the envelope alone is %d", size, base)
	}
	b := envJSON(wr, set("x_custom_fields.pad", strings.Repeat("a", size-base)))
	if len(b) != size {
		t.Fatalf("padded envelope is %d bytes, want %d", len(b), size)
	}
	return b
}

func TestDecodeEnvelopeSizeLimit(t *testing.T) {
	const mib = 1 << 20
	st := func(edits ...edit) []byte { return envJSON(envelope.TypeWorkStatus, edits...) }
	output := func(n int) edit { return set("payload.step.output", strings.Repeat("o", n)) }
	runDecodeCases(t, &envelope.Decoder{}, []decodeCase{
		valid("exactly 1 MiB", padTo(t, mib)),
		invalid("1 MiB and one byte", "payload", padTo(t, mib+1)),
		invalid("large parameters", "payload", envJSON(wr, set("payload.parameters.blob", strings.Repeat("p", mib)))),
		// The step output itself is within its limit; the envelope around it is not.
		invalid("unchunked output of exactly 1 MiB", "payload", st(output(envelope.MaxOutputSize))),
		// One value breaking a field rule is reported on that field, not on the size.
		invalid("unchunked output of 1 MiB and one byte", "payload.step.output", st(output(envelope.MaxOutputSize+1))),
		invalid("unchunked output of 2 MiB", "payload.step.output", st(output(2*mib))),
		invalid("work_result output of 2 MiB", "payload.output",
			envJSON(envelope.TypeWorkResult, set("payload.output", strings.Repeat("r", 2*mib)))),
		invalid("chunk range of 256 KiB carrying 2 MiB", "payload.step.output_chunk",
			st(output(2*mib), set("payload.step.output_chunk", "bytes 0-262144 of 2097152"))),
		invalid("bad field in a 2 MiB envelope", "payload.work_type",
			envJSON(wr, set("payload.work_type", "Bad"), set("payload.parameters.blob", strings.Repeat("p", 2*mib)))),
	})
}

func TestDecoderMaxSize(t *testing.T) {
	st := func(n int) []byte {
		return envJSON(envelope.TypeWorkStatus, set("payload.step.output", strings.Repeat("o", n)))
	}
	runDecodeCases(t, &envelope.Decoder{MaxSize: 2 << 20}, []decodeCase{
		valid("1 MiB output under a 2 MiB limit", st(envelope.MaxOutputSize)),
		invalid("output limit still applies", "payload.step.output", st(envelope.MaxOutputSize+1)),
	})
	runDecodeCases(t, &envelope.Decoder{MaxSize: 1000}, []decodeCase{
		valid("small envelope", padTo(t, 1000)),
		invalid("over a 1000-byte limit", "payload", padTo(t, 1001)),
	})
}

func TestDecodeOutputChunkRules(t *testing.T) {
	chunk := func(rng, output string) []byte {
		return envJSON(envelope.TypeWorkStatus, set("payload.step.output_chunk", rng), set("payload.step.output", output))
	}
	const field = "payload.step.output_chunk"
	full := strings.Repeat("x", envelope.MaxChunkSize)
	cases := []decodeCase{
		validThen("first of two", chunk("bytes 0-5 of 10", "hello"), func(t *testing.T, e *envelope.Envelope) {
			if got := e.Payload.(*envelope.WorkStatus).Step.OutputChunk; got != "bytes 0-5 of 10" {
				t.Errorf("output_chunk = %q", got)
			}
		}),
		valid("last of two", chunk("bytes 5-10 of 10", "world")),
		valid("whole output in one chunk", chunk("bytes 0-1 of 1", "x")),
		valid("length counts UTF-8 bytes", chunk("bytes 0-6 of 6", "héllo")),
		valid("full 256 KiB chunk", chunk("bytes 0-262144 of 524288", full)),
		valid("full chunk at the end", chunk("bytes 262144-524288 of 524288", full)),
		valid("total far beyond one envelope", chunk(fmt.Sprintf("bytes 0-5 of %d", int64(1)<<40), "hello")),

		invalid("output shorter than the range", field, chunk("bytes 0-10 of 10", "hello")),
		invalid("output longer than the range", field, chunk("bytes 0-4 of 10", "hello")),
		invalid("range counted in runes, not bytes", field, chunk("bytes 0-5 of 5", "héllo")),
		invalid("empty range A = B", field, chunk("bytes 5-5 of 10", "")),
		invalid("A > B", field, chunk("bytes 6-1 of 10", "hello")),
		invalid("B > N", field, chunk("bytes 5-10 of 9", "hello")),
		invalid("chunk of 256 KiB and one byte", field, chunk("bytes 0-262145 of 524288", full+"x")),
		invalid("spec's shorthand 256k", field, chunk("bytes 0-256k of 512k", full)),
		invalid("negative start", field, chunk("bytes -1-4 of 10", "hello")),
		invalid("plus sign", field, chunk("bytes +0-5 of 10", "hello")),
		invalid("leading zero", field, chunk("bytes 00-5 of 10", "hello")),
		invalid("upper-case Bytes", field, chunk("Bytes 0-5 of 10", "hello")),
		invalid("HTTP Content-Range form", field, chunk("bytes 0-4/10", "hello")),
		invalid("no unit", field, chunk("0-5 of 10", "hello")),
		invalid("spaces around hyphen", field, chunk("bytes 0 - 5 of 10", "hello")),
		invalid("trailing space", field, chunk("bytes 0-5 of 10 ", "hello")),
		invalid("two hyphens", field, chunk("bytes 0-5-5 of 10", "hello")),
		invalid("huge total", field, chunk("bytes 0-5 of 99999999999999999999", "hello")),
		invalid("empty string", field, chunk("", "hello")),
		invalid("null", field, envJSON(envelope.TypeWorkStatus, set("payload.step.output_chunk", nil))),
		invalid("number", field, envJSON(envelope.TypeWorkStatus, set("payload.step.output_chunk", 5))),
	}
	runDecodeCases(t, &envelope.Decoder{}, cases)
}
