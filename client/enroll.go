package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// Enroll asks for a one-time join code for a new agent host.
func (c *Client) Enroll(ctx context.Context, req api.EnrollRequest) (*api.EnrollCode, error) {
	var code api.EnrollCode
	return &code, c.getJSON(ctx, http.MethodPost, "/api/v1/enrollments", req, &code)
}

// Enrollments lists the enrollments, by agent id.
func (c *Client) Enrollments(ctx context.Context) ([]api.Enrollment, error) {
	var list []api.Enrollment
	return list, c.getJSON(ctx, http.MethodGet, "/api/v1/enrollments", nil, &list)
}

// RevokeAgent revokes an enrolled agent: its NATS key at the broker, its
// tokens, and the orchestrator's knowledge of it.
func (c *Client) RevokeAgent(ctx context.Context, id string) (*api.Enrollment, error) {
	var en api.Enrollment
	return &en, c.getJSON(ctx, http.MethodPost, "/api/v1/agents/"+url.PathEscape(id)+"/revoke", nil, &en)
}

// ErrFingerprint is Join's refusal of an orchestrator whose certificate chain
// does not hold the CA it was told of: nothing was sent to it.
var ErrFingerprint = errors.New("the orchestrator's certificate is not from the CA of that fingerprint: nothing was sent")

// Join sends a host's join to the orchestrator at baseURL (https://), which it
// trusts only if its certificate chain holds a CA of fingerprint ca (the
// SHA-256 of its certificate) that signed the orchestrator's certificate for
// that host: otherwise the TLS handshake fails and the code is never sent
// (ErrFingerprint). No API token is sent: the code is the credential.
func Join(ctx context.Context, baseURL string, ca []byte, req api.JoinRequest) (*api.JoinGrant, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--orchestrator %q: want the API's https:// URL: the code must not cross the network in the clear", baseURL)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: pinnedTLS(u.Hostname(), ca), ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+"/api/v1/join", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		if errors.Is(err, ErrFingerprint) {
			return nil, ErrFingerprint
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, readAPIError(resp)
	}
	var g api.JoinGrant
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&g); err != nil {
		return nil, fmt.Errorf("read the join's answer: %w", err)
	}
	return &g, nil
}

// pinnedTLS trusts only a chain that holds a CA certificate of fingerprint ca
// which signed the server's certificate for host.
func pinnedTLS(host string, ca []byte) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true, // checked below, against the pinned CA alone
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrFingerprint
			}
			for _, c := range cs.PeerCertificates {
				sum := sha256.Sum256(c.Raw)
				if subtle.ConstantTimeCompare(sum[:], ca) != 1 || !c.IsCA {
					continue
				}
				roots := x509.NewCertPool()
				roots.AddCert(c)
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots})
				if err != nil {
					return fmt.Errorf("%w (%v)", ErrFingerprint, err)
				}
				return nil
			}
			return ErrFingerprint
		}}
}
