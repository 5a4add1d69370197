package faultproxy

import (
	"bufio"
	"errors"
	"net"
	"testing"
	"time"
)

// echo is an upstream that answers each line with the same line, and
// reports every line it received.
func echo(t *testing.T) (string, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					got <- sc.Text()
					if _, err := c.Write([]byte(sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), got
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func roundTrip(c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(wait))
	return r.ReadString('\n')
}

func start(t *testing.T, upstream string) *Proxy {
	t.Helper()
	p, err := Start("127.0.0.1:0", upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPass(t *testing.T) {
	up, got := echo(t)
	p := start(t, up)
	c, r := dial(t, p)
	if ans, err := roundTrip(c, r, "ping", 5*time.Second); err != nil || ans != "ping\n" {
		t.Fatalf("answer %q, %v", ans, err)
	}
	if line := <-got; line != "ping" {
		t.Fatalf("upstream got %q", line)
	}
}

func TestBlackholeDeliversButDropsReplies(t *testing.T) {
	up, got := echo(t)
	p := start(t, up)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, "warm", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	<-got
	p.SetMode(Blackhole)
	_, err := roundTrip(c, r, "lost-reply", 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read during blackhole: %v, want a timeout", err)
	}
	select {
	case line := <-got:
		if line != "lost-reply" {
			t.Fatalf("upstream got %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not delivered upstream")
	}
	p.SetMode(Pass)
	if ans, err := roundTrip(c, r, "back", 5*time.Second); err != nil || ans != "back\n" {
		t.Fatalf("after blackhole: %q, %v", ans, err)
	}
}

func TestCutClosesAndRefuses(t *testing.T) {
	up, _ := echo(t)
	p := start(t, up)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, "warm", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.SetMode(Cut)
	if _, err := roundTrip(c, r, "x", 5*time.Second); err == nil {
		t.Fatal("an open connection survived the cut")
	}
	c2, r2 := dial(t, p)
	if _, err := roundTrip(c2, r2, "y", 5*time.Second); err == nil {
		t.Fatal("a new connection was served during the cut")
	}
	p.SetMode(Pass)
	c3, r3 := dial(t, p)
	if ans, err := roundTrip(c3, r3, "z", 5*time.Second); err != nil || ans != "z\n" {
		t.Fatalf("after the cut: %q, %v", ans, err)
	}
}

func TestLatencyStillDelivers(t *testing.T) {
	up, _ := echo(t)
	p := start(t, up)
	p.SetLatency(50 * time.Millisecond)
	c, r := dial(t, p)
	if ans, err := roundTrip(c, r, "slow", 5*time.Second); err != nil || ans != "slow\n" {
		t.Fatalf("answer %q, %v", ans, err)
	}
}
