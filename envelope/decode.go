package envelope

import (
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// Decoder decodes envelopes strictly. The zero value speaks SupportedVersions and
// accepts envelopes up to MaxEnvelopeSize.
type Decoder struct {
	// Versions are the protocol versions the receiver speaks; nil means
	// SupportedVersions. An envelope in another well-formed version gets 5006.
	Versions []string
	// MaxSize is the largest envelope accepted, in bytes; 0 means MaxEnvelopeSize.
	MaxSize int
}

var defaultDecoder Decoder

// Decode decodes one envelope with the default Decoder.
func Decode(data []byte) (*Envelope, error) { return defaultDecoder.Decode(data) }

// envelopeKeys are the top-level members an envelope may have.
var envelopeKeys = []string{
	"protocol_version", "message_id", "from_agent", "to_agent", "timestamp",
	"trace_id", "request_id", "type", "payload", "x_custom_fields",
}

// Decode parses data as one envelope and checks every protocol rule. Any failure is an
// *errcodes.Error: 5006 for a protocol version the receiver does not speak, 5003
// otherwise, with the dotted path of the offending field in its context.
func (d *Decoder) Decode(data []byte) (*Envelope, error) {
	e, err := d.decode(data)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (d *Decoder) decode(data []byte) (*Envelope, *errcodes.Error) {
	if !utf8.Valid(data) {
		return nil, errcodes.NewInvalidMessage("", "message is not valid UTF-8")
	}
	dec := decodings.Get().(*decoding)
	defer dec.release()
	if !dec.parse(data) {
		return nil, errcodes.NewInvalidMessage("", "message is not valid JSON")
	}
	if c := dec.toks[0].kind; c != '{' {
		return nil, errcodes.NewInvalidMessage("", "message is not a JSON object, got %s", kindName(c))
	}
	o := dec.object(0, nil, "")

	// The version comes first: a message from a newer protocol may have fields this
	// one does not know, and its sender needs to hear 5006, not 5003.
	versions := d.Versions
	if versions == nil {
		versions = SupportedVersions
	}
	e := &Envelope{ProtocolVersion: o.word("protocol_version", versions)}
	if o.err != nil {
		return nil, o.err
	}
	if !validVersionSyntax(e.ProtocolVersion) {
		o.fail("protocol_version", "must be MAJOR.MINOR such as \"1.0\", got %q", e.ProtocolVersion)
		return nil, o.err
	}
	if !slices.Contains(versions, e.ProtocolVersion) {
		return nil, errcodes.NewUnsupportedVersion(e.ProtocolVersion, versions)
	}

	e.MessageID = o.uuid("message_id")
	e.FromAgent = o.agentType("from_agent")
	e.ToAgent = o.agentType("to_agent")
	e.Timestamp = o.timestamp("timestamp")
	e.TraceID = o.uuid("trace_id")
	e.RequestID = o.uuid("request_id")
	e.Type = Type(o.word("type", messageTypeWords))
	schema, known := payloadSchemas[e.Type]
	if o.err == nil && !known {
		o.fail("type", "unknown message type %q", e.Type)
	}
	payload := o.sub("payload", true)
	e.XCustomFields = o.anyMap("x_custom_fields", false)
	if err := o.close(envelopeKeys...); err != nil {
		return nil, err
	}
	p, err := schema(payload)
	if err != nil {
		return nil, err
	}
	e.Payload = p

	max := d.MaxSize
	if max == 0 {
		max = MaxEnvelopeSize
	}
	if len(data) > max {
		return nil, errcodes.NewInvalidMessage("payload", "envelope is %d bytes, over the %d-byte limit", len(data), max)
	}
	return e, nil
}

// decoding is the scratch state of one Decode call. It is pooled, and nothing a
// decode returns points into it.
type decoding struct {
	tape
	// objs hold the objects a decode opens: the envelope, its payload and an object
	// inside that.
	objs [4]object
	used int
}

var decodings = sync.Pool{New: func() any { return new(decoding) }}

// The most tokens and decoded text kept for the next decode, so that a pathological
// message does not pin its memory. The text of any envelope fits.
const (
	maxPooledTokens = 4096
	maxPooledText   = MaxEnvelopeSize + 8
)

func (dec *decoding) release() {
	toks, buf := dec.toks[:0], dec.buf[:0]
	if cap(toks) > maxPooledTokens {
		toks = nil
	}
	if cap(buf) > maxPooledText {
		buf = nil
	}
	*dec = decoding{tape: tape{toks: toks, buf: buf}}
	decodings.Put(dec)
}

// object opens the object at token k, found under name in parent (nil for the
// envelope).
func (dec *decoding) object(k int, parent *object, name string) *object {
	var o *object
	if dec.used < len(dec.objs) {
		o = &dec.objs[dec.used]
		dec.used++
	} else {
		o = new(object)
	}
	*o = object{t: &dec.tape, tok: k, parent: parent, name: name, dec: dec}
	o.distinct, o.cursor = dec.distinctKeys(k), k+1
	return o
}

// The fixed words of the protocol, which word returns without allocating.
var (
	agentTypeWords   = []string{string(Orchestrator), string(Infra), string(Desktop), string(Code), string(Research)}
	messageTypeWords = []string{
		string(TypeWorkRequest), string(TypeWorkStatus), string(TypeWorkResult), string(TypeError),
		string(TypeRegister), string(TypeRegisterAck), string(TypeHeartbeat), string(TypeDiscover),
		string(TypeCancel), string(TypePing), string(TypeDrain), string(TypeControlAck),
	}
)

func (o *object) uuid(key string) string {
	k, ok := o.stringMember(key, true)
	if !ok {
		return ""
	}
	u, ok := lowerUUID(o.t.decoded(k))
	if !ok {
		o.fail(key, "must be a UUID in 8-4-4-4-12 hex form, got %q", o.t.text(k))
		return ""
	}
	return string(u[:])
}

func (o *object) agentType(key string) AgentType {
	t := AgentType(o.word(key, agentTypeWords))
	if o.err == nil && !t.Valid() {
		o.fail(key, "must be one of orchestrator, infra, desktop, code, research, got %q", t)
	}
	return t
}

func (o *object) timestamp(key string) (t time.Time) {
	k, ok := o.stringMember(key, true)
	if !ok {
		return t
	}
	if t, ok := utcTimestamp(o.t.decoded(k)); ok {
		return t
	}
	t, err := ParseTimestamp(o.t.text(k))
	if err != nil {
		o.fail(key, "%v", err)
	}
	return t
}

// oneOf reads a string member that must be one of values.
func (o *object) oneOf(key string, required bool, values ...string) string {
	s, ok := o.text(key, required, values)
	if ok && !slices.Contains(values, s) {
		o.fail(key, "must be one of %s, got %q", strings.Join(values, ", "), s)
	}
	return s
}
