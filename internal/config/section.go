package config

import (
	"fmt"
	"time"

	"github.com/anarchon/anarchon/internal/store"
	"github.com/anarchon/anarchon/internal/storetls"
)

// section is one store's section of the crontab (backend.<name>), read for
// its driver (store.Section).
type section struct {
	p        *parser
	prefix   string // "backend.redis."
	selected bool
	typeAt   *value // backend.type as given; nil: the built-in default
}

var _ store.Section = (*section)(nil)

func (s *section) Selected() bool { return s.selected }

func (s *section) Set(key string) bool { return s.p.vals[s.prefix+key] != nil }

func (s *section) String(key, dflt string, check func(string) string) string {
	return get(s.p, s.p.vals, s.prefix+key, def(dflt), s.p.asString, check).val
}

func (s *section) Int(key string, dflt int64, check func(int64) string) int64 {
	return get(s.p, s.p.vals, s.prefix+key, def(dflt), s.p.asInt, check).val
}

func (s *section) Bool(key string, dflt bool) bool {
	return get(s.p, s.p.vals, s.prefix+key, def(dflt), s.p.asBool, nil).val
}

func (s *section) Strings(key string, check func(string) string) []string {
	v := s.p.vals[s.prefix+key]
	if v == nil {
		return nil
	}
	items, ok := s.p.asStrings(v)
	if !ok || check == nil {
		return items
	}
	out := items[:0]
	for i, it := range items {
		if msg := check(it); msg != "" {
			s.p.errNode(v.node.Content[i], v.job, fmt.Sprintf("%s[%d]", v.field, i), "%s", msg)
			continue
		}
		out = append(out, it)
	}
	return out
}

func (s *section) Path(key, dflt string) string {
	return s.p.anchor(s.String(key, dflt, store.NotEmpty))
}

func (s *section) Errorf(key, format string, args ...any) {
	if v := s.p.vals[s.prefix+key]; v != nil {
		s.p.errorf(v, format, args...)
		return
	}
	s.p.errAt(&Error{Line: lineOf(s.typeAt), Column: colOf(s.typeAt), Env: envOf(s.typeAt),
		Field: s.prefix + key, Msg: fmt.Sprintf(format, args...)})
}

// TLS reads the tls block. A client certificate needs its key and the key
// its certificate.
func (s *section) TLS() storetls.Settings {
	str := func(key string) setting[string] {
		return get(s.p, s.p.vals, s.prefix+"tls."+key, def(""), s.p.asString, store.NotEmpty)
	}
	cert, key := str("certFile"), str("keyFile")
	t := storetls.Settings{
		CAFile: s.p.anchor(str("caFile").val), CertFile: s.p.anchor(cert.val), KeyFile: s.p.anchor(key.val),
		ServerName: str("serverName").val, InsecureSkipVerify: s.Bool("tls.insecureSkipVerify", false),
	}
	switch {
	case cert.val != "" && key.val == "":
		s.p.errorf(cert.at, "certFile needs keyFile (the client certificate's private key)")
	case key.val != "" && cert.val == "":
		s.p.errorf(key.at, "keyFile needs certFile (the client certificate)")
	}
	return t
}

// resolveBackend reads backend.type, backend.retention and every
// registered store's section; cfg gets the selected one's settings.
func (p *parser) resolveBackend(b *Backend) (typ setting[string], retention setting[time.Duration]) {
	typ = get(p, p.vals, "backend.type", def(defaultBackendType), p.asString, store.OneOf(store.Names()...))
	b.Type = typ.val
	retention = get(p, p.vals, "backend.retention", def(defaultRetention), p.asDuration, positiveDuration)
	b.Retention = retention.val
	b.sections = map[string]store.Settings{}
	for _, d := range store.Drivers() {
		sec := &section{p: p, prefix: "backend." + d.Name + ".", selected: d.Name == b.Type, typeAt: typ.at}
		b.sections[d.Name] = d.Parse(sec)
	}
	b.Store = b.sections[b.Type]
	return typ, retention
}
