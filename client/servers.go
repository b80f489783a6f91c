package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A group of orchestrators answers on several URLs: any of them takes any
// request (a standby forwards what needs the leader). The client sends to the
// one that answered last, and moves on to the next when one cannot take the
// request: the connection was refused or could not be made (nothing was sent),
// or it answered 503 (nothing was done). A read also moves on when the
// connection breaks after it was sent. A write is never sent twice once it may
// have arrived: what it did is unknown, and the error says so.

// servers are the URLs to try, BaseURL first, each once.
func (c *Client) servers() []string {
	all := make([]string, 0, 1+len(c.Servers))
	for _, s := range append([]string{c.BaseURL}, c.Servers...) {
		s = strings.TrimSuffix(s, "/")
		if s != "" && !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	return all
}

// order is servers, starting with the one that answered last.
func (c *Client) order() []string {
	all := c.servers()
	i := int(c.last.Load()) % max(len(all), 1)
	return append(all[i:], all[:i]...)
}

// answered notes that server answered: it is tried first from then on.
func (c *Client) answered(server string) {
	if i := slices.Index(c.servers(), server); i >= 0 {
		c.last.Store(int32(i))
	}
}

// moveOn makes the server after server the first to try, when server failed.
func (c *Client) moveOn(server string) {
	all := c.servers()
	if i := slices.Index(all, server); i >= 0 && len(all) > 1 {
		c.last.Store(int32((i + 1) % len(all)))
	}
}

// send sends the request build makes for each server in turn until one takes
// it. A write goes on trying for Patience while those that answer say 503 (a
// takeover under way), waiting what their Retry-After asks (at most 5 s)
// between rounds; when none answers at all it fails at once. A read tries each
// once, and leaves waiting to its caller (a follow has its own).
func (c *Client) send(ctx context.Context, method string, build func(server string) (*http.Request, error)) (*http.Response, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	deadline := time.Now()
	if method != http.MethodGet {
		deadline = deadline.Add(c.Patience)
	}
	for {
		var lastErr error
		var lastResp *http.Response
		wait := 200 * time.Millisecond
		for _, server := range c.order() {
			req, err := build(server)
			if err != nil {
				return nil, err
			}
			resp, err := hc.Do(req)
			switch {
			case err == nil && resp.StatusCode != http.StatusServiceUnavailable:
				c.answered(server)
				return resp, nil
			case err == nil:
				if lastResp != nil {
					lastResp.Body.Close()
				}
				lastResp, lastErr = resp, nil
				wait = max(wait, retryAfter(resp))
				continue
			case ctx.Err() != nil:
				return nil, err
			case notSent(err) || method == http.MethodGet:
				lastErr = err
				continue
			}
			return nil, &MaybeDoneError{Server: server, Err: err}
		}
		// Only an orchestrator that answered 503 asked to be tried again; when
		// none answers at all, nothing runs there to wait for.
		if lastResp == nil || time.Now().Add(wait).After(deadline) {
			if lastResp != nil {
				return lastResp, nil
			}
			return nil, lastErr
		}
		if lastResp != nil {
			lastResp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// retryAfter is the wait a 503's Retry-After asks for, within 200 ms to 5 s.
func retryAfter(resp *http.Response) time.Duration {
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil {
		return 200 * time.Millisecond
	}
	return min(max(time.Duration(secs)*time.Second, 200*time.Millisecond), 5*time.Second)
}

// notSent reports whether err means the request never reached a server: no
// connection could be made.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// MaybeDoneError is a write whose connection broke after it was sent: the
// orchestrator may have carried it out. The client does not send it again,
// which could do it twice; look (chiffon tasks) before trying again.
type MaybeDoneError struct {
	Server string
	Err    error
}

func (e *MaybeDoneError) Error() string {
	return "the connection to " + e.Server + " broke after the request was sent, so it may have been carried out: " +
		e.Err.Error()
}

func (e *MaybeDoneError) Unwrap() error { return e.Err }
