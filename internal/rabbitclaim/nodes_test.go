package rabbitclaim_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/rabbitclaim"
	"github.com/anarchon/anarchon/internal/testserver"
)

// TestNodeList: a url listing several nodes connects to the first that
// answers, passing over a node where nothing listens; a refusal is
// permanent only when every node refuses, and no error quotes a
// password.
func TestNodeList(t *testing.T) {
	u := brokerURL(t)
	ports, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	dead := withHost(t, u, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	n := newNS(t, u)
	b := n.open(t, func(o *rabbitclaim.Options) { o.URL = dead + "," + u })
	if _, err := b.ListRuns(t.Context(), claim.ListQuery{Limit: 1}); err != nil {
		t.Fatalf("a dead node then a live one: %v", err)
	}

	// validate names each node and whether it answers.
	note, err := rabbitclaim.Check(t.Context(), dead+","+u)
	if err != nil || !strings.Contains(note, "1 of 2 nodes answer") || !strings.Contains(note, "connection refused") {
		t.Errorf("check of a dead node and a live one: %v\n%s", err, note)
	}
	// With no node answering, the open that follows says why, with the
	// fix of a refusal.
	if note, err := rabbitclaim.Check(t.Context(), dead); err != nil || note != "" {
		t.Errorf("check of a dead node: want nothing (the open reports it), got %q, %v", note, err)
	}

	pu, _ := url.Parse(u)
	pu.User = url.UserPassword("guest", "wrong-pw-zq")
	refused := pu.String()
	_, err = rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: dead + "," + refused, Namespace: n.name})
	if err == nil || claim.IsPermanent(err) {
		t.Fatalf("a dead node and a refusing one: want a transient error, got %v", err)
	}
	if !strings.Contains(err.Error(), "no node answered") || strings.Contains(err.Error(), "wrong-pw-zq") {
		t.Errorf("error %q: want it to say no node answered, without the password", err)
	}
	_, err = rabbitclaim.New(t.Context(), rabbitclaim.Options{URL: refused + "," + refused, Namespace: n.name})
	if err == nil || !claim.IsPermanent(err) {
		t.Fatalf("every node refusing: want a permanent error, got %v", err)
	}
	if !strings.Contains(err.Error(), "every node refused") || strings.Contains(err.Error(), "wrong-pw-zq") {
		t.Errorf("error %q: want it to say every node refused, without the password", err)
	}
}
