package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// LoadOptions tune Load and Parse.
type LoadOptions struct {
	// AllowInsecurePerms accepts a crontab that others than root and the
	// daemon's user can change: the file or a directory above it writable by
	// group or others, or owned by another user (development only; CLI flag
	// --insecure-allow-writable-config). Each is a warning instead.
	AllowInsecurePerms bool
	// Environ is the environment used for ANARCHON_* overrides, as
	// "NAME=value" strings; nil means the process environment (os.Environ),
	// read through viper.
	Environ []string
	// Hostname for the default instance id; nil means os.Hostname.
	Hostname func() (string, error)
	// MachineID for the default instance id; nil reads /etc/machine-id.
	MachineID func() (string, error)
	// Checks are the checks beyond the file's own rules (preflight.go).
	Checks Checks
}

// maxFileSize bounds the crontab Load reads.
const maxFileSize = 16 << 20

// insecureBits are the permission bits that let others rewrite the crontab
// (or replace it, on a directory), and so run commands as the daemon's user
// on every host.
const insecureBits = 0o022

// Load reads, checks and resolves the crontab at path (docs/spec.md#s6), with
// the ANARCHON_* environment overrides applied.
//
// When the crontab is invalid the error is an Errors listing every problem
// (use errors.As). An error reading the file is returned as a plain wrapped
// error. Load also refuses a crontab that others than root and the daemon's
// user can change (see checkTrust), unless opt.AllowInsecurePerms is set.
func Load(path string, opt LoadOptions) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("load config: %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load config: read %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("load config: %s is larger than %d MiB", path, maxFileSize>>20)
	}
	p := newParser(path, opt)
	if err := p.checkTrust(path, fi); err != nil {
		return nil, err
	}
	return p.run(data)
}

// checkTrust reports each path that lets others than root and the daemon's
// user change the crontab opened at path (fi): a problem, or a warning with
// opt.AllowInsecurePerms. An error walking the path is returned.
func (p *parser) checkTrust(path string, fi os.FileInfo) error {
	problems, final, err := checkTrust(path)
	if err != nil {
		return fmt.Errorf("load config: check who can change %s: %w", path, err)
	}
	if final == nil || !os.SameFile(fi, final) {
		return fmt.Errorf("load config: %s was replaced while it was read; try again", path)
	}
	for _, msg := range problems {
		if p.opt.AllowInsecurePerms {
			p.warnf("%s: %s; accepted because of --insecure-allow-writable-config (development only: do not run a crontab others can change)", path, msg)
		} else {
			p.errs = append(p.errs, &Error{File: path, Msg: msg + "; or pass --insecure-allow-writable-config for development"})
		}
	}
	return nil
}

// Parse checks and resolves a crontab held in data, as Load does, but without
// reading a file or checking its permissions. path names the crontab in
// problems and in Config.File.
func Parse(path string, data []byte, opt LoadOptions) (*Config, error) {
	return newParser(path, opt).run(data)
}

// parser collects the settings of one crontab and every problem with them.
type parser struct {
	file            string
	opt             LoadOptions
	errs            Errors
	warns           []string
	vals            map[string]*value // root settings by dotted path
	jobs            []*rawJob
	budget          int
	complexReported bool
	locs            map[string]*time.Location // time.LoadLocation cache
}

func newParser(file string, opt LoadOptions) *parser {
	return &parser{file: file, opt: opt, vals: map[string]*value{}, locs: map[string]*time.Location{}}
}

// run parses data and resolves it. It never panics: a panic of the YAML
// library is reported as invalid YAML, one of this package as an internal
// error.
func (p *parser) run(data []byte) (cfg *Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg = nil
			p.errs = append(p.errs, &Error{File: p.file, Msg: fmt.Sprintf(
				"internal error checking the config (please report): %v", r)})
			err = p.errs.sortAndDedup()
		}
	}()
	root, ok := p.parseYAML(data)
	if !ok {
		return nil, p.errs.sortAndDedup()
	}
	if !isNull(root) {
		if r := resolve(root); r == nil || r.Kind != yaml.MappingNode {
			p.errNode(root, "", "", "the crontab must be a mapping of settings (instance, namespace, backend, defaults, jobs, ...), not %s", describe(root))
		} else {
			p.walkMap(r, "", "", rootSpecs(), p.vals, nil)
		}
	}
	paths := scalarPaths()
	env := newEnvLayer(p.opt.Environ, paths)
	for _, ps := range paths {
		if name, val, ok := env.lookup(ps.path); ok {
			p.vals[ps.path] = &value{field: ps.path, env: name, text: val, secret: ps.spec.secret}
		}
	}
	p.warns = append(p.warns, env.unknown(paths)...)
	cfg = p.resolve()
	if len(p.errs) > 0 {
		return nil, p.errs.sortAndDedup()
	}
	return cfg, nil
}

