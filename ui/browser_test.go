package ui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser tests of this package drive a headless Chromium against the
// dashboard over the fake API, as tests/dashboard_*_test.go do against
// `chiffon up`: without a Chromium on the machine they are skipped, unless
// CHIFFON_BROWSER_TESTS=1 makes that a failure.

// browser is a headless Chromium and where its screenshots go.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

// newBrowser starts a headless Chromium, which the test's end stops: call
// it after the server starts, so that it stops first and ends its streams.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	chrome := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		if os.Getenv("CHIFFON_BROWSER_TESTS") == "1" {
			t.Fatal("no Chromium on this machine, and CHIFFON_BROWSER_TESTS=1 requires the browser tests")
		}
		t.Skip("no Chromium on this machine (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", chrome, err)
	}
	shots, err := os.MkdirTemp("", "chiffon-ui-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots of %s in %s", t.Name(), shots)
	return &browser{t: t, ctx: bctx, shots: shots}
}

// do runs browser actions with a deadline.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + what)
		b.t.Fatalf("%s: %v", what, err)
	}
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is true in the page, asking every
// 50 ms; an expression that throws, or a page between two loads, counts as
// false.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	check := "(function () { try { return !!(" + expr + "); } catch (e) { return false; } })()"
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](check))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.shot("failed-" + what)
			text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
			b.t.Fatalf("%s: not within 20s (last error %v); the page says:\n%s", what, err, text)
		}
		time.Sleep(50 * time.Millisecond) // the page's own pace: what it shows is polled
	}
}

// shot saves a screenshot of the whole page as name.png among the test's.
func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 makes a PNG
	if err == nil {
		err = os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// docShot saves a screenshot as shot does, and into $CHIFFON_SCREENSHOTS when
// it is set (to update the images of docs/images:
// CHIFFON_SCREENSHOTS=$PWD/docs/images go test ./ui/ -run Browser).
func (b *browser) docShot(name string) {
	b.t.Helper()
	b.shot(name)
	dir := os.Getenv("CHIFFON_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := os.ReadFile(filepath.Join(b.shots, name+".png"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Errorf("screenshot %s for the docs: %v", name, err)
	}
}

// signIn signs in at the dashboard at base with token.
func (b *browser) signIn(base, token string) {
	b.t.Helper()
	b.do("sign in", chromedp.Navigate(base+"login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS(`form[action$="login"] button`)))
	b.waitJS("the home page", `document.readyState === "complete" && location.pathname === "/"`)
}
