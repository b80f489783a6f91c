package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	"github.com/nats-io/nats.go"
)

// Signer signs and checks the answers to forwarded API requests (forward.go)
// with HMAC-SHA256 under a key every orchestrator of a group derives from the
// operator's API token. The signature covers the answer's subject, which ends
// in the request's nonce, so an answer to one request cannot be replayed as the
// answer to another.
type Signer struct{ key []byte }

// fwdKeyLabel keeps the derived key apart from any other use of the token.
const fwdKeyLabel = "chiffon forwarded answer v1"

// NewSigner is the group's signer, from the operator's API token
// (api_token_file's), which every orchestrator of the group holds.
func NewSigner(apiToken []byte) Signer {
	m := hmac.New(sha256.New, apiToken)
	m.Write([]byte(fwdKeyLabel))
	return Signer{key: m.Sum(nil)}
}

// mac is the signature of msg: its subject, status, passed-on headers and body,
// each preceded by its length so that no two answers sign alike.
func (s Signer) mac(msg *nats.Msg) []byte {
	m := hmac.New(sha256.New, s.key)
	field := func(v string) {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(v))))
		m.Write([]byte(v))
	}
	field(msg.Subject)
	field(msg.Header.Get(hdrFwdStatus))
	for _, k := range forwardedHeaders {
		field(msg.Header.Get(k))
	}
	field(string(msg.Data))
	return m.Sum(nil)
}

// Sign sets msg's signature header; msg's subject, headers and body are final.
func (s Signer) Sign(msg *nats.Msg) {
	msg.Header.Set(hdrFwdSig, base64.RawStdEncoding.EncodeToString(s.mac(msg)))
}

// Verify reports whether msg bears its signature.
func (s Signer) Verify(msg *nats.Msg) bool {
	got, err := base64.RawStdEncoding.DecodeString(msg.Header.Get(hdrFwdSig))
	return err == nil && hmac.Equal(got, s.mac(msg))
}
