package ui

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	operatorToken = "operator-token-0123456789abcdef"
	viewerToken   = "viewer-token-0123456789abcdef01"
)

// apiLog records the API's calls: the token, the method and path, and the
// body of each.
type apiLog struct {
	mu     sync.Mutex
	tokens []string
	calls  []string
	bodies []string
}

func (l *apiLog) add(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b)) // for the fake to read in turn
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens = append(l.tokens, r.Header.Get("Authorization"))
	l.calls = append(l.calls, r.Method+" "+r.URL.Path)
	l.bodies = append(l.bodies, string(b))
}

// body is the body of the latest call, a method and a path, or "".
func (l *apiLog) body(call string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.calls) - 1; i >= 0; i-- {
		if l.calls[i] == call {
			return l.bodies[i]
		}
	}
	return ""
}

// lastToken is the Authorization of the latest call.
func (l *apiLog) lastToken() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.tokens) == 0 {
		return ""
	}
	return l.tokens[len(l.tokens)-1]
}

// called reports whether the API got call, a method and a path.
func (l *apiLog) called(call string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.calls, call)
}

// fakeAPI answers the few API calls the pages make (fleetAPI those of batches,
// schedules and approvals), and records them.
func fakeAPI(t *testing.T, seen *apiLog) http.Handler {
	fleet := fleetAPI()
	m := http.NewServeMux()
	m.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		seen.add(r)
		w.Header().Set("Content-Type", "application/json")
		if _, pattern := fleet.Handler(r); pattern != "" {
			fleet.ServeHTTP(w, r) // which sets the path's values
			return
		}
		switch {
		case r.URL.Path == "/api/v1/agents":
			_ = json.NewEncoder(w).Encode([]api.AgentInfo{{ID: "code-1", Type: "code", State: "online", Breaker: "closed", WorkTypes: []string{"echo", "form"},
				GPUs: fakeGPUs}})
		case r.URL.Path == "/api/v1/tasks" && r.Method == http.MethodGet:
			if st := r.URL.Query().Get("state"); st == "" || st == string(task.StateAwaitingApproval) {
				_ = json.NewEncoder(w).Encode([]*task.Task{fakeApprovalTasks()[fakeWaitingTaskID]})
				return
			}
			_, _ = io.WriteString(w, "[]")
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such task"}}`)
		}
	})
	return m
}

// newServer serves the dashboard at path, over a fake API.
func newServer(t *testing.T, path string) (*httptest.Server, *apiLog) {
	t.Helper()
	seen := &apiLog{}
	return serveDashboard(t, path, fakeAPI(t, seen)), seen
}

