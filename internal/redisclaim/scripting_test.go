package redisclaim_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
	"github.com/anarchon/anarchon/internal/redisclaim"
)

// TestServerWithoutScripting: a server that refuses Lua scripting (here an
// ACL user without @scripting; a proxy that does not pass EVAL answers the
// same way, with an error) stops every strategy at start with one error
// that says so, instead of failing each claim.
func TestServerWithoutScripting(t *testing.T) {
	c := rawClient(t)
	ctx := t.Context()
	var rnd [6]byte
	rand.Read(rnd[:])
	user, pass := "anarchon-noscript-"+hex.EncodeToString(rnd[:]), hex.EncodeToString(rnd[:])
	if err := c.Do(ctx, "ACL", "SETUSER", user, "on", ">"+pass, "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatalf("create the ACL user: %v", err)
	}
	t.Cleanup(func() { c.Do(ctx, "ACL", "DELUSER", user) })
	u, err := url.Parse(requireRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, pass)

	for _, strategy := range []string{"lease", "stream-id", "script"} {
		t.Run(strategy, func(t *testing.T) {
			o := redisclaim.Options{URL: u.String(), Namespace: newNamespace(t), Strategy: strategy}
			var err error
			if strategy == "lease" {
				_, err = redisclaim.New(ctx, o)
			} else {
				_, err = redisclaim.NewClaimOnly(ctx, o)
			}
			if err == nil {
				t.Fatal("a server without scripting must be refused at start")
			}
			t.Logf("start: %v", err)
			for _, want := range []string{"Lua scripting", "NOPERM"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error must say %q: %v", want, err)
				}
			}
			if !claim.IsPermanent(err) {
				t.Errorf("a refusal no retry changes (claim.IsPermanent): %v", err)
			}
			if strings.Contains(err.Error(), pass) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}
