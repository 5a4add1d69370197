// Package faultproxy is a TCP proxy that tests and the fault-injection
// harness put between anarchond and its store to cut, blackhole and delay
// the connection.
//
//   - Pass forwards both ways.
//   - Cut closes every connection and refuses new ones (a dead store or a
//     reset network).
//   - Blackhole keeps connections open and delivers requests to the store,
//     but drops every reply: the request landed, the answer was lost.
//   - Latency delays every chunk in both directions.
package faultproxy

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does with traffic.
type Mode int

// Modes.
const (
	Pass Mode = iota
	Cut
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Cut:
		return "cut"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Proxy forwards one listening address to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	mode    Mode
	latency time.Duration
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// Start listens on listen (e.g. "127.0.0.1:0") and forwards to upstream.
func Start(listen, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", listen, err)
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetMode switches the proxy; Cut closes every open connection at once.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	if m == Cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetLatency delays every chunk forwarded in either direction by d.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

func (p *Proxy) state() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.latency
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		if m, _ := p.state(); m == Cut {
			down.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(down)
	}
}

func (p *Proxy) serve(down net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		down.Close()
		return
	}
	if !p.track(down) || !p.track(up) {
		down.Close()
		up.Close()
		return
	}
	defer p.untrack(down)
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, down, false); done <- struct{}{} }()
	go func() { p.pipe(down, up, true); done <- struct{}{} }()
	<-done
	down.Close()
	up.Close()
	<-done
}

// pipe copies src to dst; replies (upstream to client) are dropped while
// the proxy blackholes.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			mode, lat := p.state()
			if lat > 0 {
				time.Sleep(lat)
			}
			if mode == Cut {
				return
			}
			if !(reply && mode == Blackhole) {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // EOF or a closed connection: serve closes the other side
		}
	}
}