// serveDashboard serves the dashboard at path, over the API apiHandler.
func serveDashboard(t *testing.T, path string, apiHandler http.Handler) *httptest.Server {
	t.Helper()
	auth := func(tok string) (string, bool) {
		switch tok {
		case operatorToken:
			return "operator", true
		case viewerToken:
			return "viewer", true
		}
		return "", false
	}
	u, err := New(Options{API: apiHandler, Authenticate: auth, Path: path, SessionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h := http.Handler(u)
	if path != "/" {
		h = http.StripPrefix(strings.TrimSuffix(path, "/"), u)
	}
	mux.Handle(path, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// browserClient keeps cookies and does not follow redirects.
func browserClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t *testing.T, c *http.Client, url string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(url, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signIn signs c in with token at the dashboard at base and returns the
// session's CSRF token.
func signIn(t *testing.T, c *http.Client, base, token string) string {
	t.Helper()
	_, page := get(t, c, base+"login")
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the sign-in page:\n%s", page)
	}
	resp, _ := post(t, c, base+"login", url.Values{"csrf": {m[1]}, "token": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != strings.TrimPrefix(base, "http://"+resp.Request.URL.Host) {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, home := get(t, c, base)
	m = csrfField.FindStringSubmatch(home)
	if m == nil {
		t.Fatalf("no CSRF token on the home page:\n%s", home)
	}
	return m[1]
}

// TestSessionCookieKeepsTheTokenOnTheServer: the session cookie is HttpOnly,
// SameSite=Strict and on the dashboard's path, holds no token, and the API is
// called with the token the session signed in with; signing out ends it.
func TestSessionCookieKeepsTheTokenOnTheServer(t *testing.T) {
	srv, seen := newServer(t, "/ui/")
	base := srv.URL + "/ui/"
	c := browserClient(t)
	if resp, _ := get(t, c, base); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("signed out: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	csrf := signIn(t, c, base, operatorToken)
	u, _ := url.Parse(base)
	var session *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == sessionCookie {
			session = ck
		}
		if strings.Contains(ck.Value, operatorToken) {
			t.Errorf("cookie %s holds the token", ck.Name)
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	resp, _ := get(t, browserClient(t), base+"login") // the Set-Cookie of a fresh client
	for _, raw := range resp.Header.Values("Set-Cookie") {
		if !strings.Contains(raw, "HttpOnly") || !strings.Contains(raw, "SameSite=Strict") || !strings.Contains(raw, "Path=/ui/") {
			t.Errorf("cookie %q: want HttpOnly, SameSite=Strict, Path=/ui/", raw)
		}
	}
	if got := seen.lastToken(); got != "Bearer "+operatorToken {
		t.Fatalf("the API was last called with %q", got)
	}
	if resp, _ := post(t, c, base+"logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, base); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after sign-out the home page answers %d", resp.StatusCode)
	}
}

// TestFormsNeedTheirCSRFToken: the sign-in form without its double-submit
// token, and a signed-in form without the session's, are refused with 403.
func TestFormsNeedTheirCSRFToken(t *testing.T) {
	srv, _ := newServer(t, "/")
	base := srv.URL + "/"
	c := browserClient(t)
	if resp, body := post(t, c, base+"login", url.Values{"token": {operatorToken}}); resp.StatusCode != http.StatusForbidden || strings.Contains(body, operatorToken) {
		t.Fatalf("sign-in without its token: %d", resp.StatusCode)
	}
	signIn(t, c, base, operatorToken)
	for _, form := range []url.Values{{"target": {"code/echo"}}, {"target": {"code/echo"}, "csrf": {"forged"}}} {
		if resp, _ := post(t, c, base+"submit", form); resp.StatusCode != http.StatusForbidden {
			t.Errorf("submit with %v: %d, want 403", form, resp.StatusCode)
		}
	}
}

// TestWrongTokenIsRefused: an unknown token stays on the sign-in page with 401,
// and the page does not repeat it.
func TestWrongTokenIsRefused(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	_, page := get(t, c, srv.URL+"/login")
	m := csrfField.FindStringSubmatch(page)
	resp, body := post(t, c, srv.URL+"/login", url.Values{"csrf": {m[1]}, "token": {"guessed-token"}})
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "guessed-token") {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
}

// TestViewerGetsNoSubmitForm: a viewer's session is refused the submit form,
// and a submit it posts anyway is refused by the API's role check.
func TestViewerGetsNoSubmitForm(t *testing.T) {
	srv, _ := newServer(t, "/")
	c := browserClient(t)
	csrf := signIn(t, c, srv.URL+"/", viewerToken)
	if resp, _ := get(t, c, srv.URL+"/submit"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's submit form: %d, want 403", resp.StatusCode)
	}
	if resp, _ := post(t, c, srv.URL+"/submit", url.Values{"csrf": {csrf}, "target": {"code/echo"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a viewer's submit: %d, want 403", resp.StatusCode)
	}
}

// TestRelayLeavesOutOutputBeforeTheTail: a status whose output ends before the
// page's tail is relayed without it; one that reaches into the tail keeps it.
func TestRelayLeavesOutOutputBeforeTheTail(t *testing.T) {
	event := func(offset int64, out string) []string {
		b, _ := json.Marshal(map[string]any{"seq": 1, "type": "status", "state": "running", "output_offset": offset,
			"status": map[string]any{"task_id": "t", "status": "running", "progress_percent": 10, "step": map[string]any{"number": 1, "name": "s", "output": out}}})
		return []string{"id: 1", "event: status", "data: " + string(b)}
	}
	if got := relayBlock(event(0, "old output"), 100); strings.Contains(got, "old output") || !strings.Contains(got, `"progress_percent":10`) {
		t.Errorf("before the tail: %s", got)
	}
	if got := relayBlock(event(95, "new output"), 100); !strings.Contains(got, "new output") {
		t.Errorf("into the tail: %s", got)
	}
}

// TestTailStartsOnACharacter: the output tail drops the bytes of a character
// its cut splits, and keeps the last bytes whole.
func TestTailStartsOnACharacter(t *testing.T) {
	rec := &recorder{header: http.Header{}, tail: 6}
	_, _ = rec.Write([]byte("ab€cd€")) // € is 3 bytes: the last 6 begin with the first one's last byte
	got := string(rec.tailBytes())
	if !utf8.ValidString(got) || got != "cd€" || rec.total != 10 {
		t.Fatalf("tail %q of %d bytes", got, rec.total)
	}
}

// TestCookiesAreSecureOverTLS: served over TLS, the dashboard's cookies are
// Secure even when Options.Secure is not set, so a browser never sends the
// session id back over plain HTTP; over plain HTTP they follow Options.Secure.
func TestCookiesAreSecureOverTLS(t *testing.T) {
	auth := func(tok string) (string, bool) { return "operator", tok == operatorToken }
	for _, tc := range []struct {
		name         string
		tls, secure  bool
		secureCookie bool
	}{
		{"TLS", true, false, true},
		{"plain HTTP", false, false, false},
		{"plain HTTP behind a TLS proxy", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := New(Options{API: fakeAPI(t, &apiLog{}), Authenticate: auth, Secure: tc.secure})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(u)
			if tc.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			c := srv.Client()
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			loginPage, page := get(t, c, srv.URL+"/login")
			m := csrfField.FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("no CSRF token on the sign-in page:\n%s", page)
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login",
				strings.NewReader(url.Values{"csrf": {m[1]}, "token": {operatorToken}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for _, ck := range loginPage.Cookies() {
				req.AddCookie(ck)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var session *http.Cookie
			for _, ck := range append(loginPage.Cookies(), resp.Cookies()...) {
				if ck.Secure != tc.secureCookie {
					t.Errorf("cookie %s: Secure %v, want %v", ck.Name, ck.Secure, tc.secureCookie)
				}
				if ck.Name == sessionCookie {
					session = ck
				}
			}
			if session == nil {
				t.Fatalf("sign-in %d set no session cookie", resp.StatusCode)
			}
		})
	}
}
