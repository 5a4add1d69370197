package store

import (
	"crypto/tls"
	"fmt"

	"github.com/anarchon/anarchon/internal/storetls"
)

// Kind is the YAML shape a key takes.
type Kind uint8

// The kinds of keys a store's section may have.
const (
	String   Kind = iota // a YAML string
	Int                  // a YAML integer
	Bool                 // true or false
	Duration             // a Go duration string: "90s"
	Map                  // a mapping of the keys in Children
	Strings              // a YAML list of strings
)

// Key is one key of a store's section.
type Key struct {
	Name string
	Kind Kind
	// Secret: the value may hold a password (a URL, a DSN); messages
	// never quote it.
	Secret bool
	// Children are a Map's keys.
	Children []Key
}

// TLSKey is the tls block every network store takes (its keys are
// storetls.Settings'); Section.TLS reads it.
var TLSKey = Key{Name: "tls", Kind: Map, Children: []Key{
	{Name: "caFile", Kind: String},
	{Name: "certFile", Kind: String},
	{Name: "keyFile", Kind: String},
	{Name: "serverName", Kind: String},
	{Name: "insecureSkipVerify", Kind: Bool},
}}

// NetworkKeys are the keys of the section of a store reached over the
// network: addr, the server's address (a URL or DSN, which may hold a
// password), passwordFile (a file whose content overrides that password),
// the store's own keys, and the tls block (TLSKey).
func NetworkKeys(addr string, own ...Key) []Key {
	keys := append([]Key{{Name: addr, Kind: String, Secret: true}, {Name: "passwordFile", Kind: String}}, own...)
	return append(keys, TLSKey)
}

// TLSConfig is the client TLS configuration of the tls block t of store
// name's section (nil: none); its errors name the key (backend.<name>.tls...).
func TLSConfig(name string, t storetls.Settings) (*tls.Config, error) {
	c, err := storetls.Config(t)
	if err != nil {
		return nil, fmt.Errorf("backend.%s.%w", name, err)
	}
	return c, nil
}

// Section reads one store's section of the crontab (backend.<name>), with
// the ANARCHON_BACKEND_<NAME>_* overrides applied. Keys are relative to the
// section ("url", "strategyOptions.windowMs"). A value of the wrong type,
// or one check refuses, is reported at its place (file, line, field or
// environment variable) and the default is returned instead, so that
// every problem of the crontab is reported at once.
type Section interface {
	// Selected reports whether backend.type names this store.
	Selected() bool
	// Set reports whether key is given (in the file or the environment).
	Set(key string) bool
	// String, Int, Bool and Duration return key's value, or dflt when
	// it is not given. check, if not nil, returns what is wrong with a
	// value ("" for nothing), said as the fix: "must be one of a, b".
	String(key, dflt string, check func(string) string) string
	Int(key string, dflt int64, check func(int64) string) int64
	Bool(key string, dflt bool) bool
	// Strings returns key's list (a Strings key), or nil when it is not
	// given; check, if not nil, is asked of each item, and an item it
	// refuses is reported at its place and left out.
	Strings(key string, check func(string) string) []string
	// Path is a file name: relative to the crontab's directory, so that
	// every command given the same --config opens the same file.
	Path(key, dflt string) string
	// TLS reads the tls block (TLSKey), its file names as Path does.
	TLS() storetls.Settings
	// Errorf reports a problem at key's place, or at backend.type's when
	// key is not given (a required key that is missing).
	Errorf(key, format string, args ...any)
}
