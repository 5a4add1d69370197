package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/anarchon/anarchon/internal/testserver"
)

// dirDashboard holds the dashboard's scripts: they run on SQLite only (see
// docs/operating.md#tests): the page and the API render what the CLI's
// builders render, from any store, and SQLite needs no server beside
// Chromium.
const dirDashboard = "dashboard"

// chromiumInstall says how to get the browser the dashboard's test drives.
const chromiumInstall = "apt-get install -y chromium"

// chromiumPath is the headless browser, "" when missing.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// condChromium is [chromium]: true when Chromium is installed. Missing, it
// fails the script under ANARCHON_TEST_REQUIRE=all (or chromium), as a
// missing server does, saying how to install it.
func condChromium() (bool, error) {
	if chromiumPath() != "" {
		return true, nil
	}
	if (testserver.Server{Name: "chromium"}).Required() {
		return false, fmt.Errorf("chromium is not installed; install it with:\n    %s\n(ANARCHON_TEST_REQUIRE=%s requires it)",
			chromiumInstall, os.Getenv("ANARCHON_TEST_REQUIRE"))
	}
	return false, nil
}

var dashboardAddr = regexp.MustCompile(`"msg":"serving the dashboard on / and its API on /api/v1/","addr":"([^"]+)"`)

// dashboardURL is the dashboard's base URL from a daemon's log.
func dashboardURL(ts *testscript.TestScript, log string) string {
	var m []string
	if !poll(20*time.Second, func() bool {
		data, _ := os.ReadFile(ts.MkAbs(log))
		m = dashboardAddr.FindStringSubmatch(string(data))
		return m != nil
	}) {
		ts.Fatalf("%s does not say where the dashboard is served%s", log, daemonLogs(ts))
	}
	return "http://" + m[1]
}

// httpDo sends one request and returns the status and body.
func httpDo(method, url, token string) (int, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// api [-post] [-token T] log path code [substring]: the dashboard of the
// daemon that wrote log answers path with code and a body holding
// substring (a GET is tried until it does, within 20s: the dashboard
// answers from its cache); the body goes to stdout.
func cmdAPI(ts *testscript.TestScript, neg bool, args []string) {
	method, token := http.MethodGet, ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-post":
			method, args = http.MethodPost, args[1:]
		case "-token":
			if len(args) < 2 {
				ts.Fatalf("-token needs a value")
			}
			token, args = args[1], args[2:]
		default:
			ts.Fatalf("unknown flag %s", args[0])
		}
	}
	if neg || len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: api [-post] [-token T] log path code [substring]")
	}
	url := dashboardURL(ts, args[0]) + args[1]
	var (
		code int
		body string
		err  error
	)
	// A GET is answered from the dashboard's cache: await the answer.
	poll(20*time.Second, func() bool {
		code, body, err = httpDo(method, url, token)
		return method == http.MethodPost || err == nil && fmt.Sprint(code) == args[2] && (len(args) == 3 || strings.Contains(body, args[3]))
	})
	ts.Check(err)
	ts.Stdout().Write([]byte(body)) //nolint:errcheck // the script's stdout
	if fmt.Sprint(code) != args[2] {
		ts.Fatalf("%s %s: %d %s, want %s", method, args[1], code, body, args[2])
	}
	if len(args) == 4 && !strings.Contains(body, args[3]) {
		ts.Fatalf("%s %s: %s, want it to hold %s", method, args[1], body, args[3])
	}
}

