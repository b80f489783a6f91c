package broker

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
)

// LooksLikeServerFile reports whether path is a nats-server config file, such as
// the broker.conf chiffon init writes: it parses in that format and sets a key
// only a server's config has, whatever the values.
func LooksLikeServerFile(path string) bool {
	m, err := conf.ParseFile(path)
	if err != nil {
		return false
	}
	for _, k := range []string{"listen", "port", "authorization", "accounts", "jetstream", "cluster", "server_name", "tls", "websocket", "operator"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// CheckServerFile reads path as `chiffon broker --config` does, with the files it
// names (TLS certificates), and describes what the broker would run: where it
// listens, how many users and whether it speaks TLS.
//
// In operator mode nats-server makes the resolver's dir as it reads the file;
// one that does not exist on this host yet (the broker's own, as on the host
// that ran chiffon init) is not made: the file is read with a dir of its own.
func CheckServerFile(path string) (string, error) {
	opts, note, err := processServerFile(path)
	if err != nil {
		return "", err
	}
	if opts.AccountResolver != nil {
		// A "full" resolver starts a goroutine as the file is read.
		opts.AccountResolver.Close()
	}
	users := fmt.Sprintf("%d users", len(opts.Nkeys)+len(opts.Users))
	if len(opts.TrustedOperators) > 0 {
		users = "operator mode (users are JWTs of its accounts)" + note
	}
	tls := "no TLS"
	if opts.TLSConfig != nil {
		tls = "TLS"
	}
	ws, err := describeWebsocket(opts)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("broker (nats-server config) on %s, %s, %s%s",
		net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), users, tls, ws), nil
}

// describeWebsocket describes the WebSocket listener of opts, if any, and refuses
// one nats-server would refuse at start, or one without TLS beyond loopback.
func describeWebsocket(opts *server.Options) (string, error) {
	w := opts.Websocket
	if w.Port == 0 {
		return "", nil
	}
	addr := net.JoinHostPort(w.Host, strconv.Itoa(w.Port))
	switch {
	case w.TLSConfig != nil:
		return ", WebSocket on " + addr + " with TLS", nil
	case !w.NoTLS:
		return "", fmt.Errorf("websocket on %s has no tls block (nats-server refuses it)", addr)
	case !IsLoopback(w.Host):
		return "", fmt.Errorf("websocket on %s has no TLS beyond loopback: every message, tokens included, would cross the network in the clear", addr)
	}
	return ", WebSocket on " + addr + " without TLS (loopback, behind a proxy)", nil
}

// processServerFile reads path as nats-server does. When the file names a
// resolver dir that does not exist it reads the file with the dir replaced by a
// temporary one, and the note says so.
func processServerFile(path string) (*server.Options, string, error) {
	m, err := conf.ParseFile(path)
	if err != nil {
		return nil, "", err
	}
	res, _ := m["resolver"].(map[string]any)
	dir, _ := res["dir"].(string)
	if dir == "" {
		opts, err := server.ProcessConfigFile(path)
		return opts, "", err
	}
	if _, err := os.Stat(dir); err == nil {
		opts, err := server.ProcessConfigFile(path)
		return opts, "", err
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	tmp, err := os.MkdirTemp("", "chiffon-check-resolver-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(tmp)
	replaced := strings.Replace(string(text), "dir: "+quote(dir), "dir: "+quote(tmp), 1)
	if replaced == string(text) {
		// Not written by WriteServerFile: read it as it is.
		opts, err := server.ProcessConfigFile(path)
		return opts, "", err
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(replaced); err != nil {
		// As server.ProcessConfigFile: warnings alone are no error.
		if w, ok := err.(interface{ Errors() []error }); !ok || len(w.Errors()) > 0 {
			return nil, "", err
		}
	}
	return opts, fmt.Sprintf("; resolver dir %s made at the broker's first start", dir), nil
}
