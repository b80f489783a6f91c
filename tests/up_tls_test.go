package tests

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
)

// TestUpBeyondLoopbackServesHTTPSWithTheSiteCA runs `chiffon up --host 0.0.0.0`:
// the API and the dashboard serve HTTPS with a certificate of the site CA that
// names this host's addresses, up prints https lines with --api-ca-file for other
// hosts, plain HTTP gets no answer from the API, client commands in the data dir
// trust the site CA by themselves, and the dashboard's cookies are Secure.
func TestUpBeyondLoopbackServesHTTPSWithTheSiteCA(t *testing.T) {
	dir := t.TempDir()
	_, printed := startUp(t, dir, "--host", "0.0.0.0")
	secrets := filepath.Join(dir, "chiffon-data", "secrets")
	caFile, tokenFile := filepath.Join(secrets, "ca.pem"), filepath.Join(secrets, "api.token")

	// The line for other hosts: the API's URL over https, the token and the CA.
	var remote []string
	for _, l := range printed {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "chiffon" && f[1] == "agents" && slices.Contains(f, "--server") {
			remote = f[1:]
		}
	}
	server, ca := flagValue(remote, "--server"), flagValue(remote, "--api-ca-file")
	if !strings.HasPrefix(server, "https://") || ca != caFile || flagValue(remote, "--api-token-file") != tokenFile {
		t.Fatalf("up --host 0.0.0.0 printed no https line with --api-ca-file %s for other hosts:\n%s", caFile, strings.Join(printed, "\n"))
	}
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	// Other hosts need this host's name or address, not the wildcard or loopback.
	if ip := net.ParseIP(u.Hostname()); ip != nil && (ip.IsUnspecified() || ip.IsLoopback()) {
		t.Fatalf("up tells other hosts to use %s", server)
	}
	for _, l := range printed {
		if strings.Contains(l, "http://") {
			t.Errorf("up --host 0.0.0.0 printed a plain http URL: %q", l)
		}
	}

	// That line works, at the address it names: the certificate names it and
	// chains to the site CA.
	got := chiffon(t, nil, "", append(remote, "--json")...)
	var agents []struct{ ID, State string }
	if err := json.Unmarshal([]byte(got.stdout), &agents); got.code != 0 || err != nil || len(agents) != 4 {
		t.Fatalf("chiffon %s --json: exit %d, %v: %s%s", strings.Join(remote, " "), got.code, err, got.stdout, got.stderr)
	}
	// Client commands in the data dir find the https API and trust its CA with no flag.
	if got := chiffonIn(t, dir, nil, "", "agents", "--json"); got.code != 0 || !strings.Contains(got.stdout, "research-1") {
		t.Fatalf("agents in the data dir: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}
	// Without the site CA the certificate is refused.
	if got := chiffon(t, nil, "", "agents", "--server", server, "--api-token-file", tokenFile); got.code == 0 ||
		!strings.Contains(got.stderr, "certificate") {
		t.Fatalf("agents without the site CA: exit %d: %s%s", got.code, got.stdout, got.stderr)
	}

	// Plain HTTP to the API's port, token and all, gets no agent list.
	token, err := broker.ReadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+u.Host+"/api/v1/agents", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	plain := &http.Client{Timeout: 10 * time.Second}
	if resp, err := plain.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "research-1") {
			t.Fatalf("plain http://%s served the API: %d %s", u.Host, resp.StatusCode, body)
		}
	}

	// The dashboard over https: its sign-in and session cookies are Secure.
	pool, err := broker.LoadCertPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Timeout: 10 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(server + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if csrf == nil {
		t.Fatalf("no sign-in form at %s/login: %d", server, resp.StatusCode)
	}
	cookies := resp.Cookies()
	form := url.Values{"csrf": {string(csrf[1])}, "token": {token}}
	req, _ = http.NewRequest(http.MethodPost, server+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	signIn, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	signIn.Body.Close()
	session := false
	for _, c := range append(cookies, signIn.Cookies()...) {
		if !c.Secure {
			t.Errorf("dashboard cookie %s is not Secure", c.Name)
		}
		session = session || c.Name == "chiffon_session"
	}
	if !session {
		t.Fatalf("sign-in answered %d with no session cookie", signIn.StatusCode)
	}
}

// flagValue is the value after flag in args, or "".
func flagValue(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}
