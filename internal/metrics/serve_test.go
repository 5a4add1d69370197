package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/clock"
)

// TestSlowClientCutOff: a client that never finishes its request is
// disconnected (so it holds nothing of the daemon), and the extra handler
// (the dashboard) serves the paths the metrics do not.
func TestSlowClientCutOff(t *testing.T) {
	defer func(d time.Duration) { headerTimeout = d }(headerTimeout)
	headerTimeout = 200 * time.Millisecond
	m := New(clock.Real{}, "sqlite")
	ln, err := m.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	extra := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "dashboard") })
	go func() { done <- m.ServeWith(ctx, ln, extra) }()
	defer func() { cancel(); <-done }()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	// The server closes the connection: the read ends (EOF or a reset),
	// long before this test's own bound.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadAll(conn); err != nil {
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a client that never ends its request was not cut off")
		}
	}
	for path, want := range map[string]string{"/": "dashboard", "/anything": "dashboard"} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("%s: %q, want %q", path, body, want)
		}
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/metrics beside the dashboard: %d", resp.StatusCode)
	}
}
