package broker

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// Header names carried on every Chiffon message.
const (
	// HeaderAuthorization carries "Bearer <token>".
	HeaderAuthorization = "Authorization"
	// HeaderAgentID carries the agent instance id of the sender or addressee.
	HeaderAgentID = "Chiffon-Agent-Id"
	// HeaderInstance carries the id of the agent process that sent a message, new
	// at each start: it tells a restarted agent from a second live one. An
	// orchestrator of a group (ha.enabled) sends its own on every message to an
	// agent, so that a message tells which of them sent it.
	HeaderInstance = "Chiffon-Instance"
)

// TokenLen is the length of a generated token.
const TokenLen = 32

const tokenAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// NewToken returns a random 32-character alphanumeric token from crypto/rand.
func NewToken() string { return randomString(TokenLen) }

// randomString returns n characters of tokenAlphabet from crypto/rand.
func randomString(n int) string {
	// 62 letters: reject bytes >= 248 so every letter is equally likely.
	out := make([]byte, 0, n)
	var b [64]byte
	for len(out) < n {
		if _, err := rand.Read(b[:]); err != nil {
			panic("broker: crypto/rand failed: " + err.Error())
		}
		for _, c := range b {
			if c < 248 && len(out) < n {
				out = append(out, tokenAlphabet[c%62])
			}
		}
	}
	return string(out)
}

// NonceLen is the length of a nonce: 22 characters of 62, about 131 bits.
const NonceLen = 22

// NewNonce returns a random NonceLen-character alphanumeric string from crypto/rand,
// such as the last token of a subject only its addressee may learn.
func NewNonce() string { return randomString(NonceLen) }

// ReadTokenFile reads a token from a file, trimming surrounding whitespace. The error
// names the file, never its content.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// WriteTokenFile writes a token to path with mode 0600, replacing any earlier file.
func WriteTokenFile(path, token string) error {
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	// WriteFile keeps the mode of an existing file; make sure it is 0600.
	return os.Chmod(path, 0o600)
}

// SetAuth sets the bearer token and agent id headers on msg.
func SetAuth(msg *nats.Msg, token, agentID string) {
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(HeaderAuthorization, "Bearer "+token)
	if agentID != "" {
		msg.Header.Set(HeaderAgentID, agentID)
	}
}

// AuthHeader returns the headers SetAuth sets, for a sender to build once and put on
// every message it sends: nats.Conn only reads a message's header, so messages may
// share one as long as nobody changes it.
func AuthHeader(token, agentID string) nats.Header {
	var m nats.Msg
	SetAuth(&m, token, agentID)
	return m.Header
}

// ErrNoToken and ErrBadToken describe why CheckAuth refused a message.
var (
	ErrNoToken  = errors.New("missing")
	ErrBadToken = errors.New("invalid")
)

// CheckAuth compares msg's bearer token with want in constant time. It returns
// ErrNoToken when the header is absent or malformed and ErrBadToken when the token
// differs; neither error holds the token.
func CheckAuth(msg *nats.Msg, want string) error {
	got, ok := strings.CutPrefix(msg.Header.Get(HeaderAuthorization), "Bearer ")
	if !ok || got == "" {
		return ErrNoToken
	}
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return ErrBadToken
	}
	return nil
}

// InstanceOf returns the Chiffon-Instance header of msg.
func InstanceOf(msg *nats.Msg) string { return msg.Header.Get(HeaderInstance) }

// AgentIDOf returns the Chiffon-Agent-Id header of msg.
func AgentIDOf(msg *nats.Msg) string { return msg.Header.Get(HeaderAgentID) }
