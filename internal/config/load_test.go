package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/natsclaim"
	"github.com/anarchon/anarchon/internal/pgclaim"
	"github.com/anarchon/anarchon/internal/sqliteclaim"
)

func writeCrontab(t *testing.T, data string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crontab.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // not subject to the umask
		t.Fatal(err)
	}
	return path
}

func TestLoadPermissions(t *testing.T) {
	valid := "jobs:\n" + job("a")
	for _, tc := range []struct {
		name    string
		mode    os.FileMode
		allow   bool
		wantErr string
		warn    string
	}{
		{name: "0644", mode: 0o644},
		{name: "0600", mode: 0o600},
		{name: "0666", mode: 0o666, wantErr: "is writable by group or others (mode 0666); fix with chmod go-w "},
		{name: "0620 group-writable", mode: 0o620, wantErr: "(mode 0620)"},
		{name: "0602 world-writable", mode: 0o602, wantErr: "(mode 0602)"},
		{name: "0666 allowed", mode: 0o666, allow: true, warn: "accepted because of --insecure-allow-writable-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeCrontab(t, valid, tc.mode)
			cfg, err := Load(path, LoadOptions{AllowInsecurePerms: tc.allow, Environ: noEnv, Hostname: fixedHost})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.File != path || len(cfg.Jobs) != 1 {
					t.Errorf("got %+v", cfg)
				}
				if got := strings.Join(cfg.Warnings, "\n"); tc.warn != "" && !strings.Contains(got, tc.warn) || tc.warn == "" && got != "" {
					t.Errorf("warnings %q, want %q", got, tc.warn)
				}
				return
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("got %v", err)
			}
			e := errs[0]
			if e.File != path || e.Line != 0 || !strings.Contains(e.Msg, tc.wantErr) ||
				!strings.HasSuffix(e.Msg, "chmod go-w "+path+"; or pass --insecure-allow-writable-config for development") {
				t.Errorf("got %+v", e)
			}
			if want := path + ": file is writable"; !strings.HasPrefix(e.Error(), want) {
				t.Errorf("got %q, want prefix %q", e.Error(), want)
			}
		})
	}
}

func TestLoadListsPermissionsWithOtherProblems(t *testing.T) {
	path := writeCrontab(t, "namespace: \"a b\"\n", 0o666)
	_, err := Load(path, opts(nil))
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 2 || errs[0].Line != 0 || errs[1].Line != 1 {
		t.Fatalf("got %v", err)
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing.yaml"), dir} {
		_, err := Load(path, opts(nil))
		var errs Errors
		if err == nil || errors.As(err, &errs) {
			t.Errorf("Load(%s): got %v (%T), want a plain error", path, err, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "load config: ") || !strings.Contains(err.Error(), path) {
			t.Errorf("Load(%s): %v", path, err)
		}
	}
	_, err := Load(filepath.Join(dir, "missing.yaml"), opts(nil))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("not wrapped: %v", err)
	}
}

// TestExampleConfig keeps configs/example.yaml valid. Permissions are not
// its point (a checkout's mode depends on the umask).
func TestExampleConfig(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "example.yaml")
	cfg, err := Load(path, LoadOptions{AllowInsecurePerms: true, Environ: noEnv, Hostname: fixedHost})
	if err != nil {
		t.Fatalf("configs/example.yaml is invalid:\n%v", err)
	}
	for _, w := range cfg.Warnings {
		if !strings.Contains(w, "--insecure-allow-writable-config") {
			t.Errorf("warning: %s", w)
		}
	}
	if cfg.Backend.Type != "sqlite" || cfg.Backend.Store.(sqliteclaim.Settings).Path != filepath.Join("..", "..", "data", "anarchon.db") || len(cfg.Jobs) != 2 {
		t.Fatalf("got %+v", cfg)
	}
	hello, minute := cfg.Jobs[0], cfg.Jobs[1]
	if hello.Name != "hello" || hello.Schedule != "*/2 * * * * *" ||
		hello.Command != `echo "hello from $ANARCHON_INSTANCE slot $ANARCHON_SLOT attempt $ANARCHON_ATTEMPT"` {
		t.Errorf("hello: %+v", hello)
	}
	if minute.Schedule != "* * * * *" || minute.Location == nil || minute.Location.String() != "Europe/Athens" {
		t.Errorf("minute job: %+v", minute)
	}
}

// TestRelativePathsFollowTheCrontab: the store's relative file paths are
// relative to the crontab's directory, whatever the working directory;
// absolute ones and job workdirs are kept as written.
func TestRelativePathsFollowTheCrontab(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "anarchon.yaml")
	data := "backend:\n  type: sqlite\n  sqlite: {path: state/anarchon.db}\n" +
		"  postgres: {dsn: \"postgres://h/db\", passwordFile: ../secrets/pg, tls: {caFile: ca.pem, certFile: /abs/c.pem, keyFile: k.pem}}\n" +
		"  nats: {passwordFile: ./nats-pw}\n" +
		"jobs:\n" + job("a") + "    workdir: work\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // another working directory
	cfg, err := Load(path, opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	pg := cfg.Backend.sections["postgres"].(pgclaim.Settings)
	for _, tc := range []struct{ got, want string }{
		{cfg.Backend.Store.(sqliteclaim.Settings).Path, filepath.Join(dir, "state", "anarchon.db")},
		{pg.PasswordFile, filepath.Join(filepath.Dir(dir), "secrets", "pg")},
		{pg.TLS.CAFile, filepath.Join(dir, "ca.pem")},
		{pg.TLS.CertFile, "/abs/c.pem"},
		{pg.TLS.KeyFile, filepath.Join(dir, "k.pem")},
		{cfg.Backend.sections["nats"].(natsclaim.Settings).PasswordFile, filepath.Join(dir, "nats-pw")},
		{cfg.Jobs[0].Workdir, "work"},
	} {
		got, want := tc.got, tc.want
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