// apimatch log path anarchond-args...: the dashboard's answer to path (a
// JSON array) holds the objects `anarchond args` prints, one per line, in
// order. The two read the store at different moments, the dashboard from
// its cache: they are compared until they agree (within 20s).
func cmdAPIMatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: apimatch log path anarchond-args...")
	}
	url := dashboardURL(ts, args[0]) + args[1]
	var api, cli []any
	var last error
	ok := poll(20*time.Second, func() bool {
		api, cli, last = nil, nil, nil
		code, body, err := httpDo(http.MethodGet, url, "")
		if err != nil {
			last = err
			return false
		}
		if code != http.StatusOK {
			last = fmt.Errorf("%s: %d %s", args[1], code, body)
			return false
		}
		if last = json.Unmarshal([]byte(body), &api); last != nil {
			return false
		}
		cmd := exec.Command(filepath.Join(binDir, "anarchond"), args[2:]...)
		cmd.Dir = ts.MkAbs(".")
		// The script's settings of the store, as its daemons have them.
		for _, k := range []string{"PATH", "HOME", "ANARCHON_BACKEND_TYPE", "ANARCHON_BACKEND_SQLITE_PATH"} {
			cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
		}
		out, err := cmd.Output()
		if err != nil {
			last = fmt.Errorf("anarchond %s: %w", strings.Join(args[2:], " "), err)
			return false
		}
		for line := range strings.Lines(string(out)) {
			var v any
			if last = json.Unmarshal([]byte(line), &v); last != nil {
				return false
			}
			cli = append(cli, v)
		}
		return len(api) > 0 && reflect.DeepEqual(api, cli)
	})
	if !ok {
		ts.Fatalf("%s never answered what anarchond %s prints (%v):\napi: %v\ncli: %v", args[1], strings.Join(args[2:], " "), last, api, cli)
	}
	ts.Logf("%s: %d objects, as anarchond %s", args[1], len(api), strings.Join(args[2:], " "))
}

// browser log dom.html shot.png: open the dashboard of the daemon that
// wrote log in headless Chromium; write the DOM it built and a
// screenshot. ANARCHON_TEST_SCREENSHOT, when set, is a path the screenshot
// is copied to (docs/img/dashboard.png is made so).
func cmdBrowser(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: browser log dom.html shot.png")
	}
	bin := chromiumPath()
	if bin == "" {
		ts.Fatalf("chromium is not installed; install it with: %s", chromiumInstall)
	}
	url := dashboardURL(ts, args[0]) + "/"
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir=" + ts.MkAbs("chromium-profile"), "--window-size=1400,1000"}
	run := func(extra ...string) []byte {
		cmd := exec.Command(bin, append(append(base, extra...), url)...)
		cmd.Env = append(os.Environ(), "HOME="+ts.MkAbs("."))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		timer := time.AfterFunc(60*time.Second, func() {
			if cmd.Process != nil {
				cmd.Process.Kill() //nolint:errcheck // best effort
			}
		})
		defer timer.Stop()
		out, err := cmd.Output()
		if err != nil {
			ts.Fatalf("chromium %s: %v\n%s", strings.Join(extra, " "), err, stderr.String())
		}
		return out
	}
	dom := run("--dump-dom")
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), dom, 0o644))
	shot := ts.MkAbs(args[2])
	run("--screenshot=" + shot)
	png, err := os.ReadFile(shot)
	ts.Check(err)
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		ts.Fatalf("%s is not a PNG", args[2])
	}
	if dst := os.Getenv("ANARCHON_TEST_SCREENSHOT"); dst != "" {
		ts.Check(os.WriteFile(dst, png, 0o644))
	}
}

// clusterpage log dom.html name...: the page lists the instances the
// dashboard's /api/v1/cluster lists, and those hold every name; on a store
// that keeps no instance records the page and the API say so.
func cmdClusterPage(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: clusterpage log dom.html name...")
	}
	page := ts.ReadFile(args[1])
	code, body, err := httpDo(http.MethodGet, dashboardURL(ts, args[0])+"/api/v1/cluster", "")
	ts.Check(err)
	if code == http.StatusNotImplemented {
		if !strings.Contains(body, "this store keeps no instance records") || !strings.Contains(page, "this store keeps no instance records") {
			ts.Fatalf("no instance records: the API (%s) and the page must say so", body)
		}
		ts.Logf("the store keeps no instance records; the page says so")
		return
	}
	var insts []struct {
		Instance string `json:"instance"`
	}
	if code != http.StatusOK {
		ts.Fatalf("/api/v1/cluster: %d %s", code, body)
	}
	ts.Check(json.Unmarshal([]byte(body), &insts))
	var errs []error
	names := map[string]bool{}
	for _, in := range insts {
		names[in.Instance] = true
		if !strings.Contains(page, fmt.Sprintf(`data-instance="%s"`, in.Instance)) {
			errs = append(errs, fmt.Errorf("the page lacks instance %s", in.Instance))
		}
	}
	for _, want := range args[2:] {
		if !names[want] {
			errs = append(errs, fmt.Errorf("/api/v1/cluster lacks %s: %s", want, body))
		}
	}
	if err := errors.Join(errs...); err != nil {
		ts.Fatalf("%v", err)
	}
}