// yamlLine finds the line in a YAML library error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML returns the root node of data's one document (nil for an empty
// file), or false after reporting malformed YAML.
func (p *parser) parseYAML(data []byte) (root *yaml.Node, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			p.errs = append(p.errs, &Error{File: p.file, Msg: fmt.Sprintf("invalid YAML: the parser failed: %v", r)})
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		p.yamlError(err, data)
		return nil, false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		p.errNode(&extra, "", "", "the file holds more than one YAML document (---); a crontab is one document")
	case !errors.Is(err, io.EOF):
		p.yamlError(err, data)
		return nil, false
	}
	if len(doc.Content) == 0 {
		return nil, true
	}
	return doc.Content[0], true
}

// yamlParserProblems start the messages of the YAML library's parser (not
// its scanner). For those, yaml.v3 reports the 0-based line of the mapping or
// list being parsed (its context mark), so one is added to get that line.
var yamlParserProblems = []string{
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected node content",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected <document start>",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
	"found undefined tag handle",
}

func (p *parser) yamlError(err error, data []byte) {
	msg := strings.TrimSpace(err.Error())
	e := &Error{File: p.file}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
		for _, pp := range yamlParserProblems {
			if strings.HasPrefix(msg, pp) {
				e.Line++
				msg += " (in the block that starts on this line)"
				break
			}
		}
		if n := bytes.Count(data, []byte("\n")) + 1; e.Line > n {
			e.Line = n
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	e.Msg = "invalid YAML: " + msg
	p.errs = append(p.errs, e)
}

// errNode reports a problem at a node of the file.
func (p *parser) errNode(n *yaml.Node, job, field, format string, args ...any) {
	e := &Error{File: p.file, Job: job, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

// errorf reports a problem with a setting; v == nil (a built-in default)
// reports it at the file with no line.
func (p *parser) errorf(v *value, format string, args ...any) {
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if v != nil {
		e.Line, e.Column, e.Env, e.Job, e.Field = v.line, v.col, v.env, v.job, v.field
	}
	p.errs = append(p.errs, e)
}

// errAt reports a problem at a place given by hand.
func (p *parser) errAt(e *Error) {
	e.File = p.file
	p.errs = append(p.errs, e)
}

func (p *parser) warnf(format string, args ...any) {
	p.warns = append(p.warns, fmt.Sprintf(format, args...))
}

// defaultInstance is <hostname>-<4 hex>, the hex from a hash of the
// machine id (the hostname where /etc/machine-id cannot be read) and the
// crontab's absolute path: the same across restarts, and different for
// two crontabs on one host (docs/spec.md#s6-cluster).
func (p *parser) defaultInstance() string {
	hostname := os.Hostname
	if p.opt.Hostname != nil {
		hostname = p.opt.Hostname
	}
	h, err := hostname()
	h = sanitizeHost(h)
	if err != nil || h == "" {
		if err == nil {
			err = errors.New("empty hostname")
		}
		p.warnf("cannot read the hostname for the default instance id (%v); using %q; set instance to name this host", err, "anarchond")
		h = "anarchond"
	}
	return h + "-" + instanceSuffix(p.machineID(h), p.file)
}

// instanceSuffix is 4 hex digits of a hash of the machine id and the
// crontab's absolute path.
func instanceSuffix(machine, file string) string {
	if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}
	sum := sha256.Sum256([]byte(machine + "\x00" + file))
	return hex.EncodeToString(sum[:2])
}

// machineID is the host's machine id, or host when it cannot be read.
func (p *parser) machineID(host string) string {
	read := p.opt.MachineID
	if read == nil {
		read = func() (string, error) {
			b, err := os.ReadFile("/etc/machine-id")
			return string(b), err
		}
	}
	if id, err := read(); err == nil && strings.TrimSpace(id) != "" {
		return strings.TrimSpace(id)
	}
	return host
}

// sanitizeHost keeps a hostname usable as an instance id: no white space or
// control characters, at most 200 bytes.
func sanitizeHost(h string) string {
	h = strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '-'
		}
		return r
	}, strings.TrimSpace(h))
	if len(h) > 200 {
		h = h[:200]
	}
	return h
}
