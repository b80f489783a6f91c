package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Cookie names: the session, and the login form's double-submit token.
const (
	sessionCookie = "chiffon_session"
	loginCookie   = "chiffon_login"
)

// session is one sign-in: the API token it acts with (kept on the server only,
// never in a cookie, a page or a URL), the token's role, and the CSRF token every
// form of the session carries.
type session struct {
	token, role, csrf string
	expires           time.Time
}

// operator reports whether the session may submit, cancel, approve and reject.
func (s *session) operator() bool { return s.role == "operator" }

// sessions are the signed-in sessions, by id, in memory: a restart signs
// everyone out.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl}
}

// create starts a session for token and returns its id.
func (s *sessions) create(token, role string) (string, *session) {
	id := randomToken()
	sess := &session{token: token, role: role, csrf: randomToken(), expires: time.Now().Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, v := range s.m { // sign-ins are rare: drop the expired ones here
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	s.m[id] = sess
	return id, sess
}

// get returns the live session id names, or nil.
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.m[id]
	if sess != nil && time.Now().After(sess.expires) {
		delete(s.m, id)
		return nil
	}
	return sess
}

func (s *sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameToken compares two secrets in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// cookie is a cookie of the dashboard's, for a response to r: HttpOnly,
// SameSite=Strict, on its path, and Secure when the options say so or r came
// over TLS, so that a browser never sends it back over plain HTTP.
func (u *UI) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: u.path, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: u.secure || r.TLS != nil}
}

// signedIn runs h with the request's session, or sends the browser to the login
// page. A POST must carry the session's CSRF token in its form.
func (u *UI) signedIn(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sess *session
		if c, err := r.Cookie(sessionCookie); err == nil {
			sess = u.sessions.get(c.Value)
		}
		if sess == nil {
			if r.Method != http.MethodGet {
				u.fail(w, r, nil, http.StatusUnauthorized, "Sign in first.")
				return
			}
			http.Redirect(w, r, u.path+"login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !sameToken(r.PostFormValue("csrf"), sess.csrf) {
			u.fail(w, r, sess, http.StatusForbidden, "This form is stale or did not come from this dashboard (no valid CSRF token). Reload the page and try again.")
			return
		}
		h(w, r, sess)
	}
}

// loginPage shows the sign-in form, with a fresh double-submit token in a
// cookie and in the form.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	u.showLogin(w, r, http.StatusOK, "")
}

func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, problem string) {
	csrf := randomToken()
	http.SetCookie(w, u.cookie(r, loginCookie, csrf, 600))
	u.render(w, status, "login", nil, map[string]any{"CSRF": csrf, "Problem": problem})
}

// login signs in with an API token.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), c.Value) {
		u.showLogin(w, r, http.StatusForbidden, "The sign-in form expired or did not come from this dashboard. Try again.")
		return
	}
	token := r.PostFormValue("token")
	role, ok := u.auth(token)
	if !ok {
		u.log.Warn("ui: sign-in refused: unknown token", "remote", r.RemoteAddr)
		u.showLogin(w, r, http.StatusUnauthorized, "That token is not one of this orchestrator's.")
		return
	}
	id, _ := u.sessions.create(token, role)
	http.SetCookie(w, u.cookie(r, loginCookie, "", -1))
	http.SetCookie(w, u.cookie(r, sessionCookie, id, int(u.sessions.ttl/time.Second)))
	http.Redirect(w, r, u.path, http.StatusSeeOther)
}

// logout ends the session.
func (u *UI) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		u.sessions.delete(c.Value)
	}
	http.SetCookie(w, u.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, u.path+"login", http.StatusSeeOther)
}
